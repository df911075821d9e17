"""rayx: a Ray-style distributed compute framework (Python API, Ray's names).

    import rayx

    @rayx.remote
    def square(x):
        return x * x

    print(rayx.get([square.remote(i) for i in range(4)]))   # init() on first use

`import rayx as ray` runs Ray programs that stay within this API.
"""

from rayx import exceptions
from rayx._api import (DynamicObjectRefGenerator, ObjectRef, ObjectRefGenerator, RayContext,
                       available_resources, cancel, cluster_resources, get, get_gpu_ids, init,
                       is_initialized, nodes, put, shutdown, timeline, wait)
from rayx._remote import (ActorClass, ActorHandle, RemoteFunction, cpp_function, get_actor, kill,
                          method, remote)

__version__ = "0.1.0"

# Ray's worker modes, for code that compares against them.
SCRIPT_MODE, WORKER_MODE, LOCAL_MODE = 0, 1, 2

# Modules that load on first use: heavier ones (util, train) and Ray's module
# names (rayx.actor, rayx.cloudpickle, ...), so that `import rayx` stays light.
_LAZY_MODULES = ("util", "train", "actor", "remote_function", "runtime_context", "runtime_env",
                 "cloudpickle", "job_config")


def __getattr__(name):
    if name in _LAZY_MODULES:
        import importlib
        return importlib.import_module(f"rayx.{name}")
    if name == "get_runtime_context":
        from rayx.runtime_context import get_runtime_context
        return get_runtime_context
    raise AttributeError(f"module 'rayx' has no attribute {name!r}")


def show_in_dashboard(message, key="", dtype="text"):
    """Ray's dashboard message: rayx has no dashboard, so nothing is shown."""
    del message, key, dtype


__all__ = [
    "ActorClass", "ActorHandle", "DynamicObjectRefGenerator", "ObjectRef", "ObjectRefGenerator",
    "RayContext", "RemoteFunction", "available_resources", "cancel", "cluster_resources",
    "cpp_function", "exceptions", "get", "get_actor", "get_gpu_ids", "get_runtime_context",
    "init", "is_initialized", "kill", "method", "nodes", "put", "remote", "shutdown",
    "timeline", "wait",
]
