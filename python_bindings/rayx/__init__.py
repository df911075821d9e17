"""rayx: a Ray-style distributed compute framework (Python API, Ray's names).

    import rayx

    @rayx.remote
    def square(x):
        return x * x

    rayx.init()
    print(rayx.get([square.remote(i) for i in range(4)]))

`import rayx as ray` runs Ray programs that stay within this API.
"""

from rayx import exceptions
from rayx._api import (ObjectRef, available_resources, cluster_resources, get, get_gpu_ids, init,
                       is_initialized, nodes, put, shutdown, wait)
from rayx._remote import (ActorClass, ActorHandle, RemoteFunction, cpp_function, get_actor, kill,
                          method, remote)

__version__ = "0.1.0"


def __getattr__(name):
    # Subpackages that import heavier modules load on first use.
    if name in ("util", "train"):
        import importlib
        return importlib.import_module(f"rayx.{name}")
    raise AttributeError(f"module 'rayx' has no attribute {name!r}")


__all__ = [
    "ActorClass", "ActorHandle", "ObjectRef", "RemoteFunction", "available_resources",
    "cluster_resources", "cpp_function", "exceptions", "get", "get_actor", "get_gpu_ids", "init",
    "is_initialized", "kill", "method", "nodes", "put", "remote", "shutdown", "wait",
]
