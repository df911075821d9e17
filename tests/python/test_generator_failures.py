"""Generators and lending when daemons die, on a cluster of its own (the
suite's cluster must not lose its nodes): the node agent hosting a streaming
task is SIGKILLed mid-stream, then the head is SIGKILLed while a blocked task
lends its CPU and a generator streams. What the driver sees, and that nothing
the cluster started is left running."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading

from conftest import cluster_processes, pid_alive, read_session, run_cli, token_env, wait_until

DRIVER = r'''
import os, sys, time
import rayx

gate = sys.argv[1]

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)

@rayx.remote(resources={"far": 0.01})  # on the node whose agent dies
def far_stream():
    yield os.getpid()
    wait_for(gate + ".never")
    yield "never"

gen = far_stream.remote()
print("WORKER", rayx.get(next(gen), timeout=60), flush=True)
last = next(gen)  # the agent is killed meanwhile: its worker goes with it
try:
    rayx.get(last, timeout=60)
    print("NO ERROR", flush=True)
except rayx.exceptions.WorkerCrashedError as e:
    print("CRASHED", type(e).__name__, flush=True)
try:
    next(gen)
    print("MORE ITEMS", flush=True)
except StopIteration:
    print("ENDED", flush=True)

# The head dies while a task lends its CPU (waiting for its child) and a
# generator streams on the head node: the data path is the workers' own.
@rayx.remote
def child(path):
    open(path + ".child", "w").close()  # granted (the parent lent its CPU)
    wait_for(path)
    return 41

@rayx.remote
def parent(path):
    return rayx.get(child.remote(path)) + 1

@rayx.remote
def near_stream(path):
    yield 1
    wait_for(path)
    yield 2

p = parent.remote(gate)
s = near_stream.remote(gate)
print("FIRST", rayx.get(next(s), timeout=60), flush=True)
wait_for(gate + ".child")
print("READY FOR HEAD KILL", flush=True)
wait_for(gate + ".head-killed")
open(gate, "w").close()
print("SECOND", rayx.get(next(s), timeout=60), flush=True)
print("PARENT", rayx.get(p, timeout=60), flush=True)
'''


class _Lines:
    """The driver's output lines, read by a thread: next() waits at most
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


def _agent_pid(temp_dir, address, token, node_ip):
    status = run_cli("status", "-v", "--address", address, temp_dir=temp_dir,
                     env=token_env(token)).stdout
    match = re.search(rf"address: {re.escape(node_ip)}\s.*?agent pid: (\d+)", status)
    assert match, status
    return int(match.group(1))


def _head_pid(temp_dir):
    for entry in os.listdir(temp_dir):
        pids = os.path.join(temp_dir, entry, "pids")
        head = os.path.join(pids, "head.pid")
        if os.path.exists(head):
            return int(open(head).read().split()[0])
    raise AssertionError(f"no head.pid under {temp_dir}")


def test_an_agent_and_then_the_head_die_under_a_stream(tmp_path):
    temp_dir = str(tmp_path / "cluster")
    os.makedirs(temp_dir)
    run_cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1", "--num-cpus", "2",
            "--num-gpus", "0", "--heartbeat-period-ms", "250", "--node-timeout-ms", "1500",
            temp_dir=temp_dir)
    session = read_session(temp_dir)
    address, token = session["address"], session["token"]
    try:
        run_cli("start", "--address", address, "--node-ip-address", "127.0.0.6",
                "--num-cpus", "1", "--num-gpus", "0", "--resources", '{"far": 1}',
                temp_dir=temp_dir, env=token_env(token))
        env = dict(os.environ, RAYX_TEMP_DIR=temp_dir, RAYX_ADDRESS=address, RAYX_TOKEN=token)
        gate = str(tmp_path / "gate")
        driver = subprocess.Popen([sys.executable, "-u", "-c", DRIVER, gate], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = _Lines(driver)
        first = lines.next()
        assert first.startswith("WORKER "), first
        worker = int(first.split()[1])
        agent = _agent_pid(temp_dir, address, token, "127.0.0.6")
        os.kill(agent, signal.SIGKILL)
        wait_until(lambda: not pid_alive(worker), 15, "the dead agent's worker to exit")
        assert lines.next() == "CRASHED WorkerCrashedError"
        assert lines.next() == "ENDED"
        assert lines.next() == "FIRST 1"
        assert lines.next() == "READY FOR HEAD KILL"
        head = _head_pid(temp_dir)
        os.kill(head, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head), 10, "the head to exit")
        open(gate + ".head-killed", "w").close()
        assert lines.next() == "SECOND 2"
        assert lines.next() == "PARENT 42", "the blocked parent finished without the head"
        assert driver.wait(timeout=60) == 0
    finally:
        # The head is gone: `rayx stop` stops what this machine recorded
        # (agents and their workers).
        run_cli("stop", "--grace-period", "5", temp_dir=temp_dir, check=False)
        wait_until(lambda: not cluster_processes(address), 15,
                   "every process of the cluster (workers too) to exit")
