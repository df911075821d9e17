"""rayx's GPU paths on a machine with NVIDIA GPUs; every test skips, saying why,
without one. On a one-node cluster whose GPUs are the machine's own (detected
through NVML, no --num-gpus): the detected count against CUDA's and
nvidia-smi's, CUDA_VISIBLE_DEVICES checked against the machine, GPU actors each
on a device of its own, NCCL collectives on CUDA tensors, TorchTrainer with
use_gpu (DDP over torch's NCCL), and the C++ trainer with --use-gpu (rayx's
NCCL group). Each test's driver is a separate process, so these tests never
touch the session cluster of conftest.py. scripts/gpu-check.sh runs them."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import RAYX_BIN_DIR, cluster_processes, pid_alive, read_session, recorded_pids, \
    run_cli, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def _gpus():
    """(number of GPUs, why none) from nvidia-smi."""
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 0, f"nvidia-smi did not run ({e})"
    count = sum(line.startswith("GPU ") for line in r.stdout.splitlines())
    return count, f"nvidia-smi -L listed no GPU (exit {r.returncode}: {r.stderr.strip()[:200]})"


GPUS, WHY_NONE = _gpus()
pytestmark = pytest.mark.skipif(GPUS == 0, reason=f"no GPU: {WHY_NONE}")


def _env(**extra):
    """This environment without a cluster or device choice, with this folder on
    PYTHONPATH (the drivers import test_gpu), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", "RAYX_ADDRESS", "RAYX_TOKEN", "RAYX_TEMP_DIR")}
    env["PYTHONPATH"] = os.pathsep.join(
        [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra)
    return env


class GpuCluster:
    def __init__(self, temp_dir, env):
        session = read_session(temp_dir)
        self.temp_dir, self.address = temp_dir, session["address"]
        self.env = dict(env, RAYX_ADDRESS=session["address"], RAYX_TOKEN=session["token"],
                        RAYX_TEMP_DIR=temp_dir)

    def drive(self, call, *args, timeout=150):
        """Runs test_gpu.<call>(*args) in a separate driver of this cluster and
        returns its JSON result."""
        code = ("import json, sys, test_gpu; "
                f"print('RESULT ' + json.dumps(test_gpu.{call}(*json.loads(sys.argv[1]))))")
        r = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True,
                           text=True, timeout=timeout, env=self.env, cwd=HERE)
        lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
        assert r.returncode == 0 and lines, f"{call} failed ({r.returncode}):\n{r.stdout}{r.stderr}"
        return json.loads(lines[-1][len("RESULT "):])


def _start(temp_dir, env):
    run_cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1",
            "--num-cpus", str(max(4, 2 * GPUS + 2)), temp_dir=temp_dir, env=env)
    return GpuCluster(temp_dir, env)


def _stop(cluster):
    pids = recorded_pids(cluster.temp_dir)
    run_cli("stop", "--grace-period", "5", temp_dir=cluster.temp_dir, env=cluster.env)
    wait_until(lambda: not any(pid_alive(p) for p in pids), 10, "the cluster's daemons to exit")
    wait_until(lambda: not cluster_processes(cluster.address), 10,
               "every process of the cluster (workers too) to exit")


@pytest.fixture(scope="module")
def gpu_cluster():
    cluster = _start(tempfile.mkdtemp(prefix="rayx-gpu-"), _env())
    yield cluster
    _stop(cluster)


# --- what the drivers run -------------------------------------------------

def detected():
    import rayx
    import torch
    rayx.init()
    gpus = rayx.cluster_resources().get("GPU", 0)
    rayx.shutdown()
    return {"rayx": gpus, "torch": torch.cuda.device_count()}


def own_devices(n):
    import rayx

    @rayx.remote(num_gpus=1)
    class Holder:
        def where(self):
            import torch
            props = torch.cuda.get_device_properties(0)
            x = torch.arange(1000, device="cuda").sum().item()
            return {"ids": rayx.get_gpu_ids(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                    "count": torch.cuda.device_count(), "uuid": str(getattr(props, "uuid", "")),
                    "name": props.name, "sum": x}

    rayx.init()
    holders = [Holder.remote() for _ in range(n)]
    out = rayx.get([h.where.remote() for h in holders], timeout=100)
    rayx.shutdown()
    return out


def nccl_collectives(n):
    import rayx
    import rayx.util.collective as col

    @rayx.remote(num_gpus=1)
    class Member:
        def run(self, rank, world):
            import torch
            col.init_collective_group(world, rank, backend="nccl", group_name="gpu")
            out = {}
            t = torch.full((1 << 20,), float(rank + 1), device="cuda")
            col.allreduce(t, group_name="gpu")
            out["allreduce"] = [t.min().item(), t.max().item()]
            b = torch.full((7,), float(rank + 10), dtype=torch.float64, device="cuda")
            col.broadcast(b, 0, group_name="gpu")
            out["broadcast"] = b.tolist()
            h = torch.full((5,), rank + 1, dtype=torch.float16, device="cuda")
            col.allreduce(h, group_name="gpu", op=col.ReduceOp.MAX)
            out["max_half"] = h.float().tolist()
            bf = torch.full((3,), 0.5 * (rank + 1), dtype=torch.bfloat16, device="cuda")
            col.allreduce(bf, group_name="gpu")
            out["sum_bfloat16"] = bf.float().tolist()
            col.barrier(group_name="gpu")
            col.destroy_collective_group("gpu")
            return out

    rayx.init()
    members = [Member.remote() for _ in range(n)]
    out = rayx.get([m.run.remote(r, n) for r, m in enumerate(members)], timeout=120)
    rayx.shutdown()
    return out


def gpu_loop(config):
    import torch
    import torch.distributed as dist

    import rayx.train
    from rayx.train.torch import get_device, prepare_model
    ctx = rayx.train.get_context()
    torch.manual_seed(0)
    model = prepare_model(torch.nn.Linear(4, 1))
    device = get_device()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + ctx.get_world_rank())
    x = torch.randn(64, 4, generator=gen).to(device)
    y = x @ torch.tensor([[3.0], [-2.0], [1.0], [0.5]], device=device) + 1.0
    for epoch in range(config["epochs"]):
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        checksum = sum(p.detach().double().sum() for p in model.parameters()).reshape(1)
        everyone = [torch.zeros_like(checksum) for _ in range(ctx.get_world_size())]
        dist.all_gather(everyone, checksum)
        rayx.train.report({"epoch": epoch, "loss": float(loss), "backend": dist.get_backend(),
                           "device": str(next(model.parameters()).device),
                           "checksums": [float(c) for c in everyone]})


