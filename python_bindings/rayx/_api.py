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


def _worker_command():
    """How the node agents start this program's workers: this interpreter (the
    same venv) running rayx._worker, with this program's import path."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [package_parent]
    for p in sys.path:
        if p and os.path.isdir(p) and p not in paths:
            paths.append(p)
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    return sys.executable, ["-m", "rayx._worker"], env


def init(address=None, *, num_cpus=None, num_gpus=None, resources=None,
         ignore_reinit_error=False, **unsupported):
    """Connects this program to a cluster: `address` ("host:port"), else
    $RAYX_ADDRESS, else the cluster `rayx start` runs on this machine, else a
    private one-machine cluster (with num_cpus/num_gpus/resources) that ends
    with shutdown()."""
    global _mode, _atexit_registered, generation
    if unsupported:
        raise TypeError(f"rayx.init got unsupported arguments: {', '.join(sorted(unsupported))}")
    if _mode == "worker":
        return _context()
    if address == "auto":
        address = None
    if address is not None and not isinstance(address, str):
        raise TypeError(f"rayx.init: address must be a 'host:port' string, not {type(address).__name__}")
    for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise ValueError(f"rayx.init: {name} must be a number >= 0, not {value!r}")
    resources = _check_resources(resources or {}, "rayx.init")
    with _lock:
        if _core.is_initialized():
            if ignore_reinit_error:
                return _context()
            raise RuntimeError("rayx.init was called twice: call rayx.shutdown() first, or pass "
                               "ignore_reinit_error=True")
        exe, args, env = _worker_command()
        _core.set_worker_command(exe, args, env)
        try:
            _core.init(address or "", "", float(num_cpus or 0),
                       -1.0 if num_gpus is None else float(num_gpus), resources)
        except RuntimeError as e:
            raise ConnectionError(str(e)) from None
        generation += 1
        _mode = "driver"
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
    return _context()


def _context():
    return {"address": _core.head_address(), "node_ip_address": _core.node_ip(),
            "job_id": _core.job_id()}


def shutdown():
    """Ends this program's job: its workers and non-detached actors stop, its
    objects are freed, a private cluster stops. Safe to call twice."""
    global _mode
    if _mode == "worker":
        return
    with _lock:
        _core.shutdown()
        _mode = None


def is_initialized():
    return _mode == "worker" or _core.is_initialized()


def _require():
    if _mode is None and not _core.is_initialized():
        raise RuntimeError("rayx is not initialized: call rayx.init() first")


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
    rayx.get(ref) returns the value. Passed to a task, it is resolved first."""

    _rayx_object_ref = True
    __slots__ = ("_core", "_index", "_resolved", "_value", "_name", "_msgpack", "__weakref__")

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
        raise TypeError("an ObjectRef can be passed to tasks and actors (as an argument, or "
                        "inside one), not pickled by other means or returned")


def _resolved_ref(value):
    """A ref whose value came with the call (a ref nested in an argument)."""
    ref = ObjectRef(None)
    ref._resolved = True
    ref._value = value
    return ref


def _refuse_ref(ref):
    raise TypeError("ObjectRefs inside a rayx.put value or a return value are not supported: "
                    "pass them as task arguments instead")


def _decode(buffer, index):
    flags, value = ser.loads(buffer)
    if flags & ser.FLAG_ERROR:
        raise _error_from(value)
    return value if index is None else value[index]


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
    return exceptions.RayxTaskError(function, tb, cause, node, pid).as_instanceof_cause()


def _get_one(ref, timeout):
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"rayx.get takes ObjectRefs (or a list of them), not {type(ref).__name__}")
    if ref._resolved:
        return ref._value
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
    return _decode(buffer, ref._index)


def get(refs, *, timeout=None):
    """The value(s) of `refs` (one ObjectRef or a list), waiting at most
    `timeout` seconds in all (GetTimeoutError). A failed task's exception is
    raised here (RayxTaskError, also an instance of the original class)."""
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


def put(value):
    """Stores `value` in the cluster and returns its ObjectRef. Large buffers
    (numpy arrays) are written once, straight into the node's shared memory."""
    _require()
    if isinstance(value, ObjectRef):
        raise TypeError("rayx.put of an ObjectRef: pass the ObjectRef itself instead")
    size, parts = ser.layout(value, on_ref=_refuse_ref)
    return ObjectRef(_core.put_parts(size, parts))


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
        if not isinstance(r, ObjectRef):
            raise TypeError(f"rayx.wait: refs[{i}] is a {type(r).__name__}, not an ObjectRef")
        if r._resolved:
            ready_flags[i] = True
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
