"""Generators and lending when daemons die, on a cluster of its own (the
suite's cluster must not lose its nodes): the node agent hosting a streaming
task is SIGKILLed mid-stream, then the head is SIGKILLed while a blocked task
lends its CPU and a generator streams. What the driver sees, and that nothing
the cluster started is left running."""

import os
import signal

from conftest import own_cluster, pid_alive, wait_until

DRIVER = r'''
import os, sys, time
import rayx

gate = sys.argv[1]

def wait_for(path, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(path + " was not created in time")
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


def test_an_agent_and_then_the_head_die_under_a_stream(tmp_path):
    with own_cluster(tmp_path, head_cpus=2, far_ip="127.0.0.6") as cluster:
        driver, lines = cluster.driver(DRIVER, str(tmp_path / "gate"))
        gate = str(tmp_path / "gate")
        first = lines.next()
        assert first.startswith("WORKER "), first
        worker = int(first.split()[1])
        agent = cluster.agent_pid("127.0.0.6")
        os.kill(agent, signal.SIGKILL)
        wait_until(lambda: not pid_alive(worker), 15, "the dead agent's worker to exit")
        assert lines.next() == "CRASHED WorkerCrashedError"
        assert lines.next() == "ENDED"
        assert lines.next() == "FIRST 1"
        assert lines.next() == "READY FOR HEAD KILL"
        head = cluster.head_pid()
        os.kill(head, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head), 10, "the head to exit")
        open(gate + ".head-killed", "w").close()
        assert lines.next() == "SECOND 2"
        assert lines.next() == "PARENT 42", "the blocked parent finished without the head"
        assert driver.wait(timeout=60) == 0