def torch_trainer(n):
    import rayx
    from rayx.train import RunConfig, ScalingConfig
    from rayx.train.torch import TorchTrainer
    rayx.init()
    result = TorchTrainer(gpu_loop, train_loop_config={"epochs": 4},
                          scaling_config=ScalingConfig(num_workers=n, use_gpu=True),
                          run_config=RunConfig(name="gpu-ddp")).fit()
    rayx.shutdown()
    return {"error": result.error and str(result.error),
            "history": result.metrics_history, "last": result.metrics}


# --- the tests ------------------------------------------------------------

def test_detected_gpus_are_the_machines(gpu_cluster):
    seen = gpu_cluster.drive("detected")
    assert seen == {"rayx": float(GPUS), "torch": GPUS}, seen


def test_each_gpu_actor_gets_a_device_of_its_own(gpu_cluster):
    out = gpu_cluster.drive("own_devices", GPUS)
    assert sorted(o["ids"][0] for o in out) == list(range(GPUS)), out
    assert all(len(o["ids"]) == 1 and o["visible"] == str(o["ids"][0]) for o in out), out
    assert all(o["count"] == 1 and o["sum"] == 499500 for o in out), out
    assert len({o["uuid"] for o in out}) == GPUS, out


def test_nccl_collectives_on_cuda_tensors(gpu_cluster):
    out = gpu_cluster.drive("nccl_collectives", GPUS)
    total = GPUS * (GPUS + 1) / 2
    for o in out:
        assert o["allreduce"] == [total, total], o
        assert o["broadcast"] == [10.0] * 7, o
        assert o["max_half"] == [float(GPUS)] * 5, o
        assert o["sum_bfloat16"] == [0.5 * total] * 3, o


def test_torch_trainer_trains_with_ddp_over_nccl(gpu_cluster):
    out = gpu_cluster.drive("torch_trainer", GPUS)
    assert out["error"] is None, out["error"]
    history, last = out["history"], out["last"]
    assert [m["epoch"] for m in history] == [0, 1, 2, 3]
    assert history[-1]["loss"] < history[0]["loss"] * 0.5, [m["loss"] for m in history]
    assert last["backend"] == "nccl" and last["device"].startswith("cuda"), last
    assert len(last["checksums"]) == GPUS and len(set(last["checksums"])) == 1, last


def test_cpp_trainer_with_use_gpu_matches_one_process(gpu_cluster):
    binary = os.path.join(RAYX_BIN_DIR, "rayx-train-linear")
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not built")
    r = subprocess.run([binary, "--workers", str(GPUS), "--epochs", "5", "--use-gpu"],
                       capture_output=True, text=True, timeout=150, env=gpu_cluster.env)
    # It exits 0 only when its weights equal one process's within 1e-9.
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"trained on {GPUS} ranks, 0 restart(s)" in r.stdout, r.stdout


def test_cuda_visible_devices_is_checked_against_the_machine():
    temp_dir = tempfile.mkdtemp(prefix="rayx-gpu-cvd-")
    r = run_cli("start", "--head", "--port", "0", temp_dir=temp_dir,
                env=_env(CUDA_VISIBLE_DEVICES=str(GPUS)), check=False)
    if r.returncode == 0:  # wrongly accepted: stop what it started, then fail
        run_cli("stop", temp_dir=temp_dir, check=False)
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"lists device {GPUS}" in r.stderr and "NVML reports" in r.stderr, r.stderr
    assert not any(pid_alive(p) for p in recorded_pids(temp_dir))
    # The last device alone: the node offers one GPU, and an actor on it holds
    # that device of the machine (rayx's GPU 0 of the node is device GPUS-1;
    # get_gpu_ids and CUDA_VISIBLE_DEVICES name the machine's device).
    last = str(GPUS - 1)
    cluster = _start(tempfile.mkdtemp(prefix="rayx-gpu-last-"), _env(CUDA_VISIBLE_DEVICES=last))
    try:
        out = cluster.drive("own_devices", 1)
        assert out[0]["ids"] == [GPUS - 1] and out[0]["visible"] == last, out
    finally:
        _stop(cluster)
