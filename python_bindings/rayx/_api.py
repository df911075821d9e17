"""rayx's Python API: init, objects (put/get/wait), cluster queries.

Everything here is a thin layer over rayx._core (librayx); the blocking calls
release the GIL there and can be interrupted with Ctrl-C.
"""

import atexit
import os
import sys
import threading

from rayx import _core
from rayx import _serialization as ser
from rayx import exceptions

# "driver" in a program that called init(); "worker" in a process a node agent
# started (there the runtime joins the job on first use).
_mode = None
_lock = threading.Lock()
_atexit_registered = False
# Counts this process's successful init() calls. Each one starts a new job
# (maybe on another cluster), so what was exported for an earlier one is gone:
# caches of exported code hold the generation they were made in.
generation = 0
# init(namespace=): the namespace of this job's actor names (None: shared names).
_namespace = None
# init(runtime_env=), resolved (directories uploaded): what every worker of the
# job applies. None when the job has none.
_job_runtime_env = None


def _worker_command():
    """How the node agents start this program's workers: this interpreter (the
    same venv) running rayx._worker, with this program's import path (in a
    worker: the one it was started with)."""
    args = ["-m", "rayx._worker"]
    if _namespace:
        args += ["--namespace", _namespace]  # the job's, for get_actor in its workers
    if _mode == "worker":
        return sys.executable, args, {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [package_parent]
    for p in sys.path:
        if p and os.path.isdir(p) and p not in paths:
            paths.append(p)
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    return sys.executable, args, env


# Ray's init() arguments that have no meaning in rayx: accepted (a Ray program
# runs unchanged) and named in one warning when given a value other than Ray's
# default. Name -> (default, why it has no effect).
_IGNORED_INIT_ARGS = {
    "local_mode": (False, "tasks always run in worker processes"),
    "include_dashboard": (None, "rayx has no dashboard"),
    "dashboard_host": (None, "rayx has no dashboard"),
    "dashboard_port": (None, "rayx has no dashboard"),
    "logging_format": (None, "configure the 'rayx' logger with the logging module"),
    "logging_config": (None, "configure the 'rayx' logger with the logging module"),
    "storage": (None, "rayx has no cluster storage (Train: RunConfig.storage_path)"),
    "labels": (None, "node labels are set by `rayx start --labels`"),
    "_system_config": (None, "rayx has no such settings (memory_usage_threshold and "
                             "memory_monitor_refresh_ms apply to the private cluster init starts)"),
    "_node_ip_address": (None, "the driver's address is found from the head's"),
    "_metrics_export_port": (None, "rayx has no metrics endpoint per node"),
    "_memory": (None, "memory is not a resource of a private cluster"),
    "_redis_password": (None, "rayx has no Redis"),
    "_redis_max_memory": (None, "rayx has no Redis"),
    "_plasma_directory": (None, "each node's store lives where `rayx start` puts it"),
    "_enable_object_reconstruction": (None, "tasks of lost objects run again as rayx decides"),
    "_driver_object_store_memory": (None, "each node's store is sized by `rayx start`"),
    "_tracing_startup_hook": (None, "rayx has no tracing"),
    "_node_name": (None, "node names come from `rayx start`"),
    "_skip_env_hook": (None, "rayx has no runtime_env hooks"),
    "_cgroup_path": (None, "rayx has no cgroup settings"),
    "enable_resource_isolation": (None, "rayx has no cgroup settings"),
    "system_reserved_cpu": (None, "rayx has no cgroup settings"),
    "system_reserved_memory": (None, "rayx has no cgroup settings"),
}


class _UnknownArgumentError(RuntimeError, TypeError):
    """An init() argument Ray does not know either. Ray raises RuntimeError;
    it is also a TypeError, as for any Python function."""


def init(address=None, *, num_cpus=None, num_gpus=None, resources=None, namespace=None,
         runtime_env=None, ignore_reinit_error=False, configure_logging=True,
         logging_level=None, job_config=None, _temp_dir=None, **kwargs):
    """Connects this program to a cluster and returns a RayContext.

    address: "host:port" of a head (a "ray://" or "rayx://" prefix is
        dropped); None: $RAYX_ADDRESS, else the cluster `rayx start` runs on
        this machine, else a private one-machine cluster (sized by num_cpus,
        num_gpus, resources) that ends with shutdown(); "auto": the same
        without the private cluster (ConnectionError when none runs); "local":
        always a private cluster.
    namespace: the namespace of the actor names this job makes and looks up
        (default: none, the names every job shares).
    runtime_env: this job's runtime environment (env_vars, working_dir,
        py_modules, excludes), inherited by every task and actor.
    logging_level: the level of the 'rayx' logger (configure_logging=False
        leaves it alone).
    log_to_driver: print what this job's tasks and actors write to stdout and
        stderr here, as "(name pid=N, ip=A) line" (default True, as Ray's;
        RAYX_LOG_TO_DRIVER=0 turns it off too).
    job_config: a rayx.job_config.JobConfig; its runtime_env and
        ray_namespace apply when not given here.
    Ray's other arguments are accepted; those with no meaning here are named
    in one warning. Unknown ones raise (RuntimeError, as Ray's; also a TypeError).

    Calls that need a cluster (.remote(), get, put, ...) call init() first
    when it was not called.
    """
    global _mode, _atexit_registered, generation, _namespace, _job_runtime_env
    ignored = []
    start_flags = _system_config_flags(kwargs)
    object_store_memory = kwargs.pop("object_store_memory", None)
    if object_store_memory is not None:
        if isinstance(object_store_memory, bool) or not isinstance(object_store_memory, int) \
                or object_store_memory < (1 << 20):
            raise ValueError("rayx.init: object_store_memory is a number of bytes, at least "
                             f"1 MiB, not {object_store_memory!r}")
        start_flags += ["--object-store-memory", str(object_store_memory)]
    log_to_driver = kwargs.pop("log_to_driver", True)
    for name, value in kwargs.items():
        if name not in _IGNORED_INIT_ARGS:
            if name == "allow_multiple":
                raise RuntimeError("rayx.init: allow_multiple is for Ray Client connections, "
                                   "which rayx does not have: call init() once per process")
            raise _UnknownArgumentError(f"Unknown keyword argument(s): {name} (rayx.init)")
        default, why = _IGNORED_INIT_ARGS[name]
        # Values that ask for what rayx does anyway (no dashboard, no local
        # mode, no forwarding, nothing set) need no warning.
        if value is None or value is False or value == default or \
                (isinstance(value, dict) and not value):
            continue
        ignored.append(f"{name} ({why})")
    if ignored:
        import warnings
        warnings.warn("rayx.init ignores " + "; ".join(ignored), stacklevel=2)
    if _mode == "worker":
        return _context()
    if job_config is not None:
        runtime_env = runtime_env if runtime_env is not None else job_config.runtime_env
        namespace = namespace if namespace is not None else job_config.ray_namespace
    if address is not None and not isinstance(address, str):
        raise TypeError(f"rayx.init: address must be a 'host:port' string, not {type(address).__name__}")
    for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise ValueError(f"rayx.init: {name} must be a number >= 0, not {value!r}")
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        raise ValueError(f"rayx.init: namespace must be a non-empty string, not {namespace!r}")
    resources = _check_resources(resources or {}, "rayx.init")
    if runtime_env is not None:
        from rayx import _runtime_env
        _runtime_env.validate(runtime_env, "rayx.init")
    if configure_logging and logging_level is not None:
        import logging
        logging.getLogger("rayx").setLevel(logging_level)
    temp_dir = _temp_dir or ""
    with _lock:
        if _core.is_initialized():
            if ignore_reinit_error:
                return _context()
            raise RuntimeError("rayx.init was called twice: call rayx.shutdown() first, or pass "
                               "ignore_reinit_error=True")
        address, temp_dir, private = _resolve_address(address, temp_dir)
        if start_flags and not private:
            joined = address or os.environ.get("RAYX_ADDRESS") or \
                _core.local_cluster_address(temp_dir)
            if joined:
                import warnings
                warnings.warn(f"rayx.init: object_store_memory and _system_config's memory "
                              f"monitor settings apply to a private cluster only; this program "
                              f"joins the cluster at {joined}, where `rayx start "
                              "--object-store-memory` and `--memory-usage-threshold` set them",
                              stacklevel=2)
        _namespace = namespace
        exe, args, env = _worker_command()
        _core.set_worker_command(exe, args, env)
        saved = {k: os.environ.pop(k) for k in ("RAYX_ADDRESS", "RAYX_TOKEN")
                 if private and k in os.environ}
        try:
            _core.init(address or "", "", float(num_cpus or 0),
                       -1.0 if num_gpus is None else float(num_gpus), resources, temp_dir,
                       start_flags, bool(log_to_driver))
        except RuntimeError as e:
            _namespace = None
            raise ConnectionError(str(e)) from None
        finally:
            os.environ.update(saved)
        generation += 1
        _mode = "driver"
        _job_runtime_env = None
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
        if runtime_env:
            from rayx import _runtime_env
            try:
                # Uploaded once for the job; every worker it starts applies it.
                _job_runtime_env = _runtime_env.resolve(runtime_env, None)
                _runtime_env.install_worker_command(_job_runtime_env)
            except BaseException:
                _core.shutdown()
                _mode = None
                _namespace = None
                raise
    return _context()


# Ray's _system_config keys with a meaning here: the `rayx start` flag of the
# private cluster init() starts (a cluster started with `rayx start` takes
# them there).
_SYSTEM_CONFIG_FLAGS = {
    "memory_usage_threshold": "--memory-usage-threshold",
    "memory_monitor_refresh_ms": "--memory-monitor-period-ms",
}


def _system_config_flags(kwargs):
    """Takes the _system_config keys rayx knows out of kwargs["_system_config"]
    (the rest stay, for init's warning) and returns their `rayx start` flags."""
    config = kwargs.get("_system_config")
    if not isinstance(config, dict):
        return []
    flags, rest = [], {}
    for key, value in config.items():
        flag = _SYSTEM_CONFIG_FLAGS.get(key)
        if flag is None:
            rest[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"rayx.init: _system_config[{key!r}] must be a number >= 0, "
                             f"not {value!r}")
        flags += [flag, str(int(value)) if key.endswith("_ms") else repr(float(value))]
    kwargs["_system_config"] = rest
    return flags


def _resolve_address(address, temp_dir):
    """(address for the runtime, temp dir, whether a private cluster is wanted)."""
    if address is None:
        return None, temp_dir, False
    for prefix in ("ray://", "rayx://"):
        if address.startswith(prefix):
            address = address[len(prefix):]
    if address == "local":
        import tempfile
        # A temp dir with no session: Init finds no cluster and starts its own.
        return None, tempfile.mkdtemp(prefix="rayx-local-"), True
    if address == "auto":
        found = os.environ.get("RAYX_ADDRESS") or _core.local_cluster_address(temp_dir)
        if not found:
            raise ConnectionError("rayx.init(address='auto'): no cluster runs on this machine "
                                  "and RAYX_ADDRESS is not set: start one with `rayx start "
                                  "--head`, or call rayx.init() to start a private one")
        return found, temp_dir, False
    return address, temp_dir, False


class RayContext(dict):
    """What init() returns: a dict of the connection (Ray's address_info keys
    that rayx has: address, gcs_address, node_ip_address, node_id, job_id,
    webui_url), also used as `with rayx.init(): ...` (shutdown at the end)."""

    @property
    def address_info(self):
        return dict(self)

    @property
    def dashboard_url(self):
        return None  # rayx has no dashboard

    @property
    def python_version(self):
        return "{}.{}.{}".format(*sys.version_info[:3])

    @property
    def ray_version(self):
        import rayx
        return rayx.__version__

    @property
    def ray_commit(self):
        return ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutdown()

    def disconnect(self):
        shutdown()


def _context():
    address = _core.head_address()
    ctx = RayContext(address=address, gcs_address=address, node_ip_address=_core.node_ip(),
                     raylet_ip_address=_core.node_ip(), job_id=_core.job_id(), webui_url=None,
                     namespace=_namespace)
    try:
        from rayx.runtime_context import _node_id_of
        ctx["node_id"] = _node_id_of(_core.node_ip())
    except Exception:  # noqa: BLE001 - the head's node list is a nicety here
        ctx["node_id"] = None
    return ctx


def shutdown(_exiting_interpreter=False):
    """Ends this program's job: its workers and non-detached actors stop, its
    objects are freed, a private cluster stops. Safe to call twice."""
    global _mode, _job_runtime_env, _namespace
    if _mode == "worker":
        return
    with _lock:
        _core.shutdown()
        _mode = None
        _job_runtime_env = None
        _namespace = None
    runtime_env = sys.modules.get("rayx._runtime_env")
    if runtime_env is not None:
        runtime_env.current = None
    _futures = sys.modules.get("rayx._futures")
    if _futures is not None:
        _futures.fail_pending()


def is_initialized():
    return _mode == "worker" or _core.is_initialized()


def _require():
    """Connects on first use, as Ray does: the cost on the call path is this
    one test of a global."""
    if _mode is None:
        _auto_init()


def _auto_init():
    if _core.is_initialized():
        return
    import logging
    logging.getLogger("rayx").info("rayx.init() called on first use (connects to this machine's "
                                   "cluster, or starts a private one)")
    init(ignore_reinit_error=True)


def _check_resources(resources, where):
    if not isinstance(resources, dict):
        raise TypeError(f"{where}: resources must be a dict name -> amount")
    out = {}
    for k, v in resources.items():
        if not isinstance(k, str) or not k or any(c in k for c in '"\\{}'):
            raise ValueError(f"{where}: bad resource name {k!r}")
        if k in ("CPU", "GPU"):
            raise ValueError(f"{where}: use num_cpus/num_gpus for {k}, not resources")
        if not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"{where}: resource {k} must be a number >= 0, not {v!r}")
        out[k] = float(v)
    return out


