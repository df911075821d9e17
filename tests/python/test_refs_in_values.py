"""ObjectRefs inside values (Ray's nested refs): inside put values, task and
actor results, arguments and out-of-band pickles, across the suite's three
loopback nodes; an object lives while some process or stored value holds a
ref to it, and its file leaves the node's store when the last one lets go."""

import glob
import os
import signal

import numpy as np
import pytest

from conftest import wait_until

BIG = 1 << 18  # float64s: 2 MiB, stored in the node's shared-memory store


def store_files(object_id):
    """The files of object `object_id` in this machine's node stores."""
    return [p for root in ("/dev/shm", "/tmp") for p in
            glob.glob(os.path.join(root, "rayx-store-*", f"*-{object_id}"))]


def test_a_ref_inside_a_put_value_keeps_its_object_until_the_last_holder_lets_go(rayx_mod):
    rayx = rayx_mod
    inner = rayx.put(np.arange(BIG, dtype=np.float64))
    inner_id = inner.hex()
    assert store_files(inner_id), "a large put is stored"
    outer = rayx.put({"data": [inner], "tag": "x"})
    del inner  # the owner's ref goes: the put value still holds the object
    got = rayx.get(outer)
    assert got["tag"] == "x"
    ref = got["data"][0]
    assert ref.hex() == inner_id, "the ref that came back is the same object's"
    assert float(rayx.get(ref)[-1]) == BIG - 1
    del got
    del outer  # the value goes: `ref` (a borrower) still holds the object
    assert float(rayx.get(ref)[10]) == 10.0
    assert store_files(inner_id)
    del ref
    wait_until(lambda: not store_files(inner_id), 10, "the object's file to go with its last ref")


def test_a_small_value_is_copied_into_the_store_for_its_refs_and_freed_with_them(rayx_mod):
    rayx = rayx_mod
    inner = rayx.put("small")
    inner_id = inner.hex()
    assert not store_files(inner_id), "a small put stays in the owner's memory"
    outer = rayx.put([inner, inner])
    assert len(store_files(inner_id)) == 1, "one copy, whatever the number of refs to it"
    assert [rayx.get(r) for r in rayx.get(outer)] == ["small", "small"]
    del outer
    assert rayx.get(inner) == "small"
    wait_until(lambda: not store_files(inner_id), 10, "the copy to go with the put value")


