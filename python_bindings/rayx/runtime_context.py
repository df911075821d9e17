"""rayx.get_runtime_context(): who and where the calling code runs (Ray's
ray.runtime_context), from what this process knows.

Ids are hex strings, as Ray's get_*_id() return. What each one is here:
    job id     the job's id (the same for the driver and all its workers);
    node id    the id of the node this process runs on (rayx.nodes()'s NodeID);
    worker id  a worker's lease id (a worker serves one lease); a driver's own
               random id;
    task id    in a worker, the running call (the worker's id and a counter),
               None in a driver;
    actor id   in an actor's methods, the actor's id (the one its handles
               show); None elsewhere, and inside __init__ (the constructor's
               call does not carry it yet).
"""

import os
import threading
import uuid

from rayx import _api, _core, _remote

_lock = threading.Lock()
_node_ids = {}  # node ip -> node id, from the head's node table
_driver_worker_id = None


def _node_id_of(ip):
    """The id of the alive node registered at `ip` (cached)."""
    with _lock:
        known = _node_ids.get(ip)
    if known is not None:
        return known
    for n in _api.nodes():
        if n["NodeManagerAddress"] == ip and n["Alive"]:
            with _lock:
                _node_ids[ip] = n["NodeID"]
            return n["NodeID"]
    return None


def _in_worker():
    return _api._mode == "worker"


class RuntimeContext:
    """What get_runtime_context() returns; every method reads the current state."""

    def get(self):
        """A dict of the ids this context has (Ray's get())."""
        out = {"job_id": self.get_job_id(), "node_id": self.get_node_id(),
               "namespace": self.namespace}
        if self.get_task_id() is not None:
            out["task_id"] = self.get_task_id()
        if self.get_actor_id() is not None:
            out["actor_id"] = self.get_actor_id()
        return out

    def get_job_id(self):
        _api._require()
        return _core.job_id()

    @property
    def job_id(self):
        return _remote._HexId(self.get_job_id())

    def get_node_id(self):
        _api._require()
        return _node_id_of(os.environ.get("RAYX_NODE_IP") or _core.node_ip())

    @property
    def node_id(self):
        return _remote._HexId(self.get_node_id() or "")

    def get_worker_id(self):
        global _driver_worker_id
        if _in_worker():
            return os.environ.get("RAYX_LEASE_ID", "")
        with _lock:
            if _driver_worker_id is None:
                _driver_worker_id = uuid.uuid4().hex
            return _driver_worker_id

    def get_task_id(self):
        if not _in_worker():
            return None
        return f"{self.get_worker_id()}{_remote._call_count():08x}"

    @property
    def task_id(self):
        task = self.get_task_id()
        return None if task is None else _remote._HexId(task)

    def get_actor_id(self):
        if not _in_worker():
            return None
        return _remote._hosted_actor_id()

    @property
    def actor_id(self):
        actor = self.get_actor_id()
        return None if actor is None else _remote._HexId(actor)

    def get_actor_name(self):
        ctx = _remote._call_ctx if _in_worker() else None
        return (ctx or {}).get("name")

    @property
    def current_actor(self):
        """A handle to the actor this code runs in (named actors only here)."""
        name = self.get_actor_name()
        if name is None:
            raise RuntimeError("current_actor: rayx can give a handle to the running actor "
                               "only when it is named (options(name=...))")
        ctx = _remote._call_ctx or {}
        return _remote.get_actor(name, namespace=ctx.get("namespace"))

    @property
    def namespace(self):
        ctx = _remote._call_ctx if _in_worker() else None
        return (ctx or {}).get("namespace") or _api._namespace

    @property
    def was_current_actor_reconstructed(self):
        """Inside an actor: whether this instance is a restart (max_restarts)."""
        return _in_worker() and _remote._actor_reconstructed

    def get_placement_group_id(self):
        ctx = _remote._call_ctx if _in_worker() else None
        return (ctx or {}).get("pg")

    @property
    def current_placement_group_id(self):
        return self.get_placement_group_id()

    @property
    def should_capture_child_tasks_in_placement_group(self):
        return _remote._capture is not None

    def get_assigned_resources(self):
        """The resources the running task or actor holds ({} in a driver)."""
        if not _in_worker():
            return {}
        ctx = _remote._call_ctx or {}
        if "res" in ctx:
            res = dict(ctx["res"])
        elif _remote._is_actor:
            res = {}  # an actor holds no CPU by default (Ray's rule)
        else:
            res = {"CPU": 1.0}
        gpus = _core.gpu_ids()
        if gpus and "GPU" not in res:
            res["GPU"] = float(len(gpus))
        return res

    def get_accelerator_ids(self):
        """{"GPU": [device ids as strings]} of the running task or actor."""
        return {"GPU": [str(i) for i in _core.gpu_ids()]}

    def is_canceled(self):
        """Whether the running call was cancelled. Always False in rayx:
        rayx.cancel acts on the caller's side (its get raises
        TaskCancelledError) and cannot reach a call that runs."""
        return False

    def get_runtime_env_string(self):
        from rayx import _runtime_env
        return _runtime_env.encode(_runtime_env.current or {})

    @property
    def runtime_env(self):
        from rayx import _runtime_env
        return dict(_runtime_env.current or {})

    @property
    def gcs_address(self):
        _api._require()
        return _core.head_address()

    def get_node_labels(self):
        node_id = self.get_node_id()
        for n in _api.nodes():
            if n["NodeID"] == node_id:
                return dict(n.get("Labels") or {})
        return {}


_context = RuntimeContext()


def get_runtime_context():
    """The RuntimeContext of the calling code (a driver, task or actor)."""
    return _context


__all__ = ["RuntimeContext", "get_runtime_context"]
