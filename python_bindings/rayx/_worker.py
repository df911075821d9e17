"""A Python worker process: started by a node agent with the driver's
interpreter (`python -m rayx._worker`), it serves the calls of one lease.

rayx._core runs librayx's worker loop on this thread with the GIL released and
calls `dispatch` (with the GIL) for each call. Functions and classes are read
from the head's KV by their content key once and cached.
"""

import os
import pickle
import sys
import traceback

from rayx import _api, _core
from rayx import _serialization as ser
from rayx import exceptions
from rayx._remote import KV_NAMESPACE, READY_METHOD, _Slot

_code = {}  # KV key -> function or class


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


def _result(value, num_returns, name):
    if num_returns > 1:
        if not isinstance(value, (tuple, list)) or len(value) != num_returns:
            got = len(value) if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
            raise ValueError(f"{name} has num_returns={num_returns} but returned {got}")
        value = tuple(value)
    return ser.to_bytes(value, on_ref=_api._refuse_ref)


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


def dispatch(kind, instance, views):
    if kind == "xlang":
        return _call_from_cpp(views)
    header = pickle.loads(views[0])
    if kind == "create":
        key, name, _ = header
        cls = _load(key, name)
        args, kwargs = _decode_args(views[1], views[2:])
        return cls(*args, **kwargs)  # a failure here marks the actor dead, with the traceback
    retry = False  # the task's retry_exceptions: False, True or qualified class names
    if kind == "task":
        key, name, num_returns, *rest = header
        retry = rest[0] if rest else False
    else:
        name, num_returns = header
    running = False  # exceptions before the function runs (a failed argument) never retry
    try:
        if kind == "task":
            fn = _load(key, name)
        elif name == READY_METHOD:
            return ser.to_bytes(None)
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


def main():
    _api._mode = "worker"
    # Tasks this worker submits start workers the way its own was started.
    _core.set_worker_command(sys.executable, ["-m", "rayx._worker"],
                             {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    sys.stdout.reconfigure(line_buffering=True)
    _core.serve_worker(dispatch)


if __name__ == "__main__":
    main()