# --- ObjectRef -----------------------------------------------------------------

class ObjectRef:
    """A future for a value in the cluster: a task's result or a put value.
    rayx.get(ref) returns the value. Passed to a task, it is resolved first.
    In asyncio code, `await ref` waits without blocking the event loop;
    ref.future() is a concurrent.futures.Future of the value."""

    _rayx_object_ref = True
    # _afuture (never set in __init__, so the call path does not pay for it):
    # the asyncio future asyncio.wait's callbacks hang on.
    __slots__ = ("_core", "_index", "_resolved", "_value", "_name", "_msgpack", "_afuture",
                 "__weakref__")

    def __init__(self, core, index=None, name=None):
        self._core = core
        self._index = index
        self._name = name  # the call that makes it, for errors
        self._msgpack = False  # made by C++ (rayx.cpp_function): a msgpack value
        self._resolved = False
        self._value = None

    def hex(self):
        if self._core is None:
            return "resolved"
        return self._core.id if self._index is None else f"{self._core.id}.{self._index}"

    def binary(self):
        return self.hex().encode()

    def __repr__(self):
        return f"ObjectRef({self.hex()})"

    def __eq__(self, other):
        return isinstance(other, ObjectRef) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return (id(self) if self._core is None else self._core.id, self._index)

    def __reduce__(self):
        if self._resolved:
            return (_resolved_ref, (self._value,))
        return _export_ref(self)

    # --- futures (rayx._futures: one waiter thread for all of them) -------------

    def future(self):
        """A concurrent.futures.Future that gets the value (or the exception
        rayx.get would raise) once the object is ready."""
        from rayx import _futures
        return _futures.future_of(self)

    def as_future(self):
        """An asyncio future of the value, on the running event loop."""
        import asyncio
        return asyncio.wrap_future(self.future())

    def __await__(self):
        return self.as_future().__await__()

    # asyncio.wait(refs) treats its arguments as futures (Python 3.11 no
    # longer wraps awaitables): these delegate to one asyncio future per ref
    # and event loop.
    def _loop_future(self):
        import asyncio
        loop = asyncio.get_running_loop()
        try:
            fut = self._afuture
        except AttributeError:
            fut = None
        if fut is None or fut.get_loop() is not loop:
            fut = self._afuture = asyncio.wrap_future(self.future(), loop=loop)
        return fut

    def add_done_callback(self, fn, *, context=None):
        self._loop_future().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn):
        return self._loop_future().remove_done_callback(fn)

    def done(self):
        return self._loop_future().done()

    def _on_completed(self, callback):
        """Calls callback(value) on the waiter thread once the value is ready."""
        self.future().add_done_callback(lambda f: callback(f.result()))


