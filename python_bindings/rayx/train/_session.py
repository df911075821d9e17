"""The rank side of a training run: the session each rank's loop runs in,
report(), get_checkpoint() and get_context()."""

import pickle

from rayx import _core
from rayx.train._checkpoint import Checkpoint

KV_NAMESPACE = "rayx.train"
# Reports kept in a run's history; older ones are dropped (and more while the
# record would pass the head's KV value limit).
MAX_HISTORY = 1000
_KV_VALUE_LIMIT = 900 * 1024

_session = None


def latest_key(run_name):
    return f"{run_name}/latest"


class TrainContext:
    """Who this rank is (inside the training loop)."""

    def __init__(self, info, run_name, attempt):
        self._info = info
        self._run_name = run_name
        self._attempt = attempt

    def get_world_rank(self):
        return self._info["rank"]

    def get_world_size(self):
        return self._info["world_size"]

    def get_local_rank(self):
        return self._info["local_rank"]

    def get_local_world_size(self):
        return self._info["local_world_size"]

    def get_node_rank(self):
        return self._info["node_rank"]

    def get_experiment_name(self):
        return self._run_name

    def get_trial_name(self):
        return self._run_name

    def get_attempt(self):
        """0 for the first attempt, then one more per restart."""
        return self._attempt

    def get_node_ip(self):
        return self._info["node_ip"]


class _Session:
    def __init__(self, info, run_name, attempt, group, checkpoint_id, storage_path, num_to_keep,
                 num_replicas=0):
        self.context = TrainContext(info, run_name, attempt)
        self.run_name = run_name
        self.group = group
        self.storage_path = storage_path
        # Node-kept checkpoints: every rank's shard on num_replicas nodes.
        self.num_replicas = num_replicas if not storage_path else 0
        self.reports = 0
        # How many checkpoints to keep (0: all), and the metric that ranks
        # them (None: the latest are kept) and its order ("max" or "min").
        if isinstance(num_to_keep, (tuple, list)):
            self.num_to_keep, self.score_attribute, self.score_order = num_to_keep
        else:
            self.num_to_keep, self.score_attribute, self.score_order = num_to_keep, None, "max"
        self.checkpoint = None
        if checkpoint_id:
            # This rank's own shard of a node-kept checkpoint (when it has
            # one), else the whole checkpoint.
            self.checkpoint = Checkpoint(_id=checkpoint_id, _run=run_name, _storage=storage_path,
                                         _rank=info["rank"])
            self.checkpoint.path  # fetched before the loop starts  # noqa: B018


def _require(what):
    if _session is None:
        raise RuntimeError(f"rayx.train.{what}() is called inside a training loop run by a "
                           "trainer (TorchTrainer(...).fit()), not elsewhere")
    return _session


def start(info, run_name, attempt, group, checkpoint_id, storage_path, num_to_keep=0,
          num_replicas=0):
    global _session
    _session = _Session(info, run_name, attempt, group, checkpoint_id, storage_path, num_to_keep,
                        num_replicas)


def end():
    global _session
    _session = None


def get_context():
    """This rank's TrainContext: world rank and size, local rank, node rank."""
    return _require("get_context").context


def get_checkpoint():
    """The checkpoint to resume from (the latest one rank 0 reported before a
    restart), or None on a fresh start."""
    return _require("get_checkpoint").checkpoint


def _keep(kept, new_id, scores, num_to_keep, attribute, order):
    """(kept, dropped): `new_id` added to the run's `kept` ids (oldest first),
    and the ones beyond `num_to_keep` (0: none) taken out: the oldest, or with
    a score `attribute` the worst by `scores` (the latest always stays, for a
    restart resumes from it; a checkpoint without the metric ranks last)."""
    kept = [k for k in kept if k != new_id] + [new_id]
    if not num_to_keep or len(kept) <= num_to_keep:
        return kept, []
    if attribute is None:
        return kept[-num_to_keep:], kept[:-num_to_keep]
    sign = 1 if order == "max" else -1

    def rank(ckpt_id):
        value = scores.get(ckpt_id, {}).get(attribute)
        return (0, 0.0) if not isinstance(value, (int, float)) else (1, sign * value)
    best = set(sorted(kept, key=rank, reverse=True)[:num_to_keep])
    best.add(new_id)
    return [k for k in kept if k in best], [k for k in kept if k not in best]


