"""Placement groups: bundles of resources reserved all-or-nothing."""

from rayx import _api, _core

_ready_value = None  # the value of a pg.ready() ObjectRef: True, serialized once


class PlacementGroup:
    def __init__(self, core, bundles):
        self._core = core
        self.bundle_specs = bundles

    @property
    def id(self):
        return self._core.id

    @property
    def bundle_count(self):
        return len(self.bundle_specs)

    def ready(self):
        """An ObjectRef that becomes ready (with True) once the group is placed,
        as Ray's: rayx.get(pg.ready()) or rayx.wait([pg.ready()], timeout=...)."""
        from rayx import _serialization as ser
        global _ready_value
        if _ready_value is None:
            _ready_value = bytes(ser.to_bytes(True))
        # Completed by the runtime when the head reports the group placed (no worker).
        return _api.ObjectRef(_core.placement_group_ready(self._core, _ready_value))

    def wait(self, timeout_seconds=30):
        """Waits until the group is placed (True), or `timeout_seconds` pass
        (False). An infeasible group raises ValueError with the reason."""
        state, reason = _core.wait_placement_group(self._core, float(timeout_seconds))
        if state == "CREATED":
            return True
        if state == "INFEASIBLE":
            raise ValueError(f"placement group {self.id} is infeasible: {reason}")
        return False

    def __repr__(self):
        return f"PlacementGroup({self.id}, {self.bundle_specs})"


def placement_group(bundles, strategy="PACK", name="", lifetime=None):
    """Reserves `bundles` (a list of {resource: amount}) with `strategy`
    (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD). Returns at once; use
    pg.ready(timeout) to wait for the reservation."""
    _api._require()
    if not isinstance(strategy, str):  # the names are checked by the binding (one list)
        raise ValueError(f"placement group strategy {strategy!r}: use PACK, SPREAD, STRICT_PACK "
                         "or STRICT_SPREAD")
    if not isinstance(bundles, (list, tuple)) or not bundles:
        raise ValueError("placement_group: bundles must be a non-empty list of dicts")
    specs = []
    for i, b in enumerate(bundles):
        if not isinstance(b, dict) or not b:
            raise ValueError(f"placement_group: bundle {i} must be a non-empty dict name -> amount")
        for k, v in b.items():
            if not isinstance(k, str) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"placement_group: bundle {i} has a bad entry {k!r}: {v!r}")
        specs.append({k: float(v) for k, v in b.items()})
    if lifetime not in (None, "detached"):
        raise ValueError(f"lifetime must be 'detached' or None, not {lifetime!r}")
    core = _core.create_placement_group(name, specs, strategy, lifetime == "detached")
    return PlacementGroup(core, specs)


def get_placement_group_state(pg):
    state, reason = _core.wait_placement_group(pg._core, 0)
    return state, reason


def remove_placement_group(pg):
    """Frees the group's reservation; what runs in it is stopped."""
    _core.remove_placement_group(pg.id)
