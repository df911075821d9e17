"""A real rayx cluster on loopback for the Python tests: a head and two more
node agents (127.0.0.2 with two fake GPUs, 127.0.0.3 with a custom resource),
started and stopped with the rayx CLI in a private temp dir. Teardown checks
that no process the cluster started (daemons and workers) is left."""

import contextlib
import os
import shutil
import queue
import re
import subprocess
import sys
import tempfile
import threading
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
def cluster(request):
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
    # The cluster's directory (its logs) is kept only when a test failed.
    if request.session.testsfailed:
        print(f"\nconftest: a test failed: kept {temp_dir} with the cluster's logs")
    else:
        shutil.rmtree(temp_dir, ignore_errors=True)


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


class OwnCluster:
    def __init__(self, temp_dir, address, token):
        self.temp_dir = temp_dir
        self.address = address
        self.token = token
        self.env = dict(os.environ, RAYX_TEMP_DIR=temp_dir, RAYX_ADDRESS=address, RAYX_TOKEN=token)

    def agent_pid(self, node_ip):
        status = run_cli("status", "-v", "--address", self.address, temp_dir=self.temp_dir,
                         env=token_env(self.token)).stdout
        match = re.search(rf"address: {re.escape(node_ip)}\s.*?agent pid: (\d+)", status)
        assert match, status
        return int(match.group(1))

    def head_pid(self):
        for entry in os.listdir(self.temp_dir):
            head = os.path.join(self.temp_dir, entry, "pids", "head.pid")
            if os.path.exists(head):
                return int(open(head).read().split()[0])
        raise AssertionError(f"no head.pid under {self.temp_dir}")

    def driver(self, code, *args):
        """Runs `code` as a driver of this cluster; returns (process, DriverLines)."""
        process = subprocess.Popen([sys.executable, "-u", "-c", code, *args], env=self.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return process, DriverLines(process)


@contextlib.contextmanager
def own_cluster(tmp_path, head_cpus, far_ip, node_args=()):
    """A cluster of the test's own, for tests that kill its daemons (the
    suite's must not lose its nodes) or need other node flags (`node_args`,
    given to both nodes): a head at 127.0.0.1 with `head_cpus` CPUs and a node
    at `far_ip` with 1 CPU and the resource "far". Stopped at the end,
    checking that nothing it started is left running."""
    temp_dir = str(tmp_path / "cluster")
    os.makedirs(temp_dir)
    run_cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1", "--num-cpus",
            str(head_cpus), "--num-gpus", "0", "--heartbeat-period-ms", "250",
            "--node-timeout-ms", "1500", *node_args, temp_dir=temp_dir)
    session = read_session(temp_dir)
    address, token = session["address"], session["token"]
    try:
        run_cli("start", "--address", address, "--node-ip-address", far_ip, "--num-cpus", "1",
                "--num-gpus", "0", "--resources", '{"far": 1}', *node_args, temp_dir=temp_dir,
                env=token_env(token))
        yield OwnCluster(temp_dir, address, token)
    finally:
        # The head may be gone: `rayx stop` stops what this machine recorded
        # (agents and their workers).
        run_cli("stop", "--grace-period", "5", temp_dir=temp_dir, check=False)
        wait_until(lambda: not cluster_processes(address), 15,
                   "every process of the cluster (workers too) to exit")


class DriverLines:
    """A driver's output lines, read by a thread: next() waits at most
    `timeout` s for one (a blocked driver fails the test, never hangs it)."""

    def __init__(self, driver):
        self.driver = driver
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.driver.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, timeout=60):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.driver.kill()
            raise AssertionError(f"the driver printed nothing for {timeout} s:\n"
                                 f"{self.driver.stderr.read()}") from None
        if line is None:
            raise AssertionError(f"the driver ended early:\n{self.driver.stderr.read()}")
        return line.strip()
