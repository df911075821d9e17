"""A Python worker process: started by a node agent with the driver's
interpreter (`python -m rayx._worker`), it serves the calls of one lease.

rayx._core runs librayx's worker loop on this thread with the GIL released and
calls `dispatch` (with the GIL) for each call. Functions and classes are read
from the head's KV by their content key once and cached.

An actor that runs its calls concurrently (an async or threaded actor,
rayx._concurrency) gets each method call with a `done` handle instead: dispatch
decodes the arguments here (their memory is the call's only), hands the call
to the actor's executor and returns; the call answers through `done` from the
thread that ran it, and the worker loop sends that answer.
"""

import contextvars
import inspect
import os
import pickle
import sys
import traceback

from rayx import _api, _core
from rayx import _remote
from rayx import _serialization as ser
from rayx import exceptions
from rayx._remote import EXIT_METHOD, KV_NAMESPACE, READY_METHOD, _Slot

_code = {}  # KV key -> function or class

# The runtime_env this worker was started with (its --runtime-env argument),
# until the first call applies it (then None); _ENV_FAILED when that failed,
# with the error in _env_error (every call answers with it).
_ENV_FAILED = object()
_env_pending = None
_env_error = None
# Calls this process has run (get_runtime_context().get_task_id() names the
# running one by it), and whether the last task set a call context.
_calls = 0
_ctx_set = False
# The id of the actor this process hosts, from its methods' calls.
_actor_id = None
# The executor of an actor that runs its calls concurrently (rayx._concurrency),
# else None; and the number of the call running in this thread or asyncio task
# (None: the last call dispatched, which runs on this thread).
_executor = None
_running_call = contextvars.ContextVar("rayx_running_call", default=None)
# Where an actor that can restart records its incarnation (its first
# construction), so that a restart knows it is one.
_INCARNATION_NAMESPACE = "rayx.py.incarnation"
_EXIT_NAMESPACE = "rayx.py.exit"
# rayx._runtime_env.ARG (not imported unless a worker has a runtime_env).
_RUNTIME_ENV_ARG = "--runtime-env"


def _load(key, name):
    obj = _code.get(key)
    if obj is not None:
        return obj
    code = _core.kv_get(KV_NAMESPACE, key)
    if code is None:
        raise RuntimeError(f"the code of {name} is not in the cluster's KV (key {key}): its job "
                           "ended, or it was exported by another cluster")
    obj = pickle.loads(code)  # an ImportError here names the missing module
    _code[key] = obj
    return obj


def _decode_args(blob, ref_blobs):
    if not ref_blobs:  # no ObjectRef among the arguments: no slots to fill
        return ser.loads(blob, copy_buffers=True)[1]
    values = []
    for b in ref_blobs:
        flags, v = ser.loads(b, copy_buffers=True)
        if flags & ser.FLAG_ERROR:
            raise _api._error_from(v)  # an argument's task failed: so does this call
        values.append(v)

    def nested(pid):
        i, index = pid
        return _api._resolved_ref(values[i] if index is None else values[i][index])

    _, (args, kwargs) = ser.loads(blob, on_ref=nested, copy_buffers=True)

    def fill(a):
        if isinstance(a, _Slot):
            v = values[a.i]
            return v if a.index is None else v[a.index]
        return a

    return [fill(a) for a in args], {k: fill(v) for k, v in kwargs.items()}


def _result(value, num_returns, name, emit=None):
    """The bytes of a call's result. A generator call (num_returns
    "streaming" or "dynamic") sends each item through emit(bytes) as it is
    yielded (default: to the caller now, _core.yield_item) and its result is
    the number of items."""
    if isinstance(num_returns, str):
        return _stream(value, name, emit or _core.yield_item)
    if num_returns > 1 and inspect.isgenerator(value):
        value = _fixed_returns(value, num_returns, name)
    if num_returns > 1:
        if not isinstance(value, (tuple, list)) or len(value) != num_returns:
            got = len(value) if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
            raise ValueError(f"{name} has num_returns={num_returns} but returned {got}")
        value = tuple(value)
    return _api._result_bytes(value)


