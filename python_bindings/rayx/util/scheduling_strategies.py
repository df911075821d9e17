"""Scheduling strategies for options(scheduling_strategy=...): besides these,
the strings "DEFAULT" and "SPREAD"."""


class NodeAffinitySchedulingStrategy:
    """Run on the node `node_id` (hex, as rayx.nodes() gives it); with
    soft=True fall back to another node when that one cannot."""

    def __init__(self, node_id, soft=False):
        if not isinstance(node_id, str) or not node_id:
            raise ValueError("NodeAffinitySchedulingStrategy: node_id must be a node's hex id")
        self.node_id = node_id
        self.soft = soft


class PlacementGroupSchedulingStrategy:
    def __init__(self, placement_group, placement_group_bundle_index=-1,
                 placement_group_capture_child_tasks=None):
        del placement_group_capture_child_tasks
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