def test_a_task_returns_a_ref_it_put(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def small():
        return rayx.put(1)

    @rayx.remote
    def large():
        return rayx.put(np.ones(BIG))

    @rayx.remote(num_returns=2)
    def two():
        return rayx.put("a"), rayx.put("b")

    assert rayx.get(rayx.get(small.remote())) == 1
    ref = rayx.get(large.remote())
    assert isinstance(ref, rayx.ObjectRef)
    ref_id = ref.hex()
    assert float(rayx.get(ref).sum()) == BIG
    a, b = two.remote()
    assert (rayx.get(rayx.get(a)), rayx.get(rayx.get(b))) == ("a", "b")
    assert store_files(ref_id), "the worker's ref went with its task: the driver's holds it"
    del ref
    wait_until(lambda: not store_files(ref_id), 10, "the object to go with the driver's ref")


def test_refs_cross_nodes_inside_results_arguments_and_put_values(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(resources={"special": 0.01})  # the node at 127.0.0.3
    def make():
        return [rayx.put(np.full(BIG, 7.0))], rayx.get_runtime_context().get_node_id()

    @rayx.remote(num_gpus=1)  # the node at 127.0.0.2
    def total(holder):
        (ref,) = holder
        assert isinstance(ref, rayx.ObjectRef), type(ref)  # nested refs arrive unresolved
        return float(rayx.get(ref).sum()), rayx.get_runtime_context().get_node_id()

    refs, made_on = rayx.get(make.remote())
    value_id = refs[0].hex()
    assert float(rayx.get(refs[0])[0]) == 7.0  # the driver pulls it from 127.0.0.3
    s, summed_on = rayx.get(total.remote(refs))
    assert s == 7.0 * BIG and summed_on != made_on
    holder = rayx.put(refs)  # a borrowed ref inside a put value: copied onto this node
    s, _ = rayx.get(total.remote(rayx.get(holder)))
    assert s == 7.0 * BIG
    del refs, holder
    wait_until(lambda: not store_files(value_id), 15, "every copy to go with the last ref")


def test_an_actor_keeps_a_borrowed_ref_alive_after_everyone_else_let_go(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Keeper:
        def keep(self, holder):
            self.ref = holder["ref"]
            return self.ref.hex()

        def value(self):
            return float(rayx.get(self.ref).sum())

        def drop(self):
            del self.ref

    keeper = Keeper.remote()
    ref = rayx.put(np.ones(BIG))
    ref_id = ref.hex()
    assert rayx.get(keeper.keep.remote(rayx.put({"ref": ref}))) == ref_id
    del ref  # the driver lets go: the actor's borrowed ref holds it
    wait_until(lambda: len(store_files(ref_id)) == 1, 10, "the put value's hold to go")
    assert rayx.get(keeper.value.remote()) == BIG
    rayx.get(keeper.drop.remote())
    wait_until(lambda: not store_files(ref_id), 10, "the object to go with the actor's ref")
    rayx.kill(keeper)


def test_out_of_band_pickles_and_closures_keep_their_refs(rayx_mod):
    rayx = rayx_mod
    from rayx import cloudpickle

    ref = rayx.put("kept")
    blob = cloudpickle.dumps(ref)
    del ref  # Ray's rule: an out-of-band pickle keeps the object for the job
    assert rayx.get(cloudpickle.loads(blob)) == "kept"

    a, b = rayx.put(1), rayx.put(2)

    @rayx.remote
    def captured():
        return rayx.get([a, b])

    assert rayx.get(captured.remote()) == [1, 2]


def test_a_failed_object_inside_a_value_raises_its_error_where_it_is_got(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(max_retries=0)
    def fails():
        raise ValueError("no value")

    holder = rayx.put([fails.remote()])
    (inner,) = rayx.get(holder)
    with pytest.raises(ValueError, match="no value"):
        rayx.get(inner)


def test_actor_handles_inside_a_result_are_not_taken_for_refs(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Child:
        def ping(self):
            return "pong"

    @rayx.remote
    class Parent:
        def make(self):
            self.child = Child.remote()
            return self.child, os.getpid()

    parent = Parent.remote()
    child, pid = rayx.get(parent.make.remote())
    assert rayx.get(child.ping.remote()) == "pong"
    assert pid != os.getpid()
    rayx.kill(parent)


def test_the_owners_worker_dies_and_the_borrowed_object_lives_on(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(max_restarts=0)
    class Owner:
        def make(self):
            self.mine = rayx.put(np.full(BIG, 3.0))
            return [self.mine], os.getpid()

    owner = Owner.remote()
    (ref,), pid = rayx.get(owner.make.remote())
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(rayx.exceptions.RayActorError):
        rayx.get(owner.make.remote(), timeout=30)
    # The node's agent holds it for the driver's ref (Ray's owner would take
    # it along: OwnerDiedError there).
    assert float(rayx.get(ref, timeout=30)[5]) == 3.0
    # The dead owner never let go of its own hold: the file stays until the
    # job ends (documented), and the driver's ref keeps working meanwhile.
    assert store_files(ref.hex())


FAILURE_DRIVER = r'''
import os, sys, time
import numpy as np
import rayx

gate = sys.argv[1]

def wait_for(path, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(path + " was not created in time")
        time.sleep(0.01)

@rayx.remote(resources={"far": 0.01})  # on the node whose agent dies
def make():
    return [rayx.put(np.full(1 << 18, 5.0)), rayx.put(np.full(1 << 18, 6.0))]

first, second = rayx.get(make.remote(), timeout=60)
print("MADE", flush=True)
wait_for(gate + ".head-killed")
# The data path is the nodes' own: refs inside values work without the head.
print("FIRST", float(rayx.get(first, timeout=60)[0]), flush=True)
again = rayx.get(rayx.put({"ref": first}), timeout=60)["ref"]
print("AGAIN", float(rayx.get(again, timeout=60)[1]), flush=True)
wait_for(gate + ".agent-killed")
try:
    rayx.get(second, timeout=60)
    print("NO ERROR", flush=True)
except rayx.exceptions.ObjectLostError as e:
    print("LOST", type(e).__name__, flush=True)
'''


def test_a_borrowed_object_without_the_head_then_without_its_node(tmp_path):
    from conftest import own_cluster, pid_alive

    with own_cluster(tmp_path, head_cpus=1, far_ip="127.0.0.7") as cluster:
        agent = cluster.agent_pid("127.0.0.7")
        head = cluster.head_pid()
        gate = str(tmp_path / "gate")
        driver, lines = cluster.driver(FAILURE_DRIVER, gate)
        assert lines.next() == "MADE"
        os.kill(head, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head), 10, "the head to exit")
        open(gate + ".head-killed", "w").close()
        assert lines.next() == "FIRST 5.0"
        assert lines.next() == "AGAIN 5.0"
        os.kill(agent, signal.SIGKILL)
        wait_until(lambda: not pid_alive(agent), 10, "the agent to exit")
        open(gate + ".agent-killed", "w").close()
        assert lines.next() == "LOST ObjectLostError"
        assert driver.wait(timeout=60) == 0