def _stream(value, name, emit):
    """A generator's items, each emitted as it comes; an exception it raises
    is its last item (as in Ray: the ref after the items yielded before it
    raises it). The result is the number of items."""
    if not hasattr(value, "__next__"):
        raise TypeError(f"{name} is called as a generator (num_returns=\"streaming\" or "
                        f"\"dynamic\") but returned a {type(value).__name__}: make it a "
                        "generator function (use yield)")
    count = 0
    try:
        for item in value:
            emit(_api._result_bytes(item))
            count += 1
    except Exception as e:  # noqa: BLE001 - the caller gets it, in its place
        emit(_error(e, name))
        count += 1
    return ser.to_bytes(count)


async def _stream_async(value, name, emit):
    """An async generator's items (an async actor's `async def` with yield)."""
    count = 0
    try:
        async for item in value:
            emit(_api._result_bytes(item))
            count += 1
    except Exception as e:  # noqa: BLE001 - as in _stream
        emit(_error(e, name))
        count += 1
    return ser.to_bytes(count)


def _fixed_returns(gen, num_returns, name):
    """A generator function with num_returns=n (an int): its first n items,
    as Ray makes them. Once it raises, that error stands for each return it
    did not make. As Ray documents, an error after the n-th item, or more
    than n items, is only logged (to the worker's stderr); fewer items is an
    error."""
    items = []
    try:
        for item in gen:
            if len(items) == num_returns:
                print(f"{name} has num_returns={num_returns} but yields more items: the ones "
                      "after those are dropped", file=sys.stderr)
                break
            items.append(item)
    except Exception as e:  # noqa: BLE001 - the caller gets it from the returns left
        if len(items) == num_returns:
            traceback.print_exc()  # every return was made: Ray only logs it
            return items
        failed = _api.FailedReturn(ser.loads(_error(e, name))[1])
        return items + [failed] * (num_returns - len(items))
    if len(items) != num_returns:
        raise ValueError(f"{name} has num_returns={num_returns} but yielded {len(items)} items")
    return items


def _retriable(e, retry):
    """Whether the task's retry_exceptions (True, or qualified class names) covers `e`."""
    if retry is True:
        return True
    if not retry:
        return False
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(e).__mro__}
    return any(n in names for n in retry)


def _error(e, name, retriable=False):
    """The result of a call that raised `e`: (cause, function, traceback, node,
    pid) where cause is the exception serialized on its own, so that the
    caller gets the traceback even when it cannot rebuild the exception."""
    flags = ser.FLAG_ERROR | (ser.FLAG_RETRIABLE if retriable else 0)
    if isinstance(e, exceptions.RayxTaskError):
        cause, tb = e.cause, e.traceback_str  # an argument's error, passed on
        payload = (e.function_name, e.node_ip, e.pid)
    else:
        cause = e
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        payload = (name, os.environ.get("RAYX_NODE_IP", ""), os.getpid())
    blob, tb = _cause_blob(cause, tb)
    function, node, pid = payload
    return ser.to_bytes((blob, function, tb, node, pid), flags)


def _cause_blob(cause, tb):
    """(the exception serialized, tb), or (None, tb with why) when it cannot
    be serialized or rebuilt from its pickle (e.g. its __init__ takes other
    arguments than its args): the caller then raises a RayxTaskError with
    the traceback alone."""
    if cause is None:
        return None, tb
    try:
        blob = bytes(ser.to_bytes(cause, on_ref=_api._refuse_ref))
        ser.loads(blob, copy_buffers=True)
        return blob, tb
    except Exception as e:  # noqa: BLE001 - reported with the traceback
        return None, tb + _not_rebuilt(cause, e)


def _not_rebuilt(cause, error):
    return (f"\n(rayx: the {type(cause).__name__} cannot be rebuilt from its pickle "
            f"({type(error).__name__}: {error}): raised as a RayxTaskError)\n")


