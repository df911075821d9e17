"""rayx.train: data-parallel training on actor groups (Ray Train's names).

    from rayx.train import ScalingConfig, RunConfig, FailureConfig, Checkpoint
    from rayx.train.torch import TorchTrainer, prepare_model

    def loop(config):
        ckpt = rayx.train.get_checkpoint()          # None on a fresh start
        model = prepare_model(make_model())         # DDP on the rank's device
        for epoch in range(config["epochs"]):
            ...
            rayx.train.report({"loss": loss}, checkpoint=Checkpoint.from_directory(d))

    result = TorchTrainer(loop, train_loop_config={"epochs": 5},
                          scaling_config=ScalingConfig(num_workers=4),
                          run_config=RunConfig(failure_config=FailureConfig(max_failures=2))
                          ).fit()
"""

from rayx.train._checkpoint import Checkpoint
from rayx.train._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from rayx.train._session import TrainContext, get_checkpoint, get_context, report
from rayx.train._trainer import DataParallelTrainer, Result, TrainingFailedError



def get_dataset_shard(dataset_name=None):
    """Ray Data's per-rank shard: Ray Data is not supported by rayx."""
    raise NotImplementedError(f"get_dataset_shard({dataset_name!r}): Ray Data is not supported "
                              "by rayx; load the data inside the training loop (each rank its "
                              "own part, e.g. with rayx.train.torch.prepare_data_loader)")


__all__ = [
    "Checkpoint", "CheckpointConfig", "DataParallelTrainer", "FailureConfig", "Result",
    "RunConfig", "ScalingConfig", "TrainContext", "TrainingFailedError", "get_checkpoint",
    "get_context", "get_dataset_shard", "report",
]
