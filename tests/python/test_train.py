"""rayx.train with real PyTorch (Debian's torch, gloo) on the 3-node loopback
cluster: DDP over 4 ranks on 2 nodes trains (the loss falls, every rank ends
with the same weights), a SIGKILLed rank's run resumes from the checkpoint, a
loop that raises fails fit() with its error, and the rank-side API."""

import os
import signal
import tempfile
import threading

import pytest

from conftest import wait_until

torch = pytest.importorskip("torch")

import rayx.train  # noqa: E402
from rayx.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig  # noqa: E402
from rayx.train.torch import TorchTrainer, get_device, prepare_model  # noqa: E402


def linear_loop(config):
    """y = 3*x0 - 2*x1 + x2 + 0.5*x3 + 1 on each rank's own data shard; rank 0
    checkpoints every epoch. Every rank's weight checksum and pid are gathered
    and reported by rank 0."""
    import torch
    import torch.distributed as dist
    ctx = rayx.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    start = 0
    ckpt = rayx.train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"))
        model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    model = prepare_model(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(64, 4, generator=gen)
    y = x @ torch.tensor([[3.0], [-2.0], [1.0], [0.5]]) + 1.0
    for epoch in range(start, config["epochs"]):
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
        mine = (checksum, os.getpid(), ctx.get_node_rank(), ctx.get_local_rank())
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        metrics = {"epoch": epoch, "loss": float(mean_loss) / world, "start": start,
                   "checksums": [e[0] for e in everyone], "pids": [e[1] for e in everyone],
                   "node_ranks": [e[2] for e in everyone],
                   "local_ranks": [e[3] for e in everyone], "world": world}
        checkpoint = None
        with tempfile.TemporaryDirectory() as d:
            if rank == 0:
                torch.save({"model": model.module.state_dict(), "epoch": epoch},
                           os.path.join(d, "state.pt"))
                checkpoint = Checkpoint.from_directory(d)
            rayx.train.report(metrics, checkpoint=checkpoint)
        pause = config.get("pause_file")
        if pause and start == 0 and epoch == config["pause_after"]:
            if rank == 0:
                with open(pause + ".tmp", "w") as f:
                    f.write(" ".join(str(p) for p in metrics["pids"]))
                os.rename(pause + ".tmp", pause)
            # Wait, with a deadline, for the test to kill a rank: training on
            # would race the kill.
            wait_until(lambda: os.path.exists(pause + ".go"), 60, "the test's kill")


def test_ddp_on_two_nodes_loss_falls_and_ranks_agree(rayx_mod):
    result = TorchTrainer(linear_loop, train_loop_config={"epochs": 4},
                          scaling_config=ScalingConfig(num_workers=4),
                          run_config=RunConfig(name="ddp-agree")).fit()
    assert result.error is None
    history = result.metrics_history
    assert [m["epoch"] for m in history] == [0, 1, 2, 3]
    assert history[-1]["loss"] < history[0]["loss"] * 0.5, [m["loss"] for m in history]
    last = result.metrics
    assert last["world"] == 4
    assert len(set(last["checksums"])) == 1, f"ranks disagree: {last['checksums']}"
    # 2-CPU nodes: at least two nodes; ranks ordered by node, local ranks
    # counting from 0 on each node.
    nodes, locals_ = last["node_ranks"], last["local_ranks"]
    assert len(set(nodes)) >= 2 and nodes == sorted(nodes) and nodes[0] == 0, nodes
    assert locals_ == [nodes[:i].count(n) for i, n in enumerate(nodes)], (nodes, locals_)
    with result.checkpoint.as_directory() as d:
        state = torch.load(os.path.join(d, "state.pt"))
    assert state["epoch"] == 3
    weights = sum(float(v.double().sum()) for v in state["model"].values())
    assert weights == pytest.approx(last["checksums"][0])


def test_sigkilled_rank_resumes_from_the_checkpoint(rayx_mod, tmp_path):
    pause = str(tmp_path / "paused")
    config = {"epochs": 4, "pause_file": pause, "pause_after": 1}
    trainer = TorchTrainer(linear_loop, train_loop_config=config,
                           scaling_config=ScalingConfig(num_workers=4),
                           run_config=RunConfig(name="ddp-resume", report_timeout_s=30),
                           failure_config=FailureConfig(max_failures=1))
    outcome = {}

    def fit():
        try:
            outcome["result"] = trainer.fit()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    wait_until(lambda: os.path.exists(pause) or not thread.is_alive(), 90,
               "epoch 1's checkpoint")
    assert "error" not in outcome, outcome.get("error")
    pids = [int(p) for p in open(pause).read().split()]
    os.kill(pids[2], signal.SIGKILL)
    open(pause + ".go", "w").close()
    thread.join(120)
    assert not thread.is_alive(), "fit() did not return after the restart"
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert result.error is None and result.num_restarts == 1
    epochs = [m["epoch"] for m in result.metrics_history]
    starts = [m["start"] for m in result.metrics_history]
    # Attempt 0 reported epochs 0 and 1 (checkpointed), then rank 2 died; the
    # restart began at epoch 2 from that checkpoint.
    assert epochs == [0, 1, 2, 3], epochs
    assert starts == [0, 0, 2, 2], starts
    assert pids[2] not in result.metrics["pids"]
    assert len(set(result.metrics["checksums"])) == 1
    assert result.metrics["loss"] < result.metrics_history[0]["loss"]


def test_use_gpu_ranks_sharing_a_gpu_are_refused(rayx_mod):
    """use_gpu with half a GPU per rank would put two ranks of torch's NCCL
    group on one device ("Duplicate GPU detected"): fit() refuses it before
    the loop runs, naming the ranks, and frees what it placed. (Fake GPUs:
    127.0.0.2 has two, so four half-GPU ranks must share.)"""
    trainer = TorchTrainer(linear_loop, train_loop_config={"epochs": 1},
                           scaling_config=ScalingConfig(
                               num_workers=4, use_gpu=True,
                               resources_per_worker={"CPU": 0.25, "GPU": 0.5}),
                           run_config=RunConfig(name="shared-gpu"))
    with pytest.raises(ValueError, match=r"ranks \d and \d both hold GPU \d of node 127\.0\.0\.2.*"
                                         r"Duplicate GPU detected"):
        trainer.fit()
    wait_until(lambda: rayx_mod.available_resources().get("GPU") == 2.0, 10,
               "the refused run's GPUs to be free again")


def failing_loop():
    if rayx.train.get_context().get_world_rank() == 1:
        raise ValueError("bad batch at step 3")
    rayx.train.report({"ok": 1})


def test_loop_that_raises_fails_fit_with_the_error(rayx_mod):
    trainer = TorchTrainer(failing_loop, scaling_config=ScalingConfig(num_workers=2),
                           run_config=RunConfig(report_timeout_s=20))
    with pytest.raises(rayx.train.TrainingFailedError) as info:
        trainer.fit()
    message = str(info.value)
    assert "rank 1" in message and "ValueError" in message and "bad batch at step 3" in message
    assert isinstance(info.value.__cause__, ValueError)


def context_loop(config):
    ctx = rayx.train.get_context()
    assert rayx.train.get_checkpoint() is None
    env = {k: os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                      "MASTER_PORT", "NODE_RANK")}
    import torch.distributed as dist
    rayx.train.report({"rank": ctx.get_world_rank(), "size": ctx.get_world_size(),
                       "env": env, "dist": dist.get_rank(), "cfg": config["x"]})