# num_returns of a generator call: "streaming" (ObjectRefGenerator, Ray's
# default for generator functions) and "dynamic" (one ObjectRef whose value is
# a DynamicObjectRefGenerator).
GENERATOR_RETURNS = ("streaming", "dynamic")
_DYNAMIC = "dynamic"  # ObjectRef._index of a dynamic generator's ref
# The error kind of a generator item the call ended without (object_table.cc).
_ITEM_NEVER_CAME = "GeneratorEnded"


class ObjectRefGenerator:
    """The ObjectRefs a generator task or actor method yields, as they come
    (Ray's streaming generator): next(gen) waits for the next item and returns
    its ref, `for ref in gen` and `async for ref in gen` go through all of
    them. When the generator raised, the ref after its last item raises that
    error in get; then iteration stops. The items are this process's objects:
    one that is never taken from the generator goes when the generator does."""

    def __init__(self, core, name=None):
        self._core = core  # the call's result: the item count, or its error
        self._name = name
        self._next = 0
        self._claimed = None  # the next item's core, claimed and not yet returned
        self._ended = False
        self._lock = threading.Lock()

    def __iter__(self):
        return self

    def __next__(self):
        ref = self._next_ref(None)
        if ref is None:
            raise StopIteration
        return ref

    def __aiter__(self):
        return self

    async def __anext__(self):
        import asyncio
        # The wait runs on a helper thread: the event loop goes on meanwhile.
        ref = await asyncio.get_running_loop().run_in_executor(None, self._next_ref, None)
        if ref is None:
            raise StopAsyncIteration
        return ref

    def _item_core(self):
        """The next item's core, claimed once (wait may ask again)."""
        if self._claimed is None:
            self._claimed = _core.generator_item(self._core, self._next)
        return self._claimed

    def _next_ref(self, timeout):
        """The next item's ref; None at the end; raises GetTimeoutError when
        `timeout` passes first (the item is still next)."""
        _require()
        with self._lock:
            if self._ended:
                return None
            item = self._item_core()
            if not _core.wait([item], 1, -1.0 if timeout is None else float(timeout))[0]:
                raise exceptions.GetTimeoutError(
                    f"item {self._next} of {self._name or 'a generator'} did not come within "
                    f"{timeout} s")
            self._claimed = None
            if _core.wait([self._core], 1, 0.0)[0]:
                # The call ended: with n items, or an error after some.
                try:
                    count = _decode(_core.get(self._core, 0.0), None)
                except Exception:  # noqa: BLE001 - its error, raised where it belongs
                    count = None
                if count is not None and self._next >= count:
                    self._ended = True
                    return None
                if count is None and not self._arrived(item):
                    # The error it raised comes once, as the ref after its
                    # last item; then the end.
                    self._ended = True
                    return ObjectRef(self._core, None, self._name)
            self._next += 1
            return ObjectRef(item, None, self._name)

    @staticmethod
    def _arrived(item):
        """Whether a ready item came (rather than failed for want of it)."""
        try:
            _core.get(item, 0.0)
        except _core.TaskError as e:
            return e.args[0] != _ITEM_NEVER_CAME
        return True

    def _ready_core(self):
        """What rayx.wait watches: the next item (ready when it came or the
        stream ended)."""
        with self._lock:
            return None if self._ended else self._item_core()

    def completed(self):
        """The ref of the call itself: ready when the generator finished
        (its value is the number of items; its error, the generator's)."""
        return ObjectRef(self._core, None, self._name)

    def __repr__(self):
        return f"ObjectRefGenerator({self._core.id})"

    def __reduce__(self):
        raise TypeError("an ObjectRefGenerator stays in the process that made the call: "
                        "pass its items (ObjectRefs) to tasks instead")


