"""rayx.util: placement groups, scheduling strategies, ActorPool, Queue
(rayx.util.queue) and collective groups (rayx.util.collective), with Ray's names."""

from rayx.util import scheduling_strategies
from rayx.util.actor_pool import ActorPool
from rayx.util.placement_group import (PlacementGroup, get_current_placement_group,
                                       get_placement_group, get_placement_group_state,
                                       placement_group, placement_group_table,
                                       remove_placement_group)


def __getattr__(name):
    # Submodules that load on first use.
    if name in ("collective", "queue", "metrics", "accelerators"):
        import importlib
        return importlib.import_module(f"rayx.util.{name}")
    raise AttributeError(f"module 'rayx.util' has no attribute {name!r}")


def get_node_ip_address():
    """The address of the node this process runs on."""
    import os
    from rayx import _api, _core
    if os.environ.get("RAYX_NODE_IP"):
        return os.environ["RAYX_NODE_IP"]
    _api._require()
    return _core.node_ip()


def list_named_actors(all_namespaces=False):
    """The names of the named actors that run now (in this job's namespace,
    or as {"name", "namespace"} dicts of all with all_namespaces=True)."""
    from rayx import _api, _core
    _api._require()
    out = []
    for lease in _core.list_state()["leases"]:
        full = lease.get("actor_name")
        if not full:
            continue
        namespace, _, name = full.rpartition("/")
        if all_namespaces:
            out.append({"name": name, "namespace": namespace or None})
        elif (namespace or None) == _api._namespace:
            out.append(name)
    return out


__all__ = ["ActorPool", "PlacementGroup", "collective", "get_current_placement_group",
           "get_node_ip_address", "get_placement_group", "get_placement_group_state",
           "list_named_actors", "placement_group", "placement_group_table", "queue",
           "remove_placement_group", "scheduling_strategies"]
