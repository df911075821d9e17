"""Ray Train V2's names on rayx, with real torch (gloo) on the loopback
cluster: FailureConfig inside RunConfig, num_workers=(min, max), checkpoint
scoring (best_checkpoints), the rank context, prepare_data_loader,
Checkpoint's directory API and worker_runtime_env."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")

from rayx import train  # noqa: E402
from rayx.train import (Checkpoint, CheckpointConfig, FailureConfig, RunConfig,  # noqa: E402
                        ScalingConfig)
from rayx.train.torch import (TorchTrainer, get_device, prepare_data_loader,  # noqa: E402
                              prepare_model)


def scored_loop(config):
    """Reports five checkpoints whose "acc" peaks at step 2; fails once (the
    first attempt, after step 3) when config["fail_at"] names a marker file
    not yet there."""
    ctx = train.get_context()
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = int(open(os.path.join(d, "step")).read()) + 1
    for step in range(start, 5):
        acc = [0.1, 0.5, 0.9, 0.3, 0.2][step]
        with tempfile.TemporaryDirectory() as d:
            checkpoint = None
            if ctx.get_world_rank() == 0:
                with open(os.path.join(d, "step"), "w") as f:
                    f.write(str(step))
                checkpoint = Checkpoint.from_directory(d)
                checkpoint.set_metadata({"step": step})
            train.report({"step": step, "acc": acc, "world": ctx.get_world_size(),
                          "local_world": ctx.get_local_world_size(),
                          "node_rank": ctx.get_node_rank(), "local_rank": ctx.get_local_rank(),
                          "name": ctx.get_experiment_name()}, checkpoint=checkpoint)
        marker = config.get("fail_at")
        if marker and step == 3 and not os.path.exists(marker):
            if ctx.get_world_rank() == 1:
                open(marker, "w").close()
                raise RuntimeError("first attempt fails here")
    return "rank0-finished" if ctx.get_world_rank() == 0 else None


def test_v2_configs_scoring_and_restart(rayx_mod, tmp_path):
    marker = str(tmp_path / "failed-once")
    run = RunConfig(name="v2-scored", storage_path=str(tmp_path / "store"),
                    failure_config=FailureConfig(max_failures=1),
                    checkpoint_config=CheckpointConfig(num_to_keep=2,
                                                       checkpoint_score_attribute="acc",
                                                       checkpoint_score_order="max"))
    result = TorchTrainer(scored_loop, train_loop_config={"fail_at": marker},
                          scaling_config=ScalingConfig(num_workers=2), run_config=run).fit()
    assert os.path.exists(marker) and result.num_restarts == 1  # RunConfig's FailureConfig
    assert result.error is None and result.return_value == "rank0-finished"
    assert result.metrics["step"] == 4 and result.metrics["world"] == 2
    assert result.metrics["name"] == "v2-scored"
    assert result.path == os.path.join(str(tmp_path / "store"), "v2-scored")
    # Kept: the two best by acc (steps 2 and 1)... and the latest (step 4),
    # which a restart resumes from.
    kept = {m["step"]: c for c, m in result.best_checkpoints}
    assert sorted(kept) == [1, 2, 4]
    best = result.get_best_checkpoint("acc", "max")
    with best.as_directory() as d:
        assert open(os.path.join(d, "step")).read() == "2"
    assert best.get_metadata() == {"step": 2}
    copy = result.checkpoint.to_directory(str(tmp_path / "copy"))
    assert open(os.path.join(copy, "step")).read() == "4"
    # (A rank killed while copying a checkpoint in leaves its staging folder,
    # "<name>.unpacking-<pid>", behind: core/train's, not counted here.)
    stored = [n for n in os.listdir(tmp_path / "store" / "v2-scored")
              if n.startswith("checkpoint_") and ".unpacking-" not in n]
    assert len(stored) == 3, stored


def test_failure_config_in_run_config_gives_up(rayx_mod, tmp_path):
    def always_fails():
        raise ValueError("never works")

    trainer = TorchTrainer(always_fails, scaling_config=ScalingConfig(num_workers=1),
                           run_config=RunConfig(failure_config=FailureConfig(max_failures=1)))
    with pytest.raises(train.TrainingFailedError) as info:
        trainer.fit()
    assert info.value.result.num_restarts == 1 and "never works" in str(info.value)
    # -1 is Ray's "no limit": accepted.
    TorchTrainer(always_fails, run_config=RunConfig(failure_config=FailureConfig(
        max_failures=-1)))
    with pytest.raises(ValueError, match="max_failures"):
        TorchTrainer(always_fails, run_config=RunConfig(failure_config=FailureConfig(
            max_failures=-2)))


def data_loop(config):
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(torch.arange(40, dtype=torch.float32).unsqueeze(1))
    loader = prepare_data_loader(DataLoader(data, batch_size=4, shuffle=True))
    model = prepare_model(torch.nn.Linear(1, 1))
    seen = sorted(int(v) for (batch,) in loader for v in batch.flatten())
    assert get_device().type == "cpu"
    train.report({"seen": seen, "env": os.environ.get("FROM_RUNTIME_ENV"),
                  "wrapped": type(model).__name__})


def test_prepare_data_loader_shards_and_elastic_tuple(rayx_mod):
    # num_workers=(min, max): Ray Train V2's elastic form.
    scaling = ScalingConfig(num_workers=(1, 2))
    assert (scaling.min_workers, scaling.max_workers) == (1, 2)
    run = RunConfig(worker_runtime_env={"env_vars": {"FROM_RUNTIME_ENV": "yes"}})
    result = TorchTrainer(data_loop, scaling_config=ScalingConfig(num_workers=2),
                          run_config=run).fit()
    seen = result.metrics["seen"]
    assert len(seen) == 20 and len(set(seen)) == 20  # rank 0 saw its half only
    assert result.metrics["env"] == "yes"
    assert result.metrics["wrapped"] == "DistributedDataParallel"
    with pytest.raises(NotImplementedError, match="Ray Data"):
        TorchTrainer(data_loop, datasets={"train": object()})
    with pytest.raises(ValueError, match="num_workers"):
        ScalingConfig(num_workers=(1, 2, 3))


def test_checkpoint_directory_api_and_resume_from_checkpoint(rayx_mod, tmp_path):
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "step").write_text("3")
    ckpt = Checkpoint.from_directory(str(src))
    with ckpt.as_directory() as d:
        assert open(os.path.join(d, "step")).read() == "3"
    with pytest.raises(ValueError):
        Checkpoint.from_directory(str(tmp_path / "missing"))
    # resume_from_checkpoint: the first attempt's get_checkpoint().
    result = TorchTrainer(scored_loop, train_loop_config={},
                          scaling_config=ScalingConfig(num_workers=1),
                          resume_from_checkpoint=ckpt).fit()
    assert [m["step"] for m in result.metrics_history] == [4]
