"""Scheduling strategies for options(scheduling_strategy=...): besides these,
the strings "DEFAULT" and "SPREAD"."""


class NodeAffinitySchedulingStrategy:
    """Run on the node `node_id` (hex, as rayx.nodes() gives it); with
    soft=True fall back to another node when that one cannot."""

    def __init__(self, node_id, soft=False, _spill_on_unavailable=False,
                 _fail_on_unavailable=False):
        del _spill_on_unavailable, _fail_on_unavailable
        if hasattr(node_id, "hex") and not isinstance(node_id, str):
            node_id = node_id.hex()
        if not isinstance(node_id, str) or not node_id:
            raise ValueError("NodeAffinitySchedulingStrategy: node_id must be a node's hex id")
        self.node_id = node_id
        self.soft = soft


class PlacementGroupSchedulingStrategy:
    """Run in `placement_group` (bundle `placement_group_bundle_index`, -1:
    any). With placement_group_capture_child_tasks=True, the tasks and actors
    that this call submits go to the same group by default (any bundle), and
    so do theirs. placement_group=None keeps a call out of a capturing
    parent's group."""

    def __init__(self, placement_group, placement_group_bundle_index=-1,
                 placement_group_capture_child_tasks=None):
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks


class In:
    """A label value among `values` (rayx matches one value: In("a"))."""

    def __init__(self, *values):
        self.values = list(values)


class NotIn:
    def __init__(self, *values):
        self.values = list(values)


class Exists:
    pass


class DoesNotExist:
    pass


class NodeLabelSchedulingStrategy:
    """Run on a node whose labels match `hard` ({label: In(value)}). rayx
    matches labels by equality: In with one value; NotIn, Exists,
    DoesNotExist and soft preferences are refused with a clear error."""

    def __init__(self, hard, *, soft=None):
        if soft:
            raise ValueError("NodeLabelSchedulingStrategy: soft label preferences are not "
                             "supported by rayx; use hard={label: In(value)}")
        if not isinstance(hard, dict) or not hard:
            raise ValueError("NodeLabelSchedulingStrategy: hard must be a non-empty dict "
                             "{label: In(value)}")
        self.hard = hard
        self.label_selector()  # checked now

    def label_selector(self):
        out = {}
        for key, cond in self.hard.items():
            if isinstance(cond, In) and len(cond.values) == 1 and isinstance(cond.values[0], str):
                out[key] = cond.values[0]
            else:
                raise ValueError(f"NodeLabelSchedulingStrategy: label {key!r}: rayx matches "
                                 "labels by equality only: use In('<one value>')")
        return out


__all__ = ["DoesNotExist", "Exists", "In", "NodeAffinitySchedulingStrategy",
           "NodeLabelSchedulingStrategy", "NotIn", "PlacementGroupSchedulingStrategy"]
