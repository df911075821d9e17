"""Placement groups: bundles of resources reserved all-or-nothing."""

from rayx import _api, _core

_ready_value = None  # the value of a pg.ready() ObjectRef: True, serialized once


class PlacementGroup:
    """A placement group: made by placement_group(), or found by id or name
    (get_current_placement_group, get_placement_group), whose bundles are
    then read from the head on first use."""

    def __init__(self, core, bundles=None):
        self._core = core
        self._bundles = bundles

    @property
    def id(self):
        return self._core.id

    @property
    def bundle_specs(self):
        if self._bundles is None:
            info = placement_group_table(self)
            self._bundles = [dict(b) for b in info.get("bundles", {}).values()]
        return self._bundles

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

    def __eq__(self, other):
        return isinstance(other, PlacementGroup) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __reduce__(self):
        return (_from_id, (self.id, self._bundles))

    def __repr__(self):
        return f"PlacementGroup({self.id}, {self._bundles})"


def _from_id(pg_id, bundles=None):
    return PlacementGroup(_core.placement_group_from_id(pg_id), bundles)


def placement_group(bundles, strategy="PACK", name="", lifetime=None, _soft_target_node_id=None,
                    bundle_label_selector=None):
    """Reserves `bundles` (a list of {resource: amount}) with `strategy`
    (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD). Returns at once; use
    pg.ready() or pg.wait(timeout) to wait for the reservation."""
    del _soft_target_node_id
    _api._require()
    if bundle_label_selector:
        raise ValueError("placement_group: bundle_label_selector is not supported by rayx")
    if not isinstance(strategy, str):  # the names are checked by the binding (one list)
        raise ValueError(f"unknown placement strategy {strategy!r}: use "
                         f"{_core.PLACEMENT_STRATEGY_NAMES}")
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
    """(state, reason): PENDING, CREATED, INFEASIBLE or REMOVED. A group this
    process saw placed is looked up in the head's table, which knows when it
    was removed since."""
    state, reason = _core.wait_placement_group(pg._core, 0)
    if state == "CREATED":
        for g in _core.list_state()["placement_groups"]:
            if g["placement_group_id"] == pg.id:
                return g["state"], g["reason"]
        return "REMOVED", "the head has no placement group by this id"
    return state, reason


def remove_placement_group(pg):
    """Frees the group's reservation; what runs in it is stopped."""
    _core.remove_placement_group(pg.id)


def _table_entry(g):
    return {
        "placement_group_id": g["placement_group_id"],
        "name": g["name"],
        "bundles": {i: dict(b) for i, b in enumerate(g["bundles"])},
        "bundles_to_node_id": {i: n for i, n in enumerate(g["bundle_nodes"])},
        "strategy": g["strategy"],
        "state": g["state"],
        "stats": {"scheduling_state": g["state"], "reason": g["reason"]},
        "job_id": g["job_id"],
        "detached": g["detached"],
    }


def placement_group_table(placement_group=None):
    """The head's placement groups, as Ray's table: {id: info} for all, or
    the info of `placement_group` ({} when the head has none by that id).
    Each info: placement_group_id, name, bundles {index: resources},
    bundles_to_node_id, strategy, state, stats."""
    _api._require()
    groups = {g["placement_group_id"]: _table_entry(g)
              for g in _core.list_state()["placement_groups"]}
    if placement_group is None:
        return groups
    return groups.get(placement_group.id, {})


def get_placement_group(placement_group_name):
    """The placement group named `placement_group_name` (ValueError when none)."""
    _api._require()
    for g in _core.list_state()["placement_groups"]:
        if g["name"] == placement_group_name and g["state"] != "REMOVED":
            return _from_id(g["placement_group_id"],
                            [{k: float(v) for k, v in b.items()} for b in g["bundles"]])
    raise ValueError(f"Failed to look up placement group with name: {placement_group_name}")


def get_current_placement_group():
    """The placement group the calling task or actor runs in; None in a
    driver and outside any group."""
    from rayx import _remote
    if _api._mode != "worker":
        return None
    ctx = _remote._call_ctx or {}
    pg_id = ctx.get("pg")
    return None if pg_id is None else _from_id(pg_id)