class DynamicObjectRefGenerator:
    """Ray's num_returns="dynamic" result: get(ref) of such a call gives one,
    whose iteration yields the ObjectRef of each item the generator yielded."""

    def __init__(self, refs):
        self._refs = refs

    def __iter__(self):
        return iter(self._refs)

    def __len__(self):
        return len(self._refs)

    def __repr__(self):
        return f"DynamicObjectRefGenerator({len(self._refs)} refs)"


def _dynamic_items(ref, count):
    """ray.get of a dynamic generator's ref: its items' refs, claimed once."""
    gen = DynamicObjectRefGenerator(
        [ObjectRef(_core.generator_item(ref._core, i), None, ref._name) for i in range(count)])
    ref._resolved, ref._value = True, gen  # a second get returns the same refs
    return gen


def _resolved_ref(value):
    """A ref whose value came with the call (a ref nested in an argument)."""
    ref = ObjectRef(None)
    ref._resolved = True
    ref._value = value
    return ref


def _refuse_ref(ref):
    raise TypeError("an ObjectRef inside an exception cannot travel: put its value in the "
                    "exception, or return the ref instead")


# --- ObjectRefs inside values ------------------------------------------------
#
# A ref pickled into a value (a put value, a task's or actor method's result,
# a generator's item, ray.cloudpickle.dumps, a function's closure) travels as
# its object's id and the location of a copy in this node's store, which the
# node's agent holds for it (Runtime::ExportRef). Whoever unpickles it takes a
# hold of its own (_import_ref) and lets go when its ObjectRef goes. The hold
# taken for the value belongs to the value: a put value or a result is stored,
# and the agent lets go of what it holds when it is freed; a value pickled by
# other means (ray.cloudpickle.dumps, a closure) holds its refs until the job
# ends, as Ray documents for out-of-band serialization.

