"""An elastic Python Train run on a cluster of its own: it starts with the one
rank that fits, `rayx status` shows its missing rank as a demand, and when a
node joins it restarts with two ranks from its latest checkpoint (a restart,
not a failure) and trains to the end."""

import os
import subprocess
import sys

from conftest import cluster_processes, read_session, run_cli, token_env, wait_until

DRIVER = r'''
import os, sys, tempfile, time
import rayx, rayx.train

started = sys.argv[1]

def loop():
    ctx = rayx.train.get_context()
    start = 0
    ckpt = rayx.train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = int(open(os.path.join(d, "epoch")).read()) + 1
    for epoch in range(start, 40):
        with tempfile.TemporaryDirectory() as d:
            checkpoint = None
            if ctx.get_world_rank() == 0:
                with open(os.path.join(d, "epoch"), "w") as f:
                    f.write(str(epoch))
                checkpoint = rayx.train.Checkpoint.from_directory(d)
                open(started, "a").close()
            rayx.train.report({"epoch": epoch, "world": ctx.get_world_size()},
                              checkpoint=checkpoint)
        time.sleep(0.1)

rayx.init()
result = rayx.train.DataParallelTrainer(
    loop, scaling_config=rayx.train.ScalingConfig(min_workers=1, max_workers=2),
    failure_config=rayx.train.FailureConfig(max_failures=0)).fit()
history = result.metrics_history
print("WORLDS", sorted({m["world"] for m in history}))
print("FIRST_AT_2", min(m["epoch"] for m in history if m["world"] == 2))
print("LAST", result.metrics["epoch"], "RESTARTS", result.num_restarts)
'''


def test_an_elastic_run_grows_when_a_node_joins(tmp_path):
    temp_dir = str(tmp_path / "cluster")
    os.makedirs(temp_dir)
    run_cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
            "--num-gpus", "0", temp_dir=temp_dir)
    session = read_session(temp_dir)
    try:
        env = dict(os.environ, RAYX_TEMP_DIR=temp_dir, RAYX_ADDRESS=session["address"],
                   RAYX_TOKEN=session["token"])
        started = tmp_path / "started"
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(started)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: started.exists() or driver.poll() is not None, 60,
                   "the run's first rank in its loop")
        assert driver.poll() is None, driver.communicate()
        # Its missing rank is the cluster's pending demand.
        # (This cluster's address: the suite's own cluster is in RAYX_ADDRESS.)
        wait_until(lambda: "placement group PACK [{CPU: 1} x 1]: 1 pending" in
                   run_cli("status", "--address", session["address"], temp_dir=temp_dir,
                           env=token_env(session["token"])).stdout, 10,
                   "`rayx status` to show the run's missing worker under Demands")
        # A node joins: the run has room for its second rank.
        run_cli("start", "--address", session["address"],
                "--node-ip-address", "127.0.0.4", "--num-cpus", "1", "--num-gpus", "0",
                temp_dir=temp_dir, env=token_env(session["token"]))
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 0, out + err
        assert "WORLDS [1, 2]" in out, out + err
        first_at_2 = int(out.split("FIRST_AT_2 ")[1].split()[0])
        assert first_at_2 > 0, "the larger attempt started over instead of resuming: " + out
        assert "LAST 39 RESTARTS 1" in out, out + err
    finally:
        run_cli("stop", "--grace-period", "5", temp_dir=temp_dir)
        wait_until(lambda: not cluster_processes(session["address"]), 10,
                   "every process of the elastic run's cluster to exit")
