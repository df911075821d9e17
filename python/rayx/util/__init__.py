"""rayx.util: placement groups and scheduling strategies (Ray's names)."""

from rayx.util import scheduling_strategies
from rayx.util.placement_group import (PlacementGroup, get_placement_group_state,
                                       placement_group, remove_placement_group)

__all__ = ["PlacementGroup", "get_placement_group_state", "placement_group",
           "remove_placement_group", "scheduling_strategies"]
