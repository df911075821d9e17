"""rayx.util: placement groups, scheduling strategies and (rayx.util.collective)
collective groups (Ray's names)."""

from rayx.util import scheduling_strategies
from rayx.util.placement_group import (PlacementGroup, get_placement_group_state,
                                       placement_group, remove_placement_group)


def __getattr__(name):
    # rayx.util.collective loads on first use.
    if name == "collective":
        import importlib
        return importlib.import_module("rayx.util.collective")
    raise AttributeError(f"module 'rayx.util' has no attribute {name!r}")


__all__ = ["PlacementGroup", "collective", "get_placement_group_state", "placement_group",
           "remove_placement_group", "scheduling_strategies"]