_holding = threading.local()  # .paths: the holds taken for the value being pickled here


def _export_ref(ref):
    if ref._index is _DYNAMIC:
        raise TypeError("a num_returns=\"dynamic\" call's ObjectRef cannot go inside a value: "
                        "put list(rayx.get(ref)) (its items' refs) there instead")
    if ref._core is None:
        raise TypeError("this ObjectRef has no object")
    try:
        _core.get(ref._core, -1.0)  # waits as rayx.get does (a worker lends its CPU)
    except _core.TaskError as e:
        # The object failed: the error travels, and get raises it there.
        return (_failed_ref, tuple(e.args) + (ref._name,))
    desc = _core.export_ref(ref._core)
    paths = getattr(_holding, "paths", None)
    if paths is not None:
        paths.append(desc[3])  # the value being pickled owns this hold
    return (_import_ref, (desc, ref._index, ref._name, ref._msgpack))


def _import_ref(desc, index, name, msgpack):
    _require()
    ref = ObjectRef(_core.import_ref(*desc), index, name)
    ref._msgpack = msgpack
    return ref


class _Failed:
    """The value of a ref to a failed object that travelled inside a value:
    rayx.get raises its error."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _failed_ref(kind, message, function, node, name=None):
    ref = ObjectRef(None, None, name)
    ref._resolved = True
    ref._value = _Failed(exceptions.from_core(kind, message, name or function, node))
    return ref


def _pickled_holding(value, pickle):
    """pickle(value) with the holds its ObjectRefs take collected: returns
    (pickle's result, [paths held]); on failure the holds are let go."""
    outer = getattr(_holding, "paths", None)
    held = _holding.paths = []
    try:
        out = pickle(value)
    except BaseException:
        if held:
            _core.release_holds(held)
        raise
    finally:
        _holding.paths = outer
    return out, held


_HOLDING_MAGIC = b"RXH1"


def _result_bytes(value):
    """The bytes of a call's result (or a generator's item): a value holding
    ObjectRefs starts with the paths it holds (protocol/holding_value.h); the
    worker stores it and its agent frees them with it."""
    if ser._builtin(value, 0):
        return ser.builtin_bytes(value)
    blob, held = _pickled_holding(value, ser.layout_bytes)
    if not held:
        return blob
    head = [_HOLDING_MAGIC, len(held).to_bytes(4, "little")]
    for path in held:
        p = path.encode()
        head += [len(p).to_bytes(4, "little"), p]
    return b"".join(head) + blob


class FailedReturn:
    """One of a generator function's num_returns=n returns that it never made
    because it raised first: get raises that error (payload: rayx._worker._error's)."""

    __slots__ = ("payload",)

    def __init__(self, payload):
        self.payload = payload

    def __reduce__(self):
        return (FailedReturn, (self.payload,))


def _decode(buffer, index):
    flags, value = ser.loads(buffer)
    if flags & ser.FLAG_ERROR:
        raise _error_from(value)
    if index is None:
        return value
    value = value[index]
    if type(value) is FailedReturn:
        raise _error_from(value.payload)
    return value


def _error_from(payload):
    """The exception to raise for a failed call's payload (rayx._worker._error):
    a RayxTaskError that is also an instance of the remote exception's class,
    or a plain one (with the traceback) when that class cannot be rebuilt here
    (not importable, or its pickle does not load)."""
    blob, function, tb, node, pid = payload
    cause = None
    if blob is not None:
        try:
            _, cause = ser.loads(blob, copy_buffers=True)
        except Exception as e:  # noqa: BLE001 - reported with the traceback
            tb += (f"\n(rayx: the remote exception cannot be rebuilt here "
                   f"({type(e).__name__}: {e}): raised as a RayxTaskError)\n")
    if isinstance(cause, exceptions.RayxError) and not isinstance(cause, exceptions.RayxTaskError):
        return cause  # a rayx error (e.g. ActorDiedError) from inside the task
    return exceptions.RayTaskError(function, tb, cause, pid=pid, ip=node).as_instanceof_cause()


# ObjectRefs that rayx.cancel marked -> whether with force (held weakly: an
# entry goes with its refs).
_cancelled = None


class _ForceCancelledError(exceptions.TaskCancelledError, exceptions.WorkerCrashedError):
    """A task cancelled with force=True: Ray documents WorkerCrashedError for
    it; also a TaskCancelledError."""


def _raise_cancelled(ref):
    message = f"{ref._name or 'the task'} making {ref.hex()} was cancelled (rayx.cancel)"
    if ref._name is not None and not ref._msgpack:
        # An actor call: a RayTaskError that is also a TaskCancelledError,
        # as Ray's cancelled actor calls are caught either way.
        cause = exceptions.TaskCancelledError._with_message(message, task_id=ref.hex())
        raise exceptions.RayTaskError(ref._name, message, cause).as_instanceof_cause()
    cls = _ForceCancelledError if _cancelled.get(ref) else exceptions.TaskCancelledError
    raise cls._with_message(message, task_id=ref.hex())


def _get_one(ref, timeout):
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"rayx.get takes ObjectRefs (or a list of them), not {type(ref).__name__}")
    if ref._resolved:
        if type(ref._value) is _Failed:
            raise ref._value.error
        return ref._value
    if _cancelled and ref in _cancelled:
        _raise_cancelled(ref)
    try:
        buffer = _core.get(ref._core, -1.0 if timeout is None else float(timeout))
    except _core.GetTimeout as e:
        raise exceptions.GetTimeoutError(str(e)) from None
    except _core.TaskError as e:
        kind, message, function, node = e.args
        if ref._name and function.startswith("rayx.py."):
            function = ref._name  # the Python name, not the runtime's entry point
        raise exceptions.from_core(kind, message, function, node) from None
    if ref._msgpack:
        return _core.msgpack_loads(buffer)
    if ref._index is _DYNAMIC:
        return _dynamic_items(ref, _decode(buffer, None))
    return _decode(buffer, ref._index)


