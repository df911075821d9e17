"""Blocked tasks lend their CPUs (Ray's rule) on a real loopback cluster: a
task waiting in rayx.get gives its CPU back to its node until it resumes, so
a tree of tasks that get their children finishes on a 2-CPU node, and a task
holding GPUs keeps them while it waits."""

import os
import time

import gates
from conftest import run_cli, token_env, wait_until


# Pickled by reference (workers import the gates module).
_wait_for_file = gates.wait_for_file


def _node(rayx, address):
    for n in rayx.nodes():
        if n["Alive"] and n["NodeManagerAddress"] == address:
            return n
    raise AssertionError(f"no alive node at {address}")


def test_a_tree_of_tasks_getting_their_children_finishes_on_a_two_cpu_node(rayx_mod):
    rayx = rayx_mod

    # Only 127.0.0.3 has "special": every task of the tree runs on its 2 CPUs.
    @rayx.remote(resources={"special": 0.01})
    def tree(depth):
        if depth == 0:
            return 1
        left, right = tree.remote(depth - 1), tree.remote(depth - 1)
        return 1 + rayx.get(left) + rayx.get(right)

    # 7 tasks, 3 of them waiting for their children at once: without lending,
    # the root and one child hold both CPUs and wait for ever.
    assert rayx.get(tree.remote(2), timeout=120) == 7
    wait_until(lambda: _node(rayx, "127.0.0.3")["Available"].get("CPU") == 2, 15,
               "the node's CPUs to be free again (and none overcommitted)")


def test_a_blocked_task_keeps_its_gpus_while_it_lends_its_cpu(rayx_mod, cluster, tmp_path):
    rayx = rayx_mod
    gate = str(tmp_path / "open")

    @rayx.remote(num_gpus=2, num_cpus=1)  # both fake GPUs of 127.0.0.2
    def parent(path):
        return rayx.get(rayx.remote(_wait_for_file).remote(path))

    @rayx.remote(num_gpus=1, num_cpus=0)
    def gpu_task():
        return rayx.get_gpu_ids()

    p = parent.remote(gate)

    def parent_blocked():
        for lease in rayx._core.list_state()["leases"]:
            if lease["resources"].get("GPU") == 2 and lease["state"] == "BLOCKED":
                return lease
        return None

    wait_until(parent_blocked, 60, "the GPU task to block in rayx.get")
    assert _node(rayx, "127.0.0.2")["Available"].get("GPU") == 0, "its GPUs stay held"
    env = token_env(cluster.token)
    status = run_cli("status", temp_dir=cluster.temp_dir, env=env).stdout
    assert "1 worker blocked in get/wait, lending 1 CPU to other work" in status, status
    listed = run_cli("list", "workers", temp_dir=cluster.temp_dir, env=env).stdout
    assert "BLOCKED" in listed, listed

    # Another GPU task waits for a GPU (the head shows it pending) until the
    # blocked one ends.
    g = gpu_task.remote()
    wait_until(lambda: "{GPU: 1}: 1 pending" in
               run_cli("status", temp_dir=cluster.temp_dir, env=env).stdout, 30,
               "the GPU task to wait for a GPU")
    assert parent_blocked(), "the GPU task is still blocked: nothing freed its GPUs"
    open(gate, "w").close()
    assert rayx.get(p, timeout=60) == "done"
    assert len(rayx.get(g, timeout=60)) == 1