def report(metrics, checkpoint=None, checkpoint_dir_name=None, **unused):
    """Reports `metrics` (a dict) and, optionally, a checkpoint
    (checkpoint_dir_name and Ray's newer upload options are accepted with no
    effect: the cluster keeps checkpoints by content). A barrier:
    every rank calls it the same number of times, and it returns once all have
    (CollectiveError, naming the rank, when one died or did not arrive within
    RunConfig.report_timeout_s). Rank 0's metrics are kept, and its checkpoint
    becomes the run's latest; other ranks' checkpoints are ignored."""
    del checkpoint_dir_name, unused
    s = _require("report")
    if not isinstance(metrics, dict):
        raise TypeError(f"rayx.train.report: metrics must be a dict, not {type(metrics).__name__}")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError("rayx.train.report: checkpoint must be a rayx.train.Checkpoint "
                        "(Checkpoint.from_directory(path))")
    # Node-kept checkpoints: every rank's shard is stored (and copied to other
    # nodes) before the barrier; rank 0 then commits what all ranks finished.
    s.reports += 1
    shard_id = f"a{s.context.get_attempt()}-s{s.reports}"
    if s.num_replicas and checkpoint is not None:
        _core.train.store_shard(checkpoint.path, s.run_name, shard_id,
                                s.context.get_world_rank(), s.num_replicas)
    elif s.storage_path and checkpoint is not None:
        # Every rank's files in the report's folder (Ray Train's layout).
        _core.train.copy_to_storage(checkpoint.path, s.storage_path, s.run_name, shard_id)
    from rayx.util import collective as col
    if s.group:
        col.barrier(group_name=s.group)
    if s.context.get_world_rank() != 0:
        return
    key = latest_key(s.run_name)
    raw = _core.kv_get(KV_NAMESPACE, key)
    record = pickle.loads(raw) if raw else None
    if record is None:
        record = {"metrics": {}, "checkpoint_id": None, "history": []}
    record["metrics"] = dict(metrics)
    record["history"].append(dict(metrics))
    record["reports"] = record.get("reports", 0) + 1
    del record["history"][:-MAX_HISTORY]
    dropped = []
    committed = None
    if s.num_replicas:
        committed = _core.train.commit_shards(s.run_name, shard_id,
                                              s.context.get_world_size())
        if not committed[0]:
            committed = None
    elif s.storage_path:
        committed = _core.train.commit_storage(s.storage_path, s.run_name, shard_id)
        if not committed[0]:
            committed = None
    elif checkpoint is not None:
        committed = _core.train.store_checkpoint(checkpoint.path, "", s.run_name)
    if committed is not None:
        record["checkpoint_id"], size = committed
        record["checkpoints"] = record.get("checkpoints", 0) + 1
        record["checkpoint_bytes"] = record.get("checkpoint_bytes", 0) + size
        record["last_checkpoint_bytes"] = size
        scores = record.setdefault("kept_metrics", {})
        scores[record["checkpoint_id"]] = dict(metrics)
        record["kept"], dropped = _keep(record.get("kept", []), record["checkpoint_id"], scores,
                                        s.num_to_keep or 0, s.score_attribute, s.score_order)
        for old in dropped:
            scores.pop(old, None)
    blob = pickle.dumps(record)
    while len(blob) > _KV_VALUE_LIMIT and len(record["history"]) > 1:
        del record["history"][:max(1, len(record["history"]) // 4)]
        blob = pickle.dumps(record)
    # Then the metrics of the oldest kept checkpoints (the checkpoints stay).
    scores = record.get("kept_metrics", {})
    while len(blob) > _KV_VALUE_LIMIT and len(scores) > 1:
        for old in [k for k in record["kept"] if k in scores][:max(1, len(scores) // 4)]:
            del scores[old]
        blob = pickle.dumps(record)
    if len(blob) > _KV_VALUE_LIMIT:
        raise ValueError(f"rayx.train.report: the metrics pickle to {len(blob)} bytes, over the "
                         f"{_KV_VALUE_LIMIT}-byte limit: report small values (numbers, short "
                         "strings) and put large data in the checkpoint")
    _core.kv_put(KV_NAMESPACE, key, blob, True, True)
    _put_dashboard_record(s, record)
    # Once the new latest is recorded (a resume never looks for a dropped one).
    for old in dropped:
        _core.train.drop_checkpoint(old, s.run_name, s.storage_path or "")
    if committed is not None and (s.num_replicas or s.storage_path):
        _core.train.sweep_uncommitted(s.storage_path or "", s.run_name, record["kept"], shard_id)
    if committed is not None and s.storage_path and not s.num_replicas:
        # For a later fit of the run (another job, another cluster) to resume.
        _core.train.keep_storage_index(s.storage_path, s.run_name, record["kept"])


# The dashboard's copy of a run's reports, as the C++ ranks write it
# (core/protocol/train_record.h, TrainRunRecord): msgpack, numbers only.
DASHBOARD_NAMESPACE = "rayx.dashboard.train"
DASHBOARD_HISTORY = 200


def _put_dashboard_record(s, record):
    import math
    history = []
    for metrics in record["history"][-DASHBOARD_HISTORY:]:
        history.append({str(k): float(v) for k, v in metrics.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v)})
    job = _core.job_id()
    try:
        packed = _core.msgpack_dumps({"run": s.run_name, "job": job,
                                      "attempt": s.context.get_attempt(),
                                      "reports": record["reports"], "history": history,
                                      "checkpoints": record.get("checkpoints", 0),
                                      "checkpoint_bytes": record.get("checkpoint_bytes", 0),
                                      "last_checkpoint_bytes":
                                          record.get("last_checkpoint_bytes", 0)})
        _core.kv_put(DASHBOARD_NAMESPACE, f"{job}/{s.run_name}", packed, True, True)
    except Exception as e:  # the dashboard's copy never fails the run
        import sys
        print(f"rayx.train: the dashboard's copy of run {s.run_name}'s report was not kept: {e}",
              file=sys.stderr)


def clear_latest(run_name, kept=()):
    """Forgets an earlier fit's reports under this run name (driver side).
    `kept`: the checkpoints the run resumes from (ids, oldest first), which
    become its kept ones (num_to_keep drops them as new ones come)."""
    record = None
    if kept:
        record = {"metrics": {}, "checkpoint_id": kept[-1], "history": [], "kept": list(kept),
                  "checkpoints": len(kept)}
    _core.kv_put(KV_NAMESPACE, latest_key(run_name), pickle.dumps(record), True, True)


def read_latest(run_name):
    """The run's latest record (driver side), or None before any report."""
    raw = _core.kv_get(KV_NAMESPACE, latest_key(run_name))
    return pickle.loads(raw) if raw else None
