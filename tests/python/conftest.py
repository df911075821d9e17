"""A real rayx cluster on loopback for the Python tests: a head and two more
node agents (127.0.0.2 with two fake GPUs, 127.0.0.3 with a custom resource),
started and stopped with the rayx CLI in a private temp dir. Teardown checks
that no process the cluster started (daemons and workers) is left."""

import os
import subprocess
import sys
import tempfile
import time

import pytest

RAYX_BIN_DIR = os.environ.get("RAYX_BIN_DIR", "")
CLI = os.path.join(RAYX_BIN_DIR, "rayx") if RAYX_BIN_DIR else "rayx"


def wait_until(predicate, timeout, what):
    """Polls `predicate` until it returns a true value or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def run_cli(*args, temp_dir, check=True, env=None):
    if args and args[0] == "start":
        # The daemons (and their workers) follow this pytest process: killed,
        # it leaves no cluster behind (each test still stops its own).
        env = {**(env if env is not None else os.environ), "RAYX_EXIT_WITH_PID": str(os.getpid())}
    r = subprocess.run([CLI, *args, "--temp-dir", temp_dir], capture_output=True, text=True,
                       timeout=120, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"rayx {' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def token_env(token):
    """The environment with `token` as RAYX_TOKEN: the token never goes on a
    command line."""
    return {**os.environ, "RAYX_TOKEN": token}


def read_session(temp_dir):
    for entry in sorted(os.listdir(temp_dir)):
        conf = os.path.join(temp_dir, entry, "session.conf")
        if os.path.exists(conf):
            values = dict(line.strip().split("=", 1) for line in open(conf) if "=" in line)
            if values.get("role") == "head":
                return values
    raise AssertionError(f"no head session in {temp_dir}")


def recorded_pids(temp_dir):
    pids = []
    for root, _, files in os.walk(temp_dir):
        for f in files:
            if f.endswith(".pid"):
                pids.append(int(open(os.path.join(root, f)).read().split()[0]))
    return pids


def cluster_processes(address):
    """Live processes (workers included) whose environment names this cluster."""
    found = []
    needle = f"RAYX_ADDRESS={address}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != "Z":
            found.append(int(pid))
    return found


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Cluster:
    def __init__(self, temp_dir, address, token):
        self.temp_dir = temp_dir
        self.address = address
        self.token = token


@pytest.fixture(scope="session")
def cluster():
    temp_dir = tempfile.mkdtemp(prefix="rayx-pytest-")
    run_cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
            "--num-gpus", "0", "--heartbeat-period-ms", "250", "--node-timeout-ms", "1500",
            temp_dir=temp_dir)
    session = read_session(temp_dir)
    address, token = session["address"], session["token"]
    run_cli("start", "--address", address, "--node-ip-address", "127.0.0.2",
            "--num-cpus", "2", "--num-gpus", "2", temp_dir=temp_dir, env=token_env(token))
    run_cli("start", "--address", address, "--node-ip-address", "127.0.0.3",
            "--num-cpus", "2", "--num-gpus", "0", "--resources", '{"special": 1}',
            temp_dir=temp_dir, env=token_env(token))
    os.environ["RAYX_TEMP_DIR"] = temp_dir
    os.environ["RAYX_ADDRESS"] = address
    os.environ["RAYX_TOKEN"] = token
    import rayx
    rayx.init()
    wait_until(lambda: sum(n["Alive"] for n in rayx.nodes()) == 3, 10, "3 alive nodes")
    yield Cluster(temp_dir, address, token)
    rayx.shutdown()
    pids = recorded_pids(temp_dir)
    run_cli("stop", "--grace-period", "5", temp_dir=temp_dir)
    wait_until(lambda: not any(pid_alive(p) for p in pids), 10, "the cluster's daemons to exit")
    wait_until(lambda: not cluster_processes(address), 10,
               "every process of the cluster (workers too) to exit")
    for var in ("RAYX_TEMP_DIR", "RAYX_ADDRESS", "RAYX_TOKEN"):
        os.environ.pop(var, None)


@pytest.fixture
def rayx_mod(cluster):
    import rayx
    return rayx


def driver_env(cluster):
    env = dict(os.environ)
    env["RAYX_TEMP_DIR"] = cluster.temp_dir
    env["RAYX_ADDRESS"] = cluster.address
    env["RAYX_TOKEN"] = cluster.token
    return env


def run_driver(cluster, code, timeout=60):
    """Runs `code` as a separate Python driver of the cluster."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=driver_env(cluster))