def _call_from_cpp(views):
    """A call from C++ (rayx::PyFunction): msgpack module, function, arguments.
    Exceptions propagate: the C++ caller gets their type and traceback."""
    import importlib
    module = _core.msgpack_loads(views[0])
    function = _core.msgpack_loads(views[1])
    args = [_core.msgpack_loads(v) for v in views[2:]]
    fn = getattr(importlib.import_module(module), function)
    return _core.msgpack_dumps(fn(*args), f"the result of {module}.{function}")


def _env_failure():
    """Applies the runtime_env this worker was started with, once; returns
    the error that setting it up raised (every call answers with it), or None."""
    global _env_pending, _env_error
    if _env_pending is _ENV_FAILED:
        return _env_error
    env = _env_pending
    from rayx import _runtime_env
    try:
        _runtime_env.apply(env)
    except exceptions.RuntimeEnvSetupError as e:
        _env_pending, _env_error = _ENV_FAILED, e
        return e
    _env_pending = None
    return None


def _create(header, views):
    """Constructs the actor this worker hosts (a failure marks it dead, with
    the traceback)."""
    key, name, _, *rest = header
    ctx = rest[0] if rest else None
    _remote._is_actor = True
    if ctx:
        _remote._call_ctx = ctx
        if ctx.get("cap"):
            _remote._capture = ctx["pg"]
        if ctx.get("env"):
            from rayx import _runtime_env
            _runtime_env.apply(ctx["env"])  # before the class (and what it imports) loads
        if ctx.get("incarnation"):
            # The first construction records the incarnation; a restart finds it.
            first = _core.kv_put(_INCARNATION_NAMESPACE, ctx["incarnation"], b"1", False,
                                 not ctx.get("detached"))
            _remote._actor_reconstructed = not first
    cls = _load(key, name)
    args, kwargs = _decode_args(views[1], views[2:])
    instance = cls(*args, **kwargs)
    _start_executor(cls, (ctx or {}).get("conc") or {})
    return instance


def _start_executor(cls, conc):
    """Makes the actor run its calls concurrently when its class or options
    (conc: {"max": max_concurrency, "groups": concurrency_groups}) ask for it."""
    global _executor
    from rayx import _concurrency
    executor = _concurrency.for_actor(cls, conc.get("max"), conc.get("groups"))
    if executor is not None:
        _executor = executor
        _core.defer_method_calls()


def _exit_once(views):
    """rayx.kill(no_restart=False): exits as a crash would, once per kill (a
    call the runtime sends again to the restarted actor finds its token used)."""
    (token,), _ = _decode_args(views[1], views[2:])
    return _exit_with(token)


def _exit_with(token):
    if not _core.kv_put(_EXIT_NAMESPACE, token, b"1", False, True):
        return ser.to_bytes(None)
    _exit_process(1)


def _exit_deferred(done, token):
    """The exit of an actor whose calls run on other threads: the worker loop
    ends the process once the results of the calls before it are sent (an exit
    from this thread could overtake them)."""
    if not _core.kv_put(_EXIT_NAMESPACE, token, b"1", False, True):
        done.succeed(ser.to_bytes(None))  # a kill already used (a restarted actor)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    done.fail(_core.WORKER_EXIT_ANSWER, "1")


def _exit_process(code):
    """Ends this worker once the results it sent have left (a plain
    os._exit could drop them from the socket's queue)."""
    sys.stdout.flush()
    sys.stderr.flush()
    _core.exit_worker(code)


def _exit_code(e):
    """The exit status sys.exit(e.code) asks for."""
    return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


def _current_call():
    """The number of the call running here (get_runtime_context().get_task_id())."""
    n = _running_call.get()
    return _calls if n is None else n


def _no_groups(instance, header):
    """The error of a call that names a concurrency group (header[3]) of an
    actor that has none."""
    return ValueError(f"{type(instance).__name__}.{header[0]}: concurrency group {header[3]!r} is "
                      "not one of the actor's groups (it has none): declare it with "
                      "@rayx.remote(concurrency_groups={...: max concurrency})")


