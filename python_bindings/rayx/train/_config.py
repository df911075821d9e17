"""The configuration of a training run (Ray Train's names)."""

import dataclasses
from typing import Dict, Optional


@dataclasses.dataclass
class ScalingConfig:
    """How many ranks to run and what each one holds.

    num_workers: ranks to run (ignored when min_workers/max_workers are set).
    use_gpu: one GPU per rank (plus resources_per_worker); NCCL between ranks.
    resources_per_worker: per rank. Default: {"CPU": 1}.
    min_workers, max_workers: an elastic run. Each attempt (the first, and every
        restart after a failure) runs as many ranks as fit in the cluster then,
        clamped to [min_workers, max_workers]; a running attempt that finds room
        for more ranks (checked once a second, e.g. a node joined) restarts at
        the larger size from the latest checkpoint, which is not a failure.
    placement_strategy: how the ranks' bundles spread over nodes. Default: PACK.
    """
    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, float]] = None
    min_workers: Optional[int] = None
    max_workers: Optional[int] = None
    placement_strategy: str = "PACK"

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
    """num_to_keep: how many of a run's latest checkpoints the cluster keeps;
        older ones are deleted (the head's package, or the copy under
        storage_path). Default None: all are kept (Ray's default)."""
    num_to_keep: Optional[int] = None

    def validate(self):
        n = self.num_to_keep
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError(f"CheckpointConfig: num_to_keep is {n!r}: keep at least 1 "
                             "checkpoint, or None to keep all")
        return n or 0


@dataclasses.dataclass
class RunConfig:
    """name: names the run (its reports and checkpoints are kept under it).
        Default: a new id.
    storage_path: a directory every node sees (a shared mount) to keep
        checkpoints in. Default: none: checkpoints are packed and kept by the
        head, and fetched by whichever node resumes.
    report_timeout_s: how long report() waits for the slowest rank (and
        torch.distributed's timeout) before the run fails naming the rank that
        did not arrive. Default: 120 s.
    checkpoint_config: how many checkpoints to keep (CheckpointConfig).
    """
    name: Optional[str] = None
    storage_path: Optional[str] = None
    report_timeout_s: float = 120.0
    checkpoint_config: Optional[CheckpointConfig] = None


@dataclasses.dataclass
class FailureConfig:
    """max_failures: restarts from the latest checkpoint after a failed
    attempt (a rank's worker or node died, or the loop raised). Default 0."""
    max_failures: int = 0