def test_context_env_and_validation(rayx_mod):
    result = TorchTrainer(context_loop, train_loop_config={"x": 7},
                          scaling_config=ScalingConfig(min_workers=1, max_workers=2)).fit()
    m = result.metrics
    assert m["rank"] == 0 and m["dist"] == 0 and m["cfg"] == 7 and m["size"] == 2
    assert m["env"]["RANK"] == "0" and m["env"]["WORLD_SIZE"] == "2"
    assert int(m["env"]["MASTER_PORT"]) > 0 and m["env"]["MASTER_ADDR"].startswith("127.0.0.")
    assert result.checkpoint is None
    with pytest.raises(RuntimeError, match="inside a training loop"):
        rayx.train.report({"x": 1})
    with pytest.raises(ValueError, match="num_workers is 0"):
        TorchTrainer(context_loop, scaling_config=ScalingConfig(num_workers=0))
    with pytest.raises(ValueError, match="max_workers"):
        TorchTrainer(context_loop, scaling_config=ScalingConfig(min_workers=3, max_workers=2))
    with pytest.raises(rayx.train.TrainingFailedError, match="can never be placed"):
        TorchTrainer(context_loop, scaling_config=ScalingConfig(
            num_workers=1, resources_per_worker={"CPU": 64})).fit()


