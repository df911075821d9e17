"""The configuration of a training run (Ray Train's names, V2 and V1).

Ray Train V2 (the default since Ray 2.51) puts FailureConfig in RunConfig and
takes num_workers=(min, max) for an elastic run; rayx accepts those and the
older places (the trainer's failure_config argument, min_workers/max_workers).
"""

import dataclasses
from typing import Any, Dict, List, Optional, Tuple, Union


@dataclasses.dataclass
class ScalingConfig:
    """How many ranks to run and what each one holds.

    num_workers: ranks to run, or (min_workers, max_workers) for an elastic run.
    use_gpu: one GPU per rank (plus resources_per_worker); NCCL between ranks.
    resources_per_worker: per rank. Default: {"CPU": 1}.
    min_workers, max_workers: an elastic run (rayx's older names for the
        tuple). Each attempt (the first, and every restart after a failure)
        runs as many ranks as fit in the cluster then, clamped to
        [min_workers, max_workers]; a running attempt that finds room for more
        ranks (checked once a second, e.g. a node joined) restarts at the
        larger size from the latest checkpoint, which is not a failure.
    placement_strategy: how the ranks' bundles spread over nodes. Default: PACK.
    trainer_resources, accelerator_type, use_tpu, topology, label_selector,
        elastic_resize_monitor_interval_s: accepted; rayx's trainer runs in
        the driver (no trainer actor), and the others have no meaning here.
    """
    num_workers: Union[int, Tuple[int, int]] = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, float]] = None
    min_workers: Optional[int] = None
    max_workers: Optional[int] = None
    placement_strategy: str = "PACK"
    trainer_resources: Optional[Dict[str, float]] = None
    accelerator_type: Optional[str] = None
    use_tpu: bool = False
    topology: Optional[str] = None
    label_selector: Optional[Dict[str, str]] = None
    elastic_resize_monitor_interval_s: float = 60.0

    def __post_init__(self):
        if isinstance(self.num_workers, (tuple, list)):
            if len(self.num_workers) != 2:
                raise ValueError(f"ScalingConfig: num_workers {self.num_workers!r}: give an int, "
                                 "or (min_workers, max_workers) for an elastic run")
            lo, hi = self.num_workers
            self.min_workers, self.max_workers = lo, hi
            self.num_workers = hi
        if self.use_tpu:
            raise ValueError("ScalingConfig: use_tpu is not supported by rayx")

    @property
    def elastic(self):
        return self.min_workers is not None or self.max_workers is not None

    def per_worker(self):
        res = dict(self.resources_per_worker or {})
        if not res:
            res["CPU"] = 1.0
        if self.use_gpu and res.get("GPU", 0) <= 0:
            res["GPU"] = 1.0
        return {k: float(v) for k, v in res.items()}

    @property
    def total_resources(self):
        n = self.max_workers if self.elastic and self.max_workers else self.num_workers
        return {k: v * n for k, v in self.per_worker().items()}

    @property
    def num_cpus_per_worker(self):
        return self.per_worker().get("CPU", 0.0)

    @property
    def num_gpus_per_worker(self):
        return self.per_worker().get("GPU", 0.0)

    def validate(self):
        for k, v in (self.resources_per_worker or {}).items():
            if not isinstance(k, str) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"ScalingConfig: resources_per_worker[{k!r}] = {v!r}: amounts "
                                 "must be numbers >= 0")
        if self.elastic:
            lo = self.min_workers if self.min_workers is not None else 1
            hi = self.max_workers if self.max_workers is not None else self.num_workers
            if not isinstance(lo, int) or lo < 1:
                raise ValueError(f"ScalingConfig: min_workers is {self.min_workers!r}: an elastic "
                                 "run needs at least 1")
            if not isinstance(hi, int) or hi < lo:
                raise ValueError(f"ScalingConfig: max_workers ({hi!r}) is less than min_workers "
                                 f"({lo})")
            return lo, hi
        if not isinstance(self.num_workers, int) or self.num_workers < 1:
            raise ValueError(f"ScalingConfig: num_workers is {self.num_workers!r}: a run needs "
                             "at least 1 worker")
        return self.num_workers, self.num_workers