def get(refs, *, timeout=None):
    """The value(s) of `refs` (one ObjectRef or a list), waiting at most
    `timeout` seconds in all (GetTimeoutError). A failed task's exception is
    raised here (RayTaskError, also an instance of the original class)."""
    _require()
    if timeout is not None and timeout < 0:
        raise ValueError("rayx.get: timeout must be >= 0 or None")
    if isinstance(refs, ObjectRef):
        return _get_one(refs, timeout)
    if not isinstance(refs, (list, tuple)):
        raise TypeError(f"rayx.get takes an ObjectRef or a list of them, not {type(refs).__name__}")
    if timeout is None:
        return [_get_one(r, None) for r in refs]
    import time
    deadline = time.monotonic() + timeout
    return [_get_one(r, max(0.0, deadline - time.monotonic())) for r in refs]


def cancel(ref, *, force=False, recursive=True):
    """Cancels the task that makes `ref` (nothing happens when it finished
    already), as far as rayx can: from now on
    get, wait and await on `ref` raise at once what Ray documents:
    TaskCancelledError (with force=True, also a WorkerCrashedError; for an
    actor call, also a RayTaskError). rayx cannot stop the task itself: a
    queued task still runs and a running one runs to its end (its result is
    dropped), with or without force=True. recursive has nothing to act on
    (tasks the cancelled one submitted are not tracked). force=True on an
    actor call is refused, as in Ray."""
    global _cancelled
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"rayx.cancel takes an ObjectRef, not {type(ref).__name__}")
    del recursive
    # Only actor calls' refs carry a name ("Class.method") among Python calls.
    if force and ref._name is not None and not ref._msgpack:
        raise ValueError("force=True is not supported for actor tasks (as in Ray): use "
                         "rayx.kill(actor) to stop the actor")
    if ref._resolved or _core.wait([ref._core], 1, 0.0)[0]:
        return  # finished already: nothing happens (Ray's rule)
    if _cancelled is None:
        import weakref
        _cancelled = weakref.WeakKeyDictionary()
    _cancelled[ref] = bool(force)
    _futures = sys.modules.get("rayx._futures")
    if _futures is not None:
        _futures.cancelled(ref)


