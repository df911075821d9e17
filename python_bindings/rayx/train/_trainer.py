"""DataParallelTrainer: runs a training loop on every rank of an actor group,
restarting from the latest checkpoint when an attempt fails.

Design (the C++ trainer's, core/train/trainer.cc): one attempt is one actor
group of Python actors (one placement group of equal bundles, PACK by default;
ranks ordered by node then device; torch's RANK/WORLD_SIZE/LOCAL_RANK/
LOCAL_WORLD_SIZE/NODE_RANK/MASTER_ADDR/MASTER_PORT set in each, MASTER_PORT
reserved by rank 0's agent) plus a Gloo collective group that report() uses as
its barrier. The driver waits on every rank's run() call. When one fails (its
worker or node died, or the loop raised) the whole group is killed, so no rank
waits out a timeout, and, while max_failures allows, a new group resumes from
the latest checkpoint rank 0 reported. Each wait has a deadline: starting a
group (120 s), report() across ranks (RunConfig.report_timeout_s); a rank stuck
outside report() is caught by the others' next report.
"""

import inspect
import logging
import math
import os
import pickle
import time
import uuid

import rayx
from rayx import _api, _core, _remote, exceptions
from rayx import _serialization as ser
from rayx.train import _session
from rayx.train._checkpoint import Checkpoint
from rayx.train._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig

# How long an attempt waits for its ranks to be placed, started and connected.
GROUP_TIMEOUT_S = 120
# How long the driver keeps waiting, after a rank failed because of another
# (a collective error), for the failure that caused it.
_CAUSE_GRACE_S = 3.0

_log = logging.getLogger("rayx.train")