@dataclasses.dataclass
class CheckpointConfig:
    """num_to_keep: how many of a run's checkpoints the cluster keeps; the
        others are deleted (the head's package, or the copy under
        storage_path). Default None: all are kept (Ray's default).
    checkpoint_score_attribute: the reported metric that ranks checkpoints:
        with num_to_keep, the best ones are kept (and the latest, which a
        restart resumes from). Default None: the latest ones are kept.
    checkpoint_score_order: "max" (higher is better, the default) or "min".
    num_replicas: copies of each checkpoint shard the nodes keep (rayx's):
        every rank may report a checkpoint directory, its shard, kept on its
        own node's disk and copied node to node to num_replicas - 1 others; a
        checkpoint is the union of one report's shards, committed once every
        rank reported, and a restarted rank gets its own shard back. Default 2.
        0: rank 0's checkpoint alone, packed and kept by the head (at most 1
        GiB). Ignored with RunConfig.storage_path.
    """
    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"
    num_replicas: int = 2
    checkpoint_frequency: Any = "DEPRECATED"
    checkpoint_at_end: Any = "DEPRECATED"

    def validate(self):
        n = self.num_to_keep
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError(f"CheckpointConfig: num_to_keep is {n!r}: keep at least 1 "
                             "checkpoint, or None to keep all")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError(f"CheckpointConfig: checkpoint_score_order is "
                             f"{self.checkpoint_score_order!r}: use 'max' or 'min'")
        attr = self.checkpoint_score_attribute
        if attr is not None and not isinstance(attr, str):
            raise ValueError("CheckpointConfig: checkpoint_score_attribute must be a metric name")
        r = self.num_replicas
        if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r <= 16:
            raise ValueError(f"CheckpointConfig: num_replicas is {r!r}: 1 to 16 copies of each "
                             "shard on the nodes, or 0 for the head's package store")
        return n or 0


@dataclasses.dataclass
class FailureConfig:
    """max_failures: restarts from the latest checkpoint after a failed
    attempt (a rank's worker or node died, or the loop raised). Default 0;
    -1: no limit."""
    max_failures: int = 0
    fail_fast: bool = False
    controller_failure_limit: int = -1


@dataclasses.dataclass
class RunConfig:
    """name: names the run (its reports and checkpoints are kept under it).
        Default: a new id.
    storage_path: a directory every node sees (a shared mount) to keep
        checkpoints in. Default: none: checkpoints are packed and kept by the
        head, and fetched by whichever node resumes.
    failure_config: restarts after failures (FailureConfig), Ray Train V2's
        place for it (the trainer's failure_config argument also works).
    checkpoint_config: which checkpoints to keep (CheckpointConfig).
    worker_runtime_env: the runtime_env of the ranks' actors (env_vars,
        working_dir, py_modules).
    report_timeout_s: (rayx) how long report() waits for the slowest rank
        (and torch.distributed's timeout) before the run fails naming the
        rank that did not arrive. Default: 120 s.
    callbacks, storage_filesystem, sync_config, verbose, stop,
        progress_reporter, log_to_file: accepted with no effect here.
    """
    name: Optional[str] = None
    storage_path: Optional[str] = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    worker_runtime_env: Optional[Dict[str, Any]] = None
    report_timeout_s: float = 120.0
    callbacks: Optional[List[Any]] = None
    storage_filesystem: Any = None
    sync_config: Any = None
    verbose: Any = None
    stop: Any = None
    progress_reporter: Any = None
    log_to_file: Any = None

    def __post_init__(self):
        if self.storage_path is not None:
            import os
            path = os.fspath(self.storage_path)
            if "://" in path:
                raise ValueError(f"RunConfig: storage_path {path!r}: rayx keeps checkpoints in a "
                                 "directory every node sees (a shared mount), not a URI")
            self.storage_path = path
