"""Waits say what they wait for: a Train run whose ranks cannot be placed yet
prints, while it waits, which resources it needs and what the nodes have
free, and goes on once they are released."""

import subprocess
import sys
import threading

from conftest import driver_env, wait_until

TRAIN = r"""
import rayx, rayx.train
from rayx.train import ScalingConfig
from rayx.train.torch import TorchTrainer

def loop(config):
    rayx.train.report({"loss": 1.0})

rayx.init()
result = TorchTrainer(loop, scaling_config=ScalingConfig(
    num_workers=1, resources_per_worker={"CPU": 0, "special": 1})).fit()
print("FIT DONE", result.metrics["loss"], flush=True)
"""


def test_a_train_run_says_what_it_waits_for_then_runs(cluster, rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_cpus=0, resources={"special": 1})
    class Holder:
        def ready(self):
            return True

    holder = Holder.remote()
    assert rayx.get(holder.ready.remote(), timeout=60)
    driver = subprocess.Popen([sys.executable, "-u", "-c", TRAIN], env=driver_env(cluster),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines = []
    reader = threading.Thread(target=lambda: err_lines.extend(driver.stderr), daemon=True)
    reader.start()
    try:
        line = wait_until(
            lambda: next((l for l in err_lines if "waits for 1 actors of" in l), None), 60,
            "the trainer to say what it waits for")
        assert "bundle 0 {special: 1}" in line, line
        assert "node 127.0.0.3 (" in line and "has none of it free" in line, line
        rayx.kill(holder)
        out, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, "".join(err_lines)[-3000:]
    assert "FIT DONE 1.0" in out