def stuck_loop():
    import threading
    if rayx.train.get_context().get_world_rank() == 1:
        threading.Event().wait(300)  # never reports; killed with its group
    rayx.train.report({"ok": 1})


def test_rank_that_never_reports_fails_the_run_at_the_deadline(rayx_mod):
    import time
    trainer = TorchTrainer(stuck_loop, scaling_config=ScalingConfig(num_workers=2),
                           run_config=RunConfig(report_timeout_s=2))
    start = time.monotonic()
    with pytest.raises(rayx.train.TrainingFailedError) as info:
        trainer.fit()
    assert time.monotonic() - start < 30
    message = str(info.value)
    assert "barrier" in message.lower() and "rank 1" in message, message


def checkpoint_every_report_loop(config):
    for step in range(config["reports"]):
        with tempfile.TemporaryDirectory() as d:
            checkpoint = None
            if rayx.train.get_context().get_world_rank() == 0:
                with open(os.path.join(d, "step"), "w") as f:
                    f.write(str(step))  # each checkpoint's content differs
                checkpoint = Checkpoint.from_directory(d)
            rayx.train.report({"step": step}, checkpoint=checkpoint)


def test_only_the_last_checkpoints_are_kept(rayx_mod, tmp_path):
    from rayx.train import CheckpointConfig
    run = RunConfig(name="keep-two", storage_path=str(tmp_path),
                    checkpoint_config=CheckpointConfig(num_to_keep=2))
    result = TorchTrainer(checkpoint_every_report_loop, train_loop_config={"reports": 5},
                          scaling_config=ScalingConfig(num_workers=2), run_config=run).fit()
    kept = sorted(p.name for p in (tmp_path / "keep-two").iterdir()
                  if p.name.startswith("checkpoint_"))
    assert len(kept) == 2, kept
    # Listed for a later fit of the run, oldest first.
    assert (tmp_path / "keep-two" / ".rayx-kept").read_text().split() == kept
    with result.checkpoint.as_directory() as d:
        with open(os.path.join(d, "step")) as f:
            assert f.read() == "4"  # the latest is among those kept
    with pytest.raises(ValueError, match="num_to_keep"):
        TorchTrainer(checkpoint_every_report_loop, train_loop_config={"reports": 1},
                     run_config=RunConfig(checkpoint_config=CheckpointConfig(num_to_keep=0)))


def resuming_loop(config):
    start = 0
    ckpt = rayx.train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = int(open(os.path.join(d, "step")).read()) + 1
    for step in range(start, config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            checkpoint = None
            if rayx.train.get_context().get_world_rank() == 0:
                with open(os.path.join(d, "step"), "w") as f:
                    f.write(str(step))
                checkpoint = Checkpoint.from_directory(d)
            rayx.train.report({"step": step, "start": start}, checkpoint=checkpoint)


def test_a_run_under_a_storage_path_resumes_by_name(rayx_mod, tmp_path):
    """As in Ray Train V2: a fit of a run found under its storage path
    resumes from its latest checkpoint, reports past the attempts it keeps,
    and num_to_keep drops the earlier fit's folders; another name starts
    afresh."""
    from rayx.train import CheckpointConfig

    def fit(name, steps):
        run = RunConfig(name=name, storage_path=str(tmp_path),
                        checkpoint_config=CheckpointConfig(num_to_keep=2))
        return TorchTrainer(resuming_loop, train_loop_config={"steps": steps},
                            scaling_config=ScalingConfig(num_workers=2), run_config=run).fit()

    first = fit("resumed", 3)
    assert first.metrics == {"step": 2, "start": 0}
    second = fit("resumed", 5)
    assert second.metrics == {"step": 4, "start": 3}
    folders = sorted(p.name for p in (tmp_path / "resumed").iterdir()
                     if p.name.startswith("checkpoint_"))
    assert folders == ["checkpoint_a1-s1", "checkpoint_a1-s2"], folders
    assert (tmp_path / "resumed" / ".rayx-kept").read_text().split() == folders
    assert fit("other", 1).metrics == {"step": 0, "start": 0}


def every_rank_checkpoints_loop(config):
    rank = rayx.train.get_context().get_world_rank()
    for step in range(config["reports"]):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, f"rank-{rank}"), "w") as f:
                f.write(str(step))
            rayx.train.report({"step": step}, checkpoint=Checkpoint.from_directory(d))