def _dispatch_deferred(instance, views, done):
    """A method call of an actor with an executor: answered through `done`."""
    global _calls, _actor_id
    name, num_returns, actor, *rest = pickle.loads(views[0])
    if _actor_id is None:
        _actor_id = actor
    _calls += 1
    if name == READY_METHOD:
        done.succeed(ser.to_bytes(None))
        return
    if name == EXIT_METHOD:
        # Once the calls sent before it have run, as for an actor without one.
        (token,), _ = _decode_args(views[1], views[2:])
        _executor.after_running(lambda: _exit_deferred(done, token))
        return
    qualified = f"{type(instance).__name__}.{name}"
    try:
        fn = getattr(instance, name, None)
        if fn is None:
            raise AttributeError(f"{type(instance).__name__} has no method {name!r}")
        group = _executor.group_of(name, fn, rest[0] if rest else None)
        args, kwargs = _decode_args(views[1], views[2:])
    except Exception as e:  # noqa: BLE001 - the caller gets it
        done.succeed(_error(e, qualified))
        return
    job = _run_async if hasattr(_executor, "loop") else _run_threaded
    _executor.submit(group, job, fn, args, kwargs, num_returns, qualified, done, _calls)


async def _run_async(fn, args, kwargs, num_returns, name, done, call):
    """One call of an async actor, as a task on its event loop."""
    import asyncio
    import inspect
    _running_call.set(call)
    try:
        value = fn(*args, **kwargs)
        if inspect.isasyncgen(value) and isinstance(num_returns, str):
            out = await _stream_async(value, name, done.item)
        else:
            if inspect.isawaitable(value):
                value = await value
            out = _result(value, num_returns, name, done.item)
    except Exception as e:  # noqa: BLE001 - user errors travel back to the caller
        out = _error(e, name)
    except asyncio.CancelledError:
        out = _error(exceptions.TaskCancelledError._with_message(
            f"{name} was cancelled inside the actor (its asyncio task was cancelled)"), name)
    except SystemExit as e:
        _exit_process(_exit_code(e))  # sys.exit() ends the actor, as in a sync method
    _answer(done, lambda: out, name)


def _run_threaded(fn, args, kwargs, num_returns, name, done, call):
    """One call of a threaded actor, on a thread of its group's pool."""
    _running_call.set(call)
    try:
        out = _result(fn(*args, **kwargs), num_returns, name, done.item)
    except Exception as e:  # noqa: BLE001 - user errors travel back to the caller
        out = _error(e, name)
    except SystemExit as e:
        _exit_process(_exit_code(e))
    _answer(done, lambda: out, name)


def _answer(done, make, name):
    """Answers `done` with make()'s bytes; a failure to make or give them
    fails the call with the traceback (never leaves it unanswered)."""
    try:
        done.succeed(make())
    except Exception as e:  # noqa: BLE001 - reported to the caller
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        done.fail("RayxError", f"{name}: its result could not be sent:\n{tb}")


# A call runs on this worker's main thread (where signal handlers run): the
# one a memory-pressure request (SIGUSR1 from the node's memory monitor) ends.
_main_call = False


def _memory_short():
    """(short, used, threshold): whether this machine's memory use is above
    the node's memory monitor threshold (RAYX_MEMORY_USAGE_THRESHOLD) now; None
    when unknown. A request that arrived late (the worker was idle in C++)
    must not end a call once memory is back."""
    try:
        threshold = float(os.environ.get("RAYX_MEMORY_USAGE_THRESHOLD", ""))
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                info[name] = int(rest.split()[0])
        used = 1 - info["MemAvailable"] / info["MemTotal"]
    except (ValueError, KeyError, OSError, ZeroDivisionError):
        return None
    return used > threshold, used, threshold


