"""The node agent's memory monitor on a cluster of its own, its threshold just
above this machine's memory use now: a task that keeps allocating fails with
OutOfMemoryError (its worker gives up the call and lives on), one that cannot
give it up is killed and its caller gets OutOfMemoryError too, and a threaded
actor, whose call cannot be interrupted, is killed after the grace (its
callers get ActorDiedError). Each allocation is bounded, so a monitor that
does nothing fails the test instead of exhausting the machine."""

import os
import subprocess
import sys

from conftest import cluster_processes, read_session, run_cli, wait_until

DRIVER = r'''
import os, sys, time
import rayx

LIMIT = int(sys.argv[1])  # bytes: far beyond the threshold, but bounded
THRESHOLD = float(sys.argv[2])

def settle():
    # Each step starts below the threshold: the last victim's memory is back
    # (a killed worker's takes a moment to be torn down; memory a live worker
    # gave back can show as available slowly, ~16 MB/s on some VMs: a small
    # margin, ~0.3% of memory, not a wait for all of it).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                info[name] = int(rest.split()[0])
        if 1 - info["MemAvailable"] / info["MemTotal"] < THRESHOLD - 0.003:
            return
        time.sleep(0.05)
    print("MEMORY NEVER CAME BACK", flush=True)

def hog():
    chunks = []
    while sum(len(c) for c in chunks) < LIMIT:
        chunks.append(bytearray(64 << 20))  # touched: really in memory
    return "never stopped"

def hog_and_hold():
    chunks = []
    while sum(len(c) for c in chunks) < LIMIT:
        chunks.append(bytearray(64 << 20))
    time.sleep(60)  # holding it: the monitor kills us long before
    return "never killed"

@rayx.remote(max_retries=0)
def task_hog():
    return hog()

@rayx.remote(max_retries=0)
def deaf_hog():
    # As a long C call would be: the monitor's request to give up the call
    # (SIGUSR1) never reaches Python, so the worker is killed after the grace;
    # the caller is told why all the same.
    import signal
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    return hog_and_hold()

@rayx.remote
def pid():
    return os.getpid()

@rayx.remote(max_concurrency=2)  # its calls run on threads: SIGUSR1 cannot reach them
class Hog:
    def pid(self):
        return os.getpid()
    def hog(self):
        return hog_and_hold()

settle()
try:
    print("TASK", rayx.get(task_hog.remote(), timeout=120), flush=True)
except rayx.exceptions.OutOfMemoryError as e:
    print("TASK OOM", "memory monitor" in str(e), flush=True)

settle()
try:
    print("DEAF", rayx.get(deaf_hog.remote(), timeout=120), flush=True)
except rayx.exceptions.OutOfMemoryError as e:
    print("DEAF OOM", "memory monitor killed it" in str(e), flush=True)

settle()
h = Hog.remote()
print("ACTOR PID", rayx.get(h.pid.remote(), timeout=60), flush=True)
try:
    print("ACTOR", rayx.get(h.hog.remote(), timeout=120), flush=True)
except rayx.exceptions.RayActorError as e:
    print("ACTOR DIED", type(e).__name__, flush=True)
settle()
# The node works on: a new task runs.
print("AFTER", rayx.get(pid.remote(), timeout=60) > 0, flush=True)
'''


def _used_fraction():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            info[name] = int(rest.split()[0]) * 1024
    return 1 - info["MemAvailable"] / info["MemTotal"], info["MemTotal"]


def test_the_memory_monitor_stops_a_task_and_kills_what_it_cannot_stop(tmp_path):
    used, total = _used_fraction()
    headroom = 1 << 30  # 1 GiB above what is used now
    threshold = used + headroom / total
    assert threshold < 0.8, f"this machine is too full for the test ({used:.0%} used)"
    temp_dir = str(tmp_path / "cluster")
    os.makedirs(temp_dir)
    run_cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
            "--num-gpus", "0", "--memory-usage-threshold", f"{threshold:.4f}",
            "--memory-monitor-period-ms", "100", temp_dir=temp_dir)
    session = read_session(temp_dir)
    try:
        env = dict(os.environ, RAYX_TEMP_DIR=temp_dir, RAYX_ADDRESS=session["address"],
                   RAYX_TOKEN=session["token"])
        limit = 4 * headroom
        out = subprocess.run([sys.executable, "-c", DRIVER, str(limit), str(threshold)], env=env,
                             capture_output=True, text=True, timeout=300)
        lines = out.stdout.splitlines()
        assert "TASK OOM True" in lines, out.stdout + out.stderr
        assert "DEAF OOM True" in lines, out.stdout + out.stderr
        pids = [l for l in lines if l.startswith("ACTOR PID")]
        assert pids, out.stdout + out.stderr
        actor_pid = int(pids[0].split()[2])
        assert "ACTOR DIED ActorDiedError" in lines, out.stdout + out.stderr
        assert not os.path.exists(f"/proc/{actor_pid}"), "the actor's worker was killed"
        assert "AFTER True" in lines, out.stdout + out.stderr
        logs = "".join(open(os.path.join(root, f)).read()
                       for root, _, files in os.walk(temp_dir) for f in files
                       if f == "agent.log")
        assert "asking task worker" in logs and "asking actor worker" in logs, logs[-3000:]
        assert "killing it" in logs, logs[-3000:]
    finally:
        run_cli("stop", "--grace-period", "5", temp_dir=temp_dir)
        wait_until(lambda: not cluster_processes(session["address"]), 10,
                   "every process of the memory monitor's cluster to exit")