def test_every_ranks_checkpoint_goes_into_the_storage_paths_folder(rayx_mod, tmp_path):
    """With storage_path (a shared mount) every rank's files land in the
    report's one folder, as Ray Train V2 keeps them."""
    from rayx.train import CheckpointConfig
    run = RunConfig(name="every-rank", storage_path=str(tmp_path),
                    checkpoint_config=CheckpointConfig(num_to_keep=1))
    result = TorchTrainer(every_rank_checkpoints_loop, train_loop_config={"reports": 2},
                          scaling_config=ScalingConfig(num_workers=2), run_config=run).fit()
    assert result.checkpoint.id.startswith("path:"), result.checkpoint.id
    with result.checkpoint.as_directory() as d:
        assert sorted(os.listdir(d)) == ["rank-0", "rank-1"]
        assert open(os.path.join(d, "rank-1")).read() == "1"
    folders = [p for p in (tmp_path / "every-rank").iterdir() if p.name.startswith("checkpoint_")]
    assert len(folders) == 1  # num_to_keep


def test_get_device_is_the_ranks_own_gpu(monkeypatch):
    """A GPU rank uses the device it holds: RAYX_LOCAL_RANK (its position among
    the group's devices on the node) over LOCAL_RANK, which counts ranks; a
    process seeing one GPU uses it; without GPUs, cpu. (CUDA is faked here:
    which device is chosen needs no GPU.)"""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5,7")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RAYX_LOCAL_RANK", "3")
    assert get_device() == torch.device("cuda", 3)
    monkeypatch.delenv("RAYX_LOCAL_RANK")
    assert get_device() == torch.device("cuda", 1)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    assert get_device() == torch.device("cuda", 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert get_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    assert get_device() == torch.device("cpu")


def test_torch_backend_selects_the_ranks_own_gpu_before_nccl(monkeypatch):
    """With use_gpu, a rank's current CUDA device is its own GPU before
    torch.distributed starts NCCL (every rank on cuda:0 is NCCL's "Duplicate GPU
    detected"). CUDA and init_process_group are faked: only the order and the
    device are checked."""
    import torch.distributed as dist
    from rayx.train.torch import _TorchBackend
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(dist, "init_process_group",
                        lambda backend, **kw: calls.append(("init", backend, kw["rank"])))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5,7")
    monkeypatch.setenv("RAYX_LOCAL_RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    setup = {"rank": 3, "world_size": 4, "node_ip": "127.0.0.2", "gpu_ids": [5], "local_rank": 1}
    _TorchBackend(True).on_start(setup, 10)
    assert calls == [("set_device", torch.device("cuda", 2)), ("init", "nccl", 3)]


def test_elastic_size_estimate_follows_the_placement_strategy(monkeypatch):
    """An elastic run's size estimate: PACK/SPREAD add up every node's room,
    STRICT_PACK takes one node's (with the running ranks on it), STRICT_SPREAD
    one rank per node (not counting the running ranks' nodes twice)."""
    import rayx
    from rayx.train import _trainer

    def node(address, cpus):
        return {"Alive": True, "NodeManagerAddress": address, "Available": {"CPU": cpus}}

    nodes = [node("10.0.0.1", 2), node("10.0.0.2", 2), node("10.0.0.3", 0),
             {"Alive": False, "NodeManagerAddress": "10.0.0.9", "Available": {"CPU": 8}}]
    monkeypatch.setattr(rayx, "nodes", lambda: nodes)
    per = {"CPU": 1}
    assert _trainer._ranks_that_fit(per, "PACK") == 4
    assert _trainer._ranks_that_fit(per, "SPREAD") == 4
    assert _trainer._ranks_that_fit(per, "STRICT_PACK") == 2
    assert _trainer._ranks_that_fit(per, "STRICT_SPREAD") == 2
    # Two ranks run on 10.0.0.3 (full): they count as free there.
    assert _trainer._ranks_that_fit(per, "PACK", 2, {"10.0.0.3"}) == 6
    assert _trainer._ranks_that_fit(per, "STRICT_PACK", 2, {"10.0.0.3"}) == 2
    assert _trainer._ranks_that_fit(per, "STRICT_PACK", 2, {"10.0.0.1"}) == 4
    assert _trainer._ranks_that_fit(per, "STRICT_SPREAD", 2, {"10.0.0.1", "10.0.0.3"}) == 3