def _on_memory_pressure(signum, frame):
    del signum, frame
    if not _main_call:
        return
    short = _memory_short()
    if short and short[0]:
        raise exceptions.OutOfMemoryError._with_message(
            f"the node's memory monitor stopped this call: memory use on "
            f"{os.environ.get('RAYX_NODE_IP', 'this node')} was {short[1]:.0%}, above its "
            f"threshold of {short[2]:.0%} (rayx start --memory-usage-threshold; init("
            "_system_config={'memory_usage_threshold': ...})). Use less memory per task, "
            "or ask for more with num_cpus/memory so fewer run at once.")


def dispatch(kind, instance, views, done=None):
    global _main_call
    if done is not None:
        return _dispatch_deferred(instance, views, done)
    _main_call = True
    try:
        return _dispatch(kind, instance, views)
    finally:
        _main_call = False


_announced = None


def _announce(label):
    """Names the output that follows ("(label pid=N, ip=A)" in the driver):
    a marker line the node's agent takes out of this worker's output, written
    when the running function or actor class changes."""
    global _announced
    if label != _announced:
        _announced = label
        sys.stderr.flush()
        sys.stdout.write(_core.OUTPUT_NAME_MARKER + label + "\n")
        sys.stdout.flush()


def _dispatch(kind, instance, views):
    global _calls, _ctx_set, _actor_id
    if kind == "xlang":
        return _call_from_cpp(views)
    if _env_pending is not None:
        failure = _env_failure()
        if failure is not None:
            if kind == "create":
                raise failure
            return _error(failure, "runtime_env setup")
    header = pickle.loads(views[0])
    if kind == "create":
        _announce(str(header[1]).rsplit(".", 1)[-1])
        return _create(header, views)
    _calls += 1
    if kind == "task":
        # retry: the task's retry_exceptions (False, True or qualified class
        # names); ctx: its call context (rayx._remote._call_ctx), mostly None.
        key, name, num_returns, retry, ctx = header
        if ctx is not None or _ctx_set:
            _ctx_set = ctx is not None
            _remote._call_ctx = ctx
            _remote._capture = ctx["pg"] if ctx is not None and ctx.get("cap") else None
    else:
        if len(header) != 3:
            return _error(_no_groups(instance, header), f"{type(instance).__name__}.{header[0]}")
        name, num_returns, actor = header
        retry = False
        if _actor_id is None:
            _actor_id = actor
    running = False  # exceptions before the function runs (a failed argument) never retry
    try:
        if kind == "task":
            _announce(str(name))
            fn = _load(key, name)
        elif name == READY_METHOD:
            return ser.to_bytes(None)
        elif name == EXIT_METHOD:
            return _exit_once(views)
        else:
            fn = getattr(instance, name, None)
            if fn is None:
                raise AttributeError(f"{type(instance).__name__} has no method {name!r}")
            name = f"{type(instance).__name__}.{name}"
        args, kwargs = _decode_args(views[1], views[2:])
        running = True
        return _result(fn(*args, **kwargs), num_returns, name)
    except Exception as e:  # noqa: BLE001 - user errors travel back to the caller
        return _error(e, name, running and _retriable(e, retry))
    except SystemExit as e:
        # sys.exit() in a call ends this worker, as in Ray: the caller gets
        # ActorDiedError (an actor) or WorkerCrashedError (a task).
        _exit_process(_exit_code(e))


def main():
    global _env_pending
    _api._mode = "worker"
    # Tasks this worker submits start workers the way its own was started
    # (with its runtime_env, which the first call applies).
    _remote._call_count = _current_call
    _remote._hosted_actor_id = lambda: _actor_id
    args = sys.argv[1:]
    if "--namespace" in args[:-1]:
        _api._namespace = args[args.index("--namespace") + 1]
    if _RUNTIME_ENV_ARG in args[:-1]:
        import json
        from rayx import _runtime_env
        _env_pending = json.loads(args[args.index(_RUNTIME_ENV_ARG) + 1])
        _runtime_env.install_worker_command(_env_pending)
    else:
        _core.set_worker_command(*_api._worker_command())
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    import signal
    signal.signal(signal.SIGUSR1, _on_memory_pressure)
    _core.serve_worker(dispatch)


if __name__ == "__main__":
    main()
