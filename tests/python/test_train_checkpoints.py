"""Checkpoints kept by the nodes, from Python (CheckpointConfig(num_replicas=2)):
two TorchTrainer ranks on two nodes each report their own torch state dict as
their shard; the agent of one node is SIGKILLed; the run restarts on the node
left, and each rank gets its own shard back, equal to what it saved (the dead
node's rank from the copy on the other node), while the whole checkpoint holds
both ranks' files. A second driver (another job) fitting a run of the same name
resumes from the checkpoints the nodes keep of it, and num_to_keep drops the
first job's as new ones come."""

import os
import signal
import subprocess
import sys

import pytest

from conftest import own_cluster, run_cli, wait_until

pytest.importorskip("torch")

DRIVER = r'''
import os, sys, tempfile, time
import torch
import rayx, rayx.train
from rayx.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from rayx.train.torch import TorchTrainer

pause = sys.argv[1]
fits = [int(s) for s in sys.argv[2].split(",")]  # each fit's steps, one after another


def make_state(rank, step):
    g = torch.Generator().manual_seed(rank * 100 + step)
    return {"step": step, "w": torch.randn(512, 512, generator=g), "b": torch.randn(512, generator=g)}


def loop(config):
    rank = rayx.train.get_context().get_world_rank()
    start = 0
    ckpt = rayx.train.get_checkpoint()
    if ckpt is not None:
        mine = sorted(os.listdir(ckpt.path))
        state = torch.load(os.path.join(ckpt.path, f"model-rank{rank}.pt"))
        want = make_state(rank, state["step"])
        exact = all(torch.equal(state[k], want[k]) for k in ("w", "b"))
        whole = sorted(os.listdir(ckpt.whole_directory()))
        with open(f"{pause}.restored-{config['steps']}-{rank}", "w") as f:
            f.write(f"{state['step']} {'exact' if exact else 'WRONG'} {mine} {whole}")
        start = state["step"] + 1
    for step in range(start, config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            torch.save(make_state(rank, step), os.path.join(d, f"model-rank{rank}.pt"))
            rayx.train.report({"step": step}, checkpoint=Checkpoint.from_directory(d))
        if start == 0 and step == 1 and config["steps"] == 4:
            if rank == 0:
                open(pause, "w").close()
            deadline = time.monotonic() + 60  # the test kills a node meanwhile
            while not os.path.exists(pause + ".go") and time.monotonic() < deadline:
                time.sleep(0.05)


for steps in fits:
    trainer = TorchTrainer(
        loop, train_loop_config={"steps": steps},
        scaling_config=ScalingConfig(num_workers=2, placement_strategy="SPREAD"),
        run_config=RunConfig(name="torch-shards",
                             checkpoint_config=CheckpointConfig(num_to_keep=2, num_replicas=2)),
        failure_config=FailureConfig(max_failures=3))
    result = trainer.fit()
    print("RESTARTS", result.num_restarts, flush=True)
    print("LAST", result.metrics["step"], result.checkpoint.id.startswith("nodes:"),
          sorted(os.listdir(result.checkpoint.path)), flush=True)
    print("KEPT", *[c.id for c, _ in result.best_checkpoints], flush=True)
    print("FETCHED", result.checkpoint.path, flush=True)
'''


def test_each_rank_restores_its_own_torch_shard_after_a_node_dies(tmp_path):
    pause = str(tmp_path / "paused")
    with own_cluster(tmp_path, head_cpus=2, far_ip="127.0.0.9") as cluster:
        far_agent = cluster.agent_pid("127.0.0.9")
        driver = subprocess.Popen([sys.executable, "-u", "-c", DRIVER, pause, "4"],
                                  env=cluster.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: os.path.exists(pause) or driver.poll() is not None, 120,
                       "step 1's checkpoint")
            assert driver.poll() is None, driver.communicate()
            os.kill(far_agent, signal.SIGKILL)
            open(pause + ".go", "w").close()
            out, err = driver.communicate(timeout=180)
        finally:
            if driver.poll() is None:
                driver.kill()
        assert driver.returncode == 0, out + err
        restarts = next(int(line.split()[1]) for line in out.splitlines()
                        if line.startswith("RESTARTS"))
        assert restarts >= 1, out
        assert "LAST 3 True ['model-rank0.pt', 'model-rank1.pt']" in out, out
        for rank in (0, 1):
            restored = open(f"{pause}.restored-4-{rank}").read()
            assert restored == (f"1 exact ['model-rank{rank}.pt'] "
                                "['model-rank0.pt', 'model-rank1.pt']"), restored
        first_kept = kept_of(out)
        assert len(first_kept) == 2, out
        # The driver's fetched copy of the whole checkpoint went with it.
        fetched = next(line.split()[1] for line in out.splitlines()
                       if line.startswith("FETCHED"))
        assert "/rayx-checkpoints/rayx-fetch-" in fetched, fetched
        assert not os.path.exists(fetched), fetched

        # Another job, the same run name: it resumes from step 3's checkpoint;
        # then a second fit in that job resumes from its step 5, reporting under
        # new ids (never over the checkpoint it restored from).
        again = subprocess.run([sys.executable, "-u", "-c", DRIVER, pause, "6,7"],
                               env=cluster.env, capture_output=True, text=True, timeout=180)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "resuming from the 2 checkpoint(s) the nodes keep of it" in again.stderr, \
            again.stderr
        assert again.stdout.count("RESTARTS 0") == 2, again.stdout
        assert "LAST 5 True ['model-rank0.pt', 'model-rank1.pt']" in again.stdout, again.stdout
        assert "LAST 6 True ['model-rank0.pt', 'model-rank1.pt']" in again.stdout, again.stdout
        for steps, step in ((6, 3), (7, 5)):
            for rank in (0, 1):
                restored = open(f"{pause}.restored-{steps}-{rank}").read()
                assert restored == (f"{step} exact ['model-rank{rank}.pt'] "
                                    "['model-rank0.pt', 'model-rank1.pt']"), restored
        # Steps 4 and 5, then 5 and 6 are kept; the first job's are gone.
        second_kept, third_kept = kept_of(again.stdout), kept_of(again.stdout, 1)
        assert len(second_kept) == 2 and not set(second_kept) & set(first_kept), again.stdout
        assert third_kept[0] == second_kept[1] and third_kept[1] not in second_kept, again.stdout
        listed = run_cli("train", "list", temp_dir=cluster.temp_dir, env=cluster.env).stdout
        assert not [c for c in first_kept + second_kept[:1] if c in listed], listed
        assert all(c in listed for c in third_kept), listed


def kept_of(out, fit=0):
    return [line.split()[1:] for line in out.splitlines() if line.startswith("KEPT")][fit]