def put(value):
    """Stores `value` in the cluster and returns its ObjectRef. Large buffers
    (numpy arrays) are written once, straight into the node's shared memory."""
    _require()
    if isinstance(value, ObjectRef):
        raise TypeError("rayx.put of an ObjectRef: pass the ObjectRef itself instead")
    try:
        if ser._builtin(value, 0):  # holds no ObjectRef: no holds to collect
            size, parts = ser.layout(value)
            return ObjectRef(_core.put_parts(size, parts))
        (size, parts), held = _pickled_holding(value, ser.layout)
        if held:  # stored, holding what its refs point at
            return ObjectRef(_core.put_parts(size, parts, held))
        return ObjectRef(_core.put_parts(size, parts))
    except _core.ObjectStoreFull as e:
        raise exceptions.ObjectStoreFullError(str(e)) from None


def wait(refs, *, num_returns=1, timeout=None, fetch_local=True):
    """Returns (ready, not_ready): once `num_returns` of `refs` are ready, or
    after `timeout` seconds. Both lists keep the order of `refs`."""
    del fetch_local
    _require()
    if isinstance(refs, ObjectRef) or not isinstance(refs, (list, tuple)):
        raise TypeError("rayx.wait takes a list of ObjectRefs")
    if not refs:
        return [], []  # as Ray's, whatever num_returns
    if not 0 <= num_returns <= len(refs):
        raise ValueError(f"rayx.wait: num_returns is {num_returns}, with {len(refs)} refs")
    if len(set(refs)) != len(refs):
        raise ValueError("rayx.wait: refs holds duplicates")
    cores, positions = [], []
    ready_flags = [False] * len(refs)
    for i, r in enumerate(refs):
        if isinstance(r, ObjectRefGenerator):
            # Ready when next(r) would not wait: its next item came, or it ended.
            item = r._ready_core()
            if item is None:
                ready_flags[i] = True
            else:
                cores.append(item)
                positions.append(i)
            continue
        if not isinstance(r, ObjectRef):
            raise TypeError(f"rayx.wait: refs[{i}] is a {type(r).__name__}, not an ObjectRef")
        if r._resolved or (_cancelled and r in _cancelled):
            ready_flags[i] = True  # a cancelled ref is ready: get raises at once
        else:
            cores.append(r._core)
            positions.append(i)
    need = max(0, num_returns - sum(ready_flags))
    if cores:
        flags = _core.wait(cores, min(need, len(cores)), -1.0 if timeout is None else float(timeout))
        for pos, f in zip(positions, flags):
            ready_flags[pos] = f
    ready, not_ready = [], []
    for r, f in zip(refs, ready_flags):
        (ready if f and len(ready) < num_returns else not_ready).append(r)
    return ready, not_ready


# --- cluster ---------------------------------------------------------------------

def nodes():
    """The cluster's nodes (alive and recently dead), as Ray's ray.nodes()."""
    _require()
    return _core.nodes()


def cluster_resources():
    """Total resources of the alive nodes."""
    total = {}
    for n in nodes():
        if n["Alive"]:
            for k, v in n["Resources"].items():
                total[k] = total.get(k, 0.0) + v
    return total


def available_resources():
    """Resources of the alive nodes that no lease holds now."""
    total = {}
    for n in nodes():
        if n["Alive"]:
            for k, v in n["Available"].items():
                if v > 0:
                    total[k] = total.get(k, 0.0) + v
    return total


def get_gpu_ids():
    """Inside a task or actor: the node's GPU devices it holds (what
    CUDA_VISIBLE_DEVICES lists). Empty in a driver."""
    return list(_core.gpu_ids())


def timeline(filename=None):
    """Ray's task timeline: rayx records none. Returns an empty list (and
    writes "[]" to `filename` when given), with a warning."""
    import warnings
    warnings.warn("rayx.timeline: rayx records no task timeline; the trace is empty",
                  stacklevel=2)
    if filename is not None:
        with open(filename, "w") as f:
            f.write("[]")
        return None
    return []