class TrainingFailedError(exceptions.RayxError):
    """fit() failed: the message names the rank, its node and the cause (the
    original exception is __cause__); .result holds what was reported."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class Result:
    """What a run produced (Ray Train's Result).

    metrics: rank 0's last reported metrics. (Ray Train V2 documents the
        metrics of the last checkpoint; they are the same when every report
        carries a checkpoint.)
    checkpoint: the latest checkpoint (None before any).
    best_checkpoints: [(Checkpoint, metrics)] of the checkpoints the run
        keeps (CheckpointConfig), oldest first.
    error: None on success (a failed fit() raises TrainingFailedError, whose
        .result is this with the error).
    path: the run's directory under RunConfig.storage_path (None without one).
    metrics_history (rayx): every report's metrics, oldest first
        (metrics_dataframe: the same as a pandas DataFrame).
    return_value: what rank 0's loop returned.
    num_restarts, num_workers (rayx): restarts taken; ranks of the last attempt.
    """

    def __init__(self, metrics, checkpoint, metrics_history, error, num_restarts, num_workers,
                 path=None, best_checkpoints=None, return_value=None):
        self.metrics = metrics
        self.checkpoint = checkpoint
        self.metrics_history = metrics_history
        self.error = error
        self.num_restarts = num_restarts
        self.num_workers = num_workers
        self.path = path
        self.best_checkpoints = best_checkpoints or []
        self.return_value = return_value

    @property
    def metrics_dataframe(self):
        import pandas
        return pandas.DataFrame(self.metrics_history)

    def get_best_checkpoint(self, metric, mode):
        """The kept checkpoint whose metrics have the best `metric` ("max" or
        "min"), or None."""
        if mode not in ("max", "min"):
            raise ValueError(f"get_best_checkpoint: mode must be 'max' or 'min', not {mode!r}")
        scored = [(m[metric], c) for c, m in self.best_checkpoints if metric in m]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda sc: sc[0])[1]

    def __repr__(self):
        return (f"Result(metrics={self.metrics}, checkpoint={self.checkpoint}, "
                f"error={self.error!r}, num_restarts={self.num_restarts})")


class TrainWorker:
    """The actor each rank runs in (one per bundle of the attempt's group)."""

    def run(self, loop, config, pass_config, backend, run_name, attempt, group, checkpoint_id,
            storage_path, timeout_s, num_to_keep=0, num_replicas=0):
        """Runs the loop as this rank; returns what it returned. num_to_keep:
        an int, or (n, score attribute, score order)."""
        setup = _core.train.rank_setup()
        if setup is None:
            raise RuntimeError("this TrainWorker is not a rank of an actor group")
        # torch's variables, as rayx.group.setup set them in the C environment
        # (os.environ is Python's copy, taken at start-up).
        os.environ.update({
            "RANK": str(setup["rank"]), "WORLD_SIZE": str(setup["world_size"]),
            "LOCAL_RANK": str(setup["local_rank"]),
            "LOCAL_WORLD_SIZE": str(setup["local_world_size"]),
            "NODE_RANK": str(setup["node_rank"]), "GROUP_RANK": str(setup["node_rank"]),
            "MASTER_ADDR": setup["master_addr"], "MASTER_PORT": str(setup["master_port"])})
        _session.start(setup, run_name, attempt, group, checkpoint_id, storage_path, num_to_keep,
                       num_replicas)
        teardown = None
        try:
            if backend is not None:
                teardown = backend.on_start(setup, timeout_s)
            if pass_config:
                value = loop(config)
            else:
                value = loop()
        finally:
            _session.end()
            if teardown is not None:
                teardown()
        return value


def _takes_config(loop):
    try:
        params = [p for p in inspect.signature(loop).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return True
    return len(params) > 0


def _ranks_that_fit(per_worker, strategy="PACK", held=0, hosting=()):
    """How many ranks of `per_worker` the alive nodes have room for now under
    `strategy`, counting the `held` ranks of a running attempt (on the nodes at
    the addresses `hosting`) as free: STRICT_PACK needs them all on one node,
    STRICT_SPREAD one per node. (An estimate: one too high ends in an
    infeasible group, which fit() answers by trying fewer.)"""
    total = most_on_one = spread = held
    for node in rayx.nodes():
        if not node["Alive"]:
            continue
        n = math.inf
        for k, need in per_worker.items():
            if need > 0:
                n = min(n, math.floor(node["Available"].get(k, 0.0) / need + 1e-9))
        n = 1 << 20 if n == math.inf else int(n)
        hosts = node["NodeManagerAddress"] in hosting
        total += n
        most_on_one = max(most_on_one, n + (held if hosts else 0))
        if n >= 1 and not hosts:
            spread += 1
    if strategy == "STRICT_PACK":
        return most_on_one
    if strategy == "STRICT_SPREAD":
        return spread
    return total


class _MissingWorkers:
    """The workers a running elastic attempt lacks: a placement group of their
    bundles, pending while the cluster has no room (the run's demand, which
    `rayx status` shows), reserved once nodes join. Dropped before the next
    attempt places its own group. None for STRICT_PACK and STRICT_SPREAD: their
    missing workers are not a group of their own (their nodes depend on where
    the others are), so such runs grow by free room alone."""

    def __init__(self, count, per_worker, strategy, run_name):
        from rayx.util import placement_group
        self._pg = None
        if strategy in ("STRICT_PACK", "STRICT_SPREAD"):
            return
        try:
            self._pg = placement_group([dict(per_worker)] * count, strategy=strategy,
                                       name=f"train run {run_name}: {count} missing worker(s)")
        except Exception as e:  # noqa: BLE001 - the run goes on without its demand
            _log.warning("run %s: cannot ask for its missing workers: %s", run_name, e)

    def reserved(self):
        if self._pg is None:
            return False
        from rayx.util.placement_group import get_placement_group_state
        return get_placement_group_state(self._pg)[0] == "CREATED"

    def drop(self):
        if self._pg is not None:
            from rayx.util import remove_placement_group
            pg, self._pg = self._pg, None
            try:
                remove_placement_group(pg)
            except Exception as e:  # noqa: BLE001 - it ends with the job anyway
                _log.warning("cannot remove the missing workers' placement group: %s", e)


class DataParallelTrainer:
    """Runs `train_loop_per_worker(train_loop_config)` (or with no argument
    when it takes none) on every rank. Ray Train's names."""

    _backend = None  # set by framework trainers (TorchTrainer)

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, scaling_config=None,
                 run_config=None, failure_config=None, datasets=None, dataset_config=None,
                 backend_config=None, metadata=None, resume_from_checkpoint=None):
        """failure_config: Ray Train V1's place (V2's is RunConfig.failure_config;
        either works, this one wins). datasets (Ray Data) are not supported.
        resume_from_checkpoint: the checkpoint get_checkpoint() gives the
        first attempt (before the run reports its own)."""
        del dataset_config, backend_config, metadata
        if not callable(train_loop_per_worker):
            raise TypeError("train_loop_per_worker must be a function")
        if datasets:
            raise NotImplementedError("datasets: Ray Data is not supported by rayx; load the "
                                      "data inside the training loop (each rank its own shard)")
        if resume_from_checkpoint is not None and not isinstance(resume_from_checkpoint,
                                                                 Checkpoint):
            raise TypeError("resume_from_checkpoint must be a rayx.train.Checkpoint")
        self._loop = train_loop_per_worker
        self._config = train_loop_config
        self._scaling = scaling_config or ScalingConfig()
        self._run = run_config or RunConfig()
        self._failure = failure_config or self._run.failure_config or FailureConfig()
        self._resume_from = resume_from_checkpoint
        self._bounds = self._scaling.validate()
        self._run_bounds = self._bounds
        max_failures = self._failure.max_failures
        if not isinstance(max_failures, int) or isinstance(max_failures, bool) or \
                max_failures < -1:
            raise ValueError(f"FailureConfig: max_failures is {max_failures!r}: it must be an "
                             "int >= 0, or -1 for no limit")
        if not self._run.report_timeout_s or self._run.report_timeout_s <= 0:
            raise ValueError("RunConfig: report_timeout_s must be positive")
        checkpoint_config = self._run.checkpoint_config or CheckpointConfig()
        self._num_to_keep = checkpoint_config.validate()
        self._keep = (self._num_to_keep, checkpoint_config.checkpoint_score_attribute,
                      checkpoint_config.checkpoint_score_order)
        self._num_replicas = checkpoint_config.num_replicas
        if self._run.worker_runtime_env is not None:
            from rayx import _runtime_env
            _runtime_env.validate(self._run.worker_runtime_env, "RunConfig.worker_runtime_env")

    def _failures_left(self, failures):
        """Whether `failures` failures so far still allow a restart."""
        return self._failure.max_failures == -1 or failures <= self._failure.max_failures

    def _size(self):
        lo, hi = self._run_bounds
        if not self._scaling.elastic:
            return lo
        return max(lo, min(hi, _ranks_that_fit(self._scaling.per_worker(),
                                               self._scaling.placement_strategy)))

    def fit(self):
        """Runs the loop until every rank returns. Returns a Result; raises
        TrainingFailedError when an attempt fails and no restarts are left,
        or when the group can never be placed."""
        _api._require()
        # This fit's sizes: a size found infeasible lowers them for this fit only.
        self._run_bounds = self._bounds
        run_name = self._run.name or f"train-{uuid.uuid4().hex[:12]}"
        first_attempt = self._begin_run(run_name)
        self._resume_id = None
        if self._resume_from is not None:
            self._resume_id = self._resume_from.id or _core.train.store_checkpoint(
                self._resume_from.path, self._run.storage_path or "", run_name)[0]
        actor_key = _remote._export(TrainWorker, False)
        ctx = None
        if self._run.worker_runtime_env:
            from rayx import _runtime_env
            env = _runtime_env.resolve(self._run.worker_runtime_env, _runtime_env.current)
            ctx = {"env": env} if env else None  # applied by each rank's worker
        actor_args = [pickle.dumps((actor_key, "TrainWorker", 1, ctx)),
                      bytes(ser.to_bytes(((), {})))]
        per_worker = self._scaling.per_worker()
        pass_config = _takes_config(self._loop)
        failures = restarts = 0
        attempt = first_attempt - 1
        grown = None  # the size a growing run restarts at
        while True:
            attempt += 1
            size = grown or self._size()
            grown = None
            group_name = f"{run_name}.attempt{attempt}"
            try:
                group = _core.train.create_actor_group(
                    actor_args, size, per_worker, self._scaling.placement_strategy, group_name,
                    int(GROUP_TIMEOUT_S * 1000), int(self._run.report_timeout_s * 1000),
                    # torch's NCCL (TorchTrainer with use_gpu) needs a GPU per rank.
                    one_device_per_rank=self._scaling.use_gpu and self._backend is not None)
            except _core.train.Infeasible as e:
                lo, hi = self._run_bounds
                if self._scaling.elastic and size > lo:
                    # No set of alive nodes holds this many under the strategy
                    # (the estimate was high, or a node left): fewer, and never
                    # this many again.
                    _log.warning("run %s: %d ranks cannot be placed (%s); trying fewer",
                                 run_name, size, e)
                    self._run_bounds = (lo, size - 1)
                    grown = min(self._size(), size - 1)
                    continue
                raise TrainingFailedError(f"run {run_name}: {e}") from None
            except RuntimeError as e:
                # A rank died while the group started: a failure like any other.
                error = f"run {run_name}: attempt {attempt} could not start: {e}"
                failures += 1
                if not self._failures_left(failures):
                    raise TrainingFailedError(error, self._result(run_name, error, restarts, size)) \
                        from e
                restarts += 1
                continue
            missing = None
            hi = self._run_bounds[1]
            if self._scaling.elastic and size < hi:
                missing = _MissingWorkers(hi - size, per_worker, self._scaling.placement_strategy,
                                          run_name)
            try:
                error, cause, grown = self._run_attempt(group, run_name, attempt, pass_config,
                                                        size, missing)
            finally:
                _core.train.kill_actor_group(group)
                if missing is not None:
                    missing.drop()  # its reservation is the next attempt's room
            if grown:
                # Room for more ranks: again, larger, from the latest checkpoint
                # (a restart, not a failure).
                _log.warning("run %s: room for %d ranks; restarting at that size from the "
                             "latest checkpoint", run_name, grown)
                restarts += 1
                continue
            if error is None:
                return self._result(run_name, None, restarts, size, self._return_value)
            failures += 1
            if not self._failures_left(failures):
                if self._failure.max_failures:
                    error += f" (after {self._failure.max_failures} restart(s))"
                raise TrainingFailedError(error, self._result(run_name, cause, restarts, size)) \
                    from cause
            _log.warning("%s; restarting from the latest checkpoint (%d of %d restarts)",
                         error.splitlines()[0], failures, self._failure.max_failures)
            restarts += 1

    def _begin_run(self, run_name):
        """This fit's reports start afresh under `run_name`, from the
        checkpoints kept of a run of that name (an earlier job's or fit's, or
        from before the whole cluster restarted): those the nodes keep, or
        those listed under RunConfig.storage_path, as Ray Train resumes a run
        found under its storage path. Returns the first attempt's number."""
        recorded, where = [], ""
        if self._run.storage_path:
            recorded = _core.train.stored_checkpoints(self._run.storage_path, run_name)
            where = f"kept under {self._run.storage_path}"
        elif self._num_replicas:
            recorded = _core.train.recorded_checkpoints(run_name)
            where = "the nodes keep of it"
        _session.clear_latest(run_name, recorded)
        if recorded:
            _log.warning("run %s: resuming from the %d checkpoint(s) %s (newest %s)", run_name,
                         len(recorded), where, recorded[-1])
        # Past the attempts of this job's earlier fits of the run: a report
        # never reuses the id (and so the copies) of a checkpoint it keeps.
        return _core.train.first_attempt(recorded, run_name, self._run.storage_path or "")

    def _run_attempt(self, group, run_name, attempt, pass_config, size, missing=None):
        """Waits for the attempt's ranks. Returns (error, cause, None) when one
        failed, (None, None, None) when all returned, and (None, None, n) when
        an elastic run has room for n > size ranks (looked for once a second)."""
        latest = _session.read_latest(run_name)
        checkpoint_id = latest["checkpoint_id"] if latest else None
        if checkpoint_id and checkpoint_id.startswith("nodes:"):
            # The newest checkpoint every shard of which has a live copy.
            checkpoint_id, skipped = _core.train.newest_restorable(latest.get("kept", []))
            if skipped:
                _log.warning("run %s: %s; resuming from %s", run_name, skipped,
                             checkpoint_id or "the start")
        checkpoint_id = checkpoint_id or self._resume_id
        self._return_value = None
        ranks = group.ranks
        refs = []
        for core in group.actors:
            handle = _remote.ActorHandle(core, "TrainWorker")
            refs.append(handle.run.remote(
                self._loop, self._config, pass_config, self._backend, run_name, attempt,
                group.collective_group, checkpoint_id, self._run.storage_path or "",
                self._run.report_timeout_s, self._keep if self._keep[1] else self._num_to_keep,
                self._num_replicas))
        rank_of = {ref: r for r, ref in enumerate(refs)}
        pending = list(refs)
        failure = None  # (primary, rank, exception)
        grace_end = None
        while pending:
            timeout = 1.0 if grace_end is None else max(0.0, grace_end - time.monotonic())
            ready, pending = rayx.wait(pending, num_returns=1, timeout=timeout)
            for ref in ready:
                try:
                    value = rayx.get(ref)
                    if rank_of[ref] == 0:
                        self._return_value = value
                except Exception as e:  # noqa: BLE001 - every rank failure is reported
                    from rayx.util.collective import CollectiveError
                    primary = not isinstance(e, CollectiveError)
                    if failure is None or (primary and not failure[0]):
                        failure = (primary, rank_of[ref], e)
            if failure is not None:
                if failure[0] or (grace_end is not None and time.monotonic() >= grace_end):
                    break
                if grace_end is None:
                    grace_end = time.monotonic() + _CAUSE_GRACE_S
            elif pending and self._scaling.elastic and size < self._run_bounds[1]:
                if missing is not None and missing.reserved():
                    fit = self._run_bounds[1]
                else:
                    hosting = {info["node_ip"] for info in ranks}
                    fit = min(self._run_bounds[1],
                              _ranks_that_fit(self._scaling.per_worker(),
                                              self._scaling.placement_strategy, size, hosting))
                if fit > size:
                    return None, None, fit
        if failure is None:
            return None, None, None
        _, r, e = failure
        info = ranks[r]
        cause = getattr(e, "cause", None) if isinstance(e, exceptions.RayxTaskError) else None
        kind = type(cause if cause is not None else e).__name__
        return (f"run {run_name}: rank {r} (node {info['node_ip']}, pid {info['pid']}) failed "
                f"in attempt {attempt}: {kind}: {e}"), e, None

    def _result(self, run_name, error, restarts, size, return_value=None):
        latest = _session.read_latest(run_name) or {}
        storage = self._run.storage_path or ""

        def checkpoint_of(ckpt_id):
            return Checkpoint(_id=ckpt_id, _run=run_name, _storage=storage)
        ckpt_id = latest.get("checkpoint_id")
        checkpoint = checkpoint_of(ckpt_id) if ckpt_id else None
        scores = latest.get("kept_metrics", {})
        best = [(checkpoint_of(i), scores.get(i, {})) for i in latest.get("kept", [])]
        path = os.path.join(storage, run_name) if storage else None
        return Result(latest.get("metrics", {}), checkpoint, latest.get("history", []), error,
                      restarts, size, path=path, best_checkpoints=best,
                      return_value=return_value)
