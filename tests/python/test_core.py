"""rayx's Python API on a real 3-node loopback cluster: tasks, actors,
objects, errors, crashes, placement groups, fake GPUs, zero-copy gets."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import counter_actor
import gates
from conftest import driver_env, pid_alive, run_cli, run_driver, wait_until


# Module-level functions are pickled by reference (workers import this module:
# the driver's import path reaches them through PYTHONPATH).
def _square(x):
    return x * x


_wait_for_file = gates.wait_for_file  # finishes when the test creates the file


def test_tasks_return_values_with_args_and_kwargs(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def combine(a, b, *, scale=1):
        return (a + b) * scale

    refs = [combine.remote(i, i, scale=3) for i in range(50)]
    assert rayx.get(refs) == [(i + i) * 3 for i in range(50)]
    assert rayx.get(rayx.remote(_square).remote(12)) == 144


def test_object_refs_as_arguments_are_resolved_top_level_and_nested(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def add(a, b):
        return a + b

    @rayx.remote
    def inspect(items):
        # Nested refs arrive as refs whose value rayx.get returns.
        return [rayx.get(r) for r in items["refs"]]

    x = rayx.put(40)
    y = add.remote(1, 1)
    assert rayx.get(add.remote(x, y)) == 42
    assert rayx.get(inspect.remote({"refs": [x, y]})) == [40, 2]


def test_chained_tasks_and_nested_submission_from_a_worker(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def leaf(i):
        return i + 1

    @rayx.remote
    def fan_out(n):
        return sum(rayx.get([leaf.remote(i) for i in range(n)]))

    assert rayx.get(fan_out.remote(10)) == sum(range(1, 11))


def test_num_returns_gives_one_ref_per_value(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_returns=3)
    def three():
        return 1, "two", [3]

    a, b, c = three.remote()
    assert rayx.get(c) == [3]
    assert rayx.get([a, b]) == [1, "two"]

    @rayx.remote
    def double(v):
        return v * 2

    assert rayx.get(double.remote(b)) == "twotwo"

    @rayx.remote(num_returns=2)
    def wrong():
        return 1, 2, 3

    with pytest.raises(ValueError, match="num_returns=2 but returned 3"):
        rayx.get(wrong.remote()[0])


def test_actor_keeps_state_and_runs_calls_in_order(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Counter:
        def __init__(self, start):
            self.value = start
            self.log = []

        def add(self, n):
            self.value += n
            self.log.append(n)
            return self.value

        def history(self):
            return self.log

    c = Counter.remote(100)
    refs = [c.add.remote(i) for i in range(20)]
    assert rayx.get(refs[-1]) == 100 + sum(range(20))
    assert rayx.get(c.history.remote()) == list(range(20))


def test_actor_handle_passed_to_tasks(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Box:
        def __init__(self):
            self.items = []

        def push(self, x):
            self.items.append(x)
            return len(self.items)

        def items_(self):
            return sorted(self.items)

    @rayx.remote
    def pusher(box, x):
        return rayx.get(box.push.remote(x))

    box = Box.remote()
    rayx.get([pusher.remote(box, i) for i in range(5)])
    assert rayx.get(box.items_.remote()) == list(range(5))


def test_named_and_detached_actors(rayx_mod, cluster):
    rayx = rayx_mod

    @rayx.remote
    class Registry:
        def __init__(self):
            self.d = {}

        def set(self, k, v):
            self.d[k] = v

        def get(self, k):
            return self.d.get(k)

    r = Registry.options(name="py-registry").remote()
    rayx.get(r.set.remote("a", 1))
    again = rayx.get_actor("py-registry")
    assert rayx.get(again.get.remote("a")) == 1
    with pytest.raises(ValueError, match="no-such-actor"):
        rayx.get_actor("no-such-actor")
    with pytest.raises(ValueError, match="needs a name"):
        Registry.options(lifetime="detached").remote()

    d = Registry.options(name="py-detached", lifetime="detached").remote()
    rayx.get(d.set.remote("k", "kept"))
    # Another driver (another job) finds it and reads its state.
    r2 = run_driver(cluster, textwrap.dedent("""
        import rayx
        rayx.init()
        h = rayx.get_actor("py-detached")
        print("VALUE", rayx.get(h.get.remote("k")))
        rayx.kill(h)
        rayx.shutdown()
    """))
    assert r2.returncode == 0, r2.stderr
    assert "VALUE kept" in r2.stdout


def test_another_jobs_detached_actor_reads_stored_arguments_with_the_callers_grant(
        rayx_mod, cluster):
    # A detached actor of this job on the node with "special"; another job's
    # driver (head node) and its task (the GPU node) pass it put objects. Its
    # worker pulls them from those nodes' object servers as a member of this
    # job: each call carries the caller job's grant for that one object
    # (without it the pull is refused: attacker_test).
    rayx = rayx_mod

    @rayx.remote(resources={"special": 1})
    class Summer:
        def total(self, values):
            return int(sum(values))

        def where(self):
            return rayx.get_runtime_context().get_node_id()

    s = Summer.options(name="py-summer", lifetime="detached").remote()
    special_node = rayx.get(s.where.remote())
    try:
        other = run_driver(cluster, textwrap.dedent("""
            import rayx
            rayx.init()
            h = rayx.get_actor("py-summer")
            values = list(range(300_000))  # well over the inline limit
            ref = rayx.put(values)
            print("DRIVER", rayx.get(h.total.remote(ref), timeout=60))

            @rayx.remote(num_gpus=1)
            def from_a_task():
                h = rayx.get_actor("py-summer")
                ref = rayx.put([2] * 300_000)
                return rayx.get_runtime_context().get_node_id(), rayx.get(h.total.remote(ref))

            node, total = rayx.get(from_a_task.remote(), timeout=60)
            print("TASK", node, total)
            rayx.shutdown()
        """), timeout=120)
        assert other.returncode == 0, other.stderr
        assert f"DRIVER {sum(range(300_000))}" in other.stdout, other.stdout
        task_line = [l for l in other.stdout.splitlines() if l.startswith("TASK ")]
        assert task_line, other.stdout
        _, node, total = task_line[0].split()
        assert node != special_node, "the task ran beside the actor: nothing was pulled"
        assert int(total) == 600_000
    finally:
        rayx.kill(s)


def test_remote_exception_is_the_original_class_with_traceback(rayx_mod):
    rayx = rayx_mod

    class MyError(Exception):
        def __init__(self, code):
            super().__init__(f"code {code}")
            self.code = code

    @rayx.remote
    def fails(code):
        raise MyError(code)

    @rayx.remote
    def raises_value_error():
        raise ValueError("bad input 17")

    with pytest.raises(ValueError) as info:
        rayx.get(raises_value_error.remote())
    assert isinstance(info.value, rayx.exceptions.RayxTaskError)
    assert "bad input 17" in str(info.value)
    assert "raises_value_error" in info.value.traceback_str

    with pytest.raises(MyError) as info2:
        rayx.get(fails.remote(7))
    assert info2.value.code == 7

    # A task whose argument failed fails with the same error.
    @rayx.remote
    def uses(x):
        return x

    with pytest.raises(ValueError, match="bad input 17"):
        rayx.get(uses.remote(raises_value_error.remote()))


def test_worker_crash_and_killed_actor(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def die():
        os._exit(3)

    with pytest.raises(rayx.exceptions.WorkerCrashedError):
        rayx.get(die.remote(), timeout=30)

    @rayx.remote
    class A:
        def pid(self):
            return os.getpid()

    a = A.remote()
    pid = rayx.get(a.pid.remote())
    rayx.kill(a)
    with pytest.raises(rayx.exceptions.ActorDiedError):
        rayx.get(a.pid.remote(), timeout=30)
    wait_until(lambda: not pid_alive(pid),
               10, "the killed actor's process to exit")


def test_a_task_whose_worker_dies_runs_again(rayx_mod, tmp_path):
    rayx = rayx_mod

    @rayx.remote
    def crash_once(marker):
        # The first run kills its own worker; the retry finds the marker.
        if not os.path.exists(marker):
            open(marker, "w").write(str(os.getpid()))
            os._exit(1)
        return "ran again in pid %d after pid %s died" % (os.getpid(), open(marker).read())

    out = rayx.get(crash_once.remote(str(tmp_path / "first")), timeout=60)
    first_pid = int(open(tmp_path / "first").read())
    assert out.startswith("ran again") and f"after pid {first_pid} died" in out
    assert f"in pid {first_pid} " not in out
    with pytest.raises(rayx.exceptions.WorkerCrashedError):
        rayx.get(crash_once.options(max_retries=0).remote(str(tmp_path / "second")), timeout=60)

    @rayx.remote
    def always_crashes():
        os._exit(2)

    with pytest.raises(rayx.exceptions.WorkerCrashedError, match="the last of 3 tries"):
        rayx.get(always_crashes.options(max_retries=2).remote(), timeout=60)


class FlakyError(Exception):
    pass


def test_retry_exceptions_runs_a_raising_task_again(rayx_mod, tmp_path):
    rayx = rayx_mod

    @rayx.remote
    def flaky(counter, fail_times, exc=FlakyError):
        runs = int(open(counter).read()) if os.path.exists(counter) else 0
        runs += 1
        open(counter, "w").write(str(runs))
        if runs <= fail_times:
            raise exc(f"flaky run {runs}")
        return runs

    assert rayx.get(flaky.options(retry_exceptions=True).remote(
        str(tmp_path / "a"), 2), timeout=60) == 3
    with pytest.raises(FlakyError, match="flaky run 1"):
        rayx.get(flaky.remote(str(tmp_path / "b"), 2), timeout=60)
    with pytest.raises(FlakyError, match="flaky run 2"):
        rayx.get(flaky.options(retry_exceptions=True, max_retries=1).remote(
            str(tmp_path / "c"), 5), timeout=60)
    # A list retries only those classes (and their subclasses).
    only = flaky.options(retry_exceptions=[FlakyError])
    assert rayx.get(only.remote(str(tmp_path / "d"), 1), timeout=60) == 2
    with pytest.raises(KeyError):
        rayx.get(only.remote(str(tmp_path / "e"), 1, KeyError), timeout=60)
    assert open(tmp_path / "e").read() == "1", "a KeyError was retried"
    with pytest.raises(TypeError, match="retry_exceptions must be"):
        flaky.options(retry_exceptions=["FlakyError"])


def test_actor_restarts_run_the_constructor_again(rayx_mod):
    rayx = rayx_mod
    Counter = rayx.remote(counter_actor.Counter)
    c = Counter.options(max_restarts=1, max_task_retries=1).remote(10)
    assert rayx.get(c.add.remote(5), timeout=30) == 15
    first = rayx.get(c.pid.remote(), timeout=30)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not pid_alive(first), 10, "the killed actor's process to exit")
    # The new instance ran __init__(10) again; the call reaches it (a task retry
    # covers a call sent before the loss was seen).
    assert rayx.get(c.add.remote(1), timeout=30) == 11
    second = rayx.get(c.pid.remote(), timeout=30)
    assert second != first
    os.kill(second, signal.SIGKILL)
    wait_until(lambda: not pid_alive(second), 10, "the restarted actor's process to exit")
    with pytest.raises(rayx.exceptions.ActorDiedError, match="max_restarts 1"):
        rayx.get(c.add.remote(1), timeout=30)
    with pytest.raises(ValueError, match="max_restarts must be an int"):
        Counter.options(max_restarts=-2).remote(0)


def test_actor_constructor_failure_is_reported(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Broken:
        def __init__(self):
            raise RuntimeError("cannot load the model")

        def f(self):
            return 1

    b = Broken.remote()
    with pytest.raises(rayx.exceptions.ActorDiedError, match="cannot load the model") as info:
        rayx.get(b.f.remote(), timeout=30)
    assert str(info.value).startswith("Broken.f failed")


def test_put_get_wait_and_timeouts(rayx_mod, tmp_path):
    rayx = rayx_mod

    slow = rayx.remote(_wait_for_file)

    flag = os.path.join(str(tmp_path), "go")
    fast = rayx.put("fast")
    pending = slow.remote(flag)
    ready, not_ready = rayx.wait([pending, fast], num_returns=1, timeout=5)
    assert ready == [fast] and not_ready == [pending]
    with pytest.raises(rayx.exceptions.GetTimeoutError):
        rayx.get(pending, timeout=0.2)
    with pytest.raises(TimeoutError):  # also a builtin TimeoutError
        rayx.get(pending, timeout=0.1)
    open(flag, "w").close()
    ready, not_ready = rayx.wait([pending, fast], num_returns=2, timeout=30)
    assert set(ready) == {pending, fast} and not_ready == []
    assert rayx.get(pending) == "done"


def test_bad_input_gets_clear_errors(rayx_mod):
    rayx = rayx_mod
    f = rayx.remote(_square)
    with pytest.raises(TypeError, match="cannot be called directly"):
        f(3)
    with pytest.raises(TypeError, match="unknown option"):
        f.options(num_cpu=1)
    with pytest.raises(ValueError, match="num_cpus must be a number >= 0"):
        f.options(num_cpus=-1)
    with pytest.raises(ValueError, match="above 1 must be a whole number of GPUs"):
        f.options(num_gpus=1.5)
    f.options(num_gpus=0.5)  # a share of one device
    f.options(num_gpus=2)
    with pytest.raises(TypeError, match="takes an ObjectRef"):
        rayx.get("not a ref")
    with pytest.raises(ValueError, match="num_returns"):
        rayx.wait([rayx.put(1)], num_returns=2)
    with pytest.raises(rayx.exceptions.InfeasibleError):
        rayx.get(f.options(num_gpus=64).remote(1), timeout=30)


def test_unpicklable_value_names_the_attribute(rayx_mod):
    rayx = rayx_mod
    import threading

    class Holder:
        def __init__(self):
            self.model = {"weights": [1, 2], "lock": threading.Lock()}

    with pytest.raises(TypeError, match=r"value\.model\['lock'\]"):
        rayx.put(Holder())


def test_oversized_closure_is_refused_with_a_hint(rayx_mod):
    rayx = rayx_mod
    big = b"x" * (2 << 20)

    @rayx.remote
    def uses_big():
        return len(big)

    with pytest.raises(ValueError, match=r"over the 1048576-byte limit.*rayx.put"):
        uses_big.remote()


def test_function_that_cannot_be_imported_fails_with_the_import_error(rayx_mod, tmp_path):
    rayx = rayx_mod
    # A module on the driver's path only after init: workers cannot import it.
    (tmp_path / "driver_only_mod.py").write_text("def f():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import driver_only_mod
        with pytest.raises(rayx.exceptions.RayxTaskError) as info:
            rayx.get(rayx.remote(driver_only_mod.f).remote(), timeout=30)
        assert "driver_only_mod" in str(info.value)
        assert "ModuleNotFoundError" in info.value.traceback_str
    finally:
        sys.path.remove(str(tmp_path))


def test_workers_hold_their_jobs_secret_and_never_the_cluster_token(rayx_mod):
    """The agents were started with the cluster token in their environment:
    none of the workers they start (tasks and actors, on every node) inherits
    it; each holds its job's secret only."""
    rayx = rayx_mod

    @rayx.remote
    def secrets():
        return sorted(k for k in os.environ if "TOKEN" in k), "RAYX_JOB_SECRET" in os.environ

    @rayx.remote
    class Holder:
        def secrets(self):
            return sorted(k for k in os.environ if "TOKEN" in k), "RAYX_JOB_SECRET" in os.environ

    spread = secrets.options(scheduling_strategy="SPREAD")
    seen = rayx.get([spread.remote() for _ in range(6)])
    seen.append(rayx.get(Holder.remote().secrets.remote()))
    assert all(found == ([], True) for found in seen), seen


def test_cluster_queries(rayx_mod):
    rayx = rayx_mod
    nodes = [n for n in rayx.nodes() if n["Alive"]]
    assert sorted(n["NodeManagerAddress"] for n in nodes) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    total = rayx.cluster_resources()
    assert total["CPU"] == 6 and total["GPU"] == 2 and total["special"] == 1
    assert rayx.available_resources()["CPU"] <= 6


def test_fake_gpus_are_distinct_and_visible(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_gpus=1)
    class GpuActor:
        def ids(self):
            return rayx.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get(
                "RAYX_NODE_IP")

    actors = [GpuActor.remote() for _ in range(2)]
    got = rayx.get([a.ids.remote() for a in actors])
    ids = sorted(g[0][0] for g in got)
    assert ids == [0, 1]
    for gpu_ids, visible, node in got:
        assert visible == str(gpu_ids[0])
        assert node == "127.0.0.2"
    for a in actors:
        rayx.kill(a)

    @rayx.remote
    def no_gpu():
        return rayx.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")

    assert rayx.get(no_gpu.remote()) == ([], "")


def test_placement_groups_and_strategies(rayx_mod, tmp_path):
    rayx = rayx_mod
    from rayx.util import placement_group, remove_placement_group
    from rayx.util.scheduling_strategies import (NodeAffinitySchedulingStrategy,
                                                 PlacementGroupSchedulingStrategy)

    @rayx.remote(num_cpus=1)
    def where():
        return os.environ["RAYX_NODE_IP"]

    pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
    assert rayx.get(pg.ready(), timeout=30) is True  # Ray's way
    assert pg.wait(30)
    nodes = rayx.get([where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i))
                      .remote() for i in range(3)])
    assert sorted(nodes) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    remove_placement_group(pg)

    # Four distinct nodes: pending until a fourth node joins.
    waiting = placement_group([{"CPU": 1}] * 4, strategy="STRICT_SPREAD")
    assert waiting.wait(0.5) is False
    assert rayx.wait([waiting.ready()], timeout=0.5)[0] == []
    remove_placement_group(waiting)
    with pytest.raises(ValueError, match="infeasible"):
        placement_group([{"CPU": 64}], strategy="PACK").wait(30)
    with pytest.raises(ValueError,
                       match="'EVERYWHERE': use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"):
        placement_group([{"CPU": 1}], strategy="EVERYWHERE")
    with pytest.raises(ValueError, match="strategy None"):
        placement_group([{"CPU": 1}], strategy=None)

    target = next(n for n in rayx.nodes() if n["NodeManagerAddress"] == "127.0.0.3")
    on = where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(target["NodeID"]))
    assert set(rayx.get([on.remote() for _ in range(3)])) == {"127.0.0.3"}
    assert rayx.get(where.options(resources={"special": 1}).remote()) == "127.0.0.3"
    @rayx.remote(num_cpus=1)
    def where_together(directory, n):
        # Held until all n run at once, so each needs its own worker.
        open(os.path.join(directory, str(os.getpid())), "w").close()
        while len(os.listdir(directory)) < n:
            time.sleep(0.01)
        return os.environ["RAYX_NODE_IP"]

    # Idle leases go back within a second: start from an idle cluster.
    wait_until(lambda: rayx.available_resources().get("CPU") == 6, 15, "all CPUs to be free")
    meeting = str(tmp_path)
    refs = [where_together.options(scheduling_strategy="SPREAD").remote(meeting, 3)
            for _ in range(3)]
    assert sorted(rayx.get(refs, timeout=60)) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


def test_large_values_are_zero_copy_from_the_store(rayx_mod):
    rayx = rayx_mod
    import numpy as np

    a = np.arange(100 * 1024 * 1024 // 8, dtype=np.float64)  # 100 MB
    ref = rayx.put(a)
    b = rayx.get(ref)
    assert not b.flags.writeable
    assert b[-1] == a[-1] and b.shape == a.shape
    address = b.ctypes.data
    mapped = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                mapped.append(fields[-1])
    assert mapped and "/dev/shm" in mapped[0], mapped

    @rayx.remote
    def total(x):
        return float(x.sum())

    assert rayx.get(total.remote(ref)) == float(a.sum())

    @rayx.remote
    def make(n):
        return np.ones(n, dtype=np.int32)

    c = rayx.get(make.remote(1 << 20))
    assert c.sum() == 1 << 20


def _interrupt_blocked_driver(cluster, code, what, blocked=None):
    """Runs driver `code`, which prints WAITING, then blocks in `what` and prints
    INTERRUPTED on KeyboardInterrupt; sends SIGINT once it sleeps there (and
    `blocked()`, when given, is true) and asserts it was interrupted within 5 s
    and exited cleanly."""
    import select
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                         text=True, env=driver_env(cluster))
    try:
        assert p.stdout.readline().strip() == "WAITING"
        if blocked is not None:
            wait_until(blocked, 30, f"the driver to reach {what}")
        # Blocked inside librayx: the main thread sleeps.
        wait_until(lambda: open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "S",
                   10, f"the driver to block in {what}")
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        readable, _, _ = select.select([p.stdout], [], [], 5)
        assert readable, f"{what} was not interrupted within 5 s of SIGINT"
        assert p.stdout.readline().strip() == "INTERRUPTED"
        print(f"{what} interrupted {time.monotonic() - sent:.2f} s after SIGINT")
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0


def test_ctrl_c_interrupts_get(cluster):
    _interrupt_blocked_driver(cluster, """
        import os, sys, time, rayx
        rayx.init()
        @rayx.remote
        def forever():
            while True:
                time.sleep(1)
        ref = forever.remote()
        try:
            print("WAITING", flush=True)
            rayx.get(ref)
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        rayx.shutdown()
    """, "rayx.get")


def test_import_is_light():
    code = ("import sys, time; t = time.perf_counter(); import rayx; "
            "print(time.perf_counter() - t, 'torch' in sys.modules, 'numpy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    _, torch_loaded, numpy_loaded = r.stdout.split()
    assert torch_loaded == "False" and numpy_loaded == "False"


def test_driver_that_exits_without_shutdown_leaves_no_workers(cluster):
    from conftest import cluster_processes
    before = set(cluster_processes(cluster.address))
    r = run_driver(cluster, textwrap.dedent("""
        import os, rayx
        rayx.init()
        @rayx.remote
        class A:
            def pid(self):
                return os.getpid()
        a = A.remote()
        print("PID", rayx.get(a.pid.remote()))
    """))
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split("PID")[1].split()[0])
    assert pid not in before
    wait_until(lambda: pid not in cluster_processes(cluster.address), 15,
               "the exited driver's actor to be stopped")


def test_a_killed_driver_ends_its_job_at_once_and_a_paused_one_keeps_it(cluster):
    """The driver's exit is seen (its node's agent watches its pid), not
    guessed from silence: SIGKILLed, its actor stops within 2 s; paused longer
    than a few heartbeats, it keeps its job."""
    from conftest import pid_alive
    script = textwrap.dedent("""
        import os, sys, rayx
        rayx.init()
        @rayx.remote
        class A:
            def pid(self):
                return os.getpid()
        a = A.remote()
        print("PID", rayx.get(a.pid.remote()), flush=True)
        for line in sys.stdin:
            print("ANSWER", rayx.get(a.pid.remote(), timeout=30), flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], env=driver_env(cluster),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("PID"), line
        actor = int(line.split()[1])
        # Paused past the old 3 s silence timeout (a debugger, SIGSTOP): kept.
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(6)  # the pause under test
        os.kill(p.pid, signal.SIGCONT)
        p.stdin.write("call\n")
        p.stdin.flush()
        assert p.stdout.readline().split() == ["ANSWER", str(actor)]
        # Killed: its job ends and its actor goes (within a second or two when
        # the machine is idle; the time is printed).
        killed = time.monotonic()
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        wait_until(lambda: not pid_alive(actor), 10,
                   "the killed driver's actor to be stopped")
        print(f"actor of the SIGKILLed driver gone after {time.monotonic() - killed:.2f} s")
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


def test_the_head_restarts_a_detached_actor_after_its_job_ended(rayx_mod, cluster):
    rayx = rayx_mod
    # Another driver (another job) makes it and exits: the owner is gone.
    made = run_driver(cluster, textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(counter_actor.__file__))!r})
        import rayx
        from counter_actor import Counter
        rayx.init()

        Keeper = rayx.remote(Counter)
        k = Keeper.options(name="py-reborn", lifetime="detached", max_restarts=1).remote(10)
        print("VALUE", rayx.get(k.add.remote(5)))
        print("PID", rayx.get(k.pid.remote()))
        rayx.shutdown()
    """))
    assert made.returncode == 0, made.stderr
    assert "VALUE 15" in made.stdout
    first = int(made.stdout.split("PID")[1].split()[0])
    h = rayx.get_actor("py-reborn")
    assert rayx.get(h.pid.remote(), timeout=30) == first
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not pid_alive(first), 10, "the killed actor's process to exit")

    def restarted():
        try:
            return rayx.get(h.pid.remote(), timeout=10) != first
        except rayx.exceptions.RayxError:
            return False  # the call in flight when it died
    wait_until(restarted, 20, "the head to restart the detached actor")
    # Its constructor ran again, with the arguments it was made with.
    assert rayx.get(h.add.remote(1), timeout=30) == 11
    second = rayx.get(h.pid.remote(), timeout=30)
    os.kill(second, signal.SIGKILL)
    wait_until(lambda: not pid_alive(second), 10, "the restarted actor's process to exit")

    def name_gone():
        try:
            rayx.get_actor("py-reborn")
            return False
        except ValueError:
            return True
    wait_until(name_gone, 10, "the name of the actor whose restarts are spent to go")


def test_remote_functions_classes_and_trainer_work_again_after_shutdown_and_init(cluster):
    # Each init() starts a new job, and the head drops the old job's exported
    # code: a second job must export its functions and classes again.
    r = run_driver(cluster, textwrap.dedent("""
        import rayx
        from rayx.train import DataParallelTrainer, ScalingConfig

        @rayx.remote
        def double(x):
            return 2 * x

        @rayx.remote
        class Total:
            def __init__(self):
                self.n = 0

            def add(self, k):
                self.n += k
                return self.n

        def loop():
            rayx.train.report({"rank": rayx.train.get_context().get_world_rank()})

        for job in range(2):
            rayx.init()
            t = Total.remote()
            fit = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=1)).fit()
            print("JOB", job, rayx.get(double.remote(21), timeout=60),
                  rayx.get(t.add.remote(5), timeout=60), fit.metrics["rank"], flush=True)
            rayx.shutdown()
    """), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "JOB 0 42 5 0" in r.stdout and "JOB 1 42 5 0" in r.stdout, r.stdout + r.stderr


class TwoArgError(Exception):
    """Cannot be rebuilt from its args: __init__ takes two, args holds one."""

    def __init__(self, a, b):
        super().__init__(f"two args {a} and {b}")


class KeywordOnlyError(Exception):
    def __init__(self, *, code):
        super().__init__(f"code {code}")


class NoArgError(Exception):
    def __init__(self):
        super().__init__("no args at all")


def test_remote_exception_that_cannot_be_rebuilt_is_a_task_error_with_the_traceback(
        rayx_mod, tmp_path):
    rayx = rayx_mod

    @rayx.remote
    def raise_it(kind):
        if kind == "two":
            raise TwoArgError(1, 2)
        if kind == "keyword":
            raise KeywordOnlyError(code=7)
        raise NoArgError()

    for kind, name, message in (("two", "TwoArgError", "two args 1 and 2"),
                                ("keyword", "KeywordOnlyError", "code 7"),
                                ("none", "NoArgError", "no args at all")):
        with pytest.raises(rayx.exceptions.RayxTaskError, match=name) as info:
            rayx.get(raise_it.remote(kind), timeout=30)
        assert not isinstance(info.value, TypeError), info.value
        assert "raise_it" in info.value.traceback_str
        assert f"{name}: {message}" in info.value.traceback_str
        assert info.value.cause is None

    # A class the worker imports but the driver cannot.
    (tmp_path / "worker_only_errors.py").write_text(
        "class WorkerOnlyError(Exception):\n    pass\n")

    @rayx.remote
    def raise_worker_only(path):
        sys.path.insert(0, path)
        import worker_only_errors
        raise worker_only_errors.WorkerOnlyError("only the worker knows me")

    with pytest.raises(rayx.exceptions.RayxTaskError, match="WorkerOnlyError") as info:
        rayx.get(raise_worker_only.remote(str(tmp_path)), timeout=30)
    assert "only the worker knows me" in info.value.traceback_str
    assert "raise_worker_only" in info.value.traceback_str

    # A task whose argument failed that way fails with the same error.
    @rayx.remote
    def uses(x):
        return x

    with pytest.raises(rayx.exceptions.RayxTaskError, match="TwoArgError"):
        rayx.get(uses.remote(raise_it.remote("two")), timeout=30)


def test_named_actor_handles_keep_method_num_returns_and_class_name(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Pair:
        @rayx.method(num_returns=2)
        def two(self):
            return "left", "right"

    made = Pair.options(name="py-pair").remote()
    assert rayx.get(list(made.two.remote()), timeout=30) == ["left", "right"]
    found = rayx.get_actor("py-pair")
    x, y = found.two.remote()
    assert rayx.get([x, y], timeout=30) == ["left", "right"]
    assert repr(found).startswith("Actor(Pair,")
    again = Pair.options(name="py-pair", get_if_exists=True).remote()
    assert again == made
    x, y = again.two.remote()
    assert rayx.get([x, y], timeout=30) == ["left", "right"]
    rayx.kill(made)


def test_ctrl_c_interrupts_a_trainer_waiting_for_its_workers_and_frees_them(cluster):
    # The only "special" resource is held, so the trainer's group waits for it
    # (up to 120 s) inside one librayx call; Ctrl-C ends that wait, and the
    # group's reservation goes with it: nothing takes "special" once it is free.
    def trainer_waits():
        listed = run_cli("list", "placement-groups", temp_dir=cluster.temp_dir)
        return "PENDING" in listed.stdout
    _interrupt_blocked_driver(cluster, """
        import sys, time
        import rayx
        from rayx.train import ScalingConfig
        from rayx.train.torch import TorchTrainer
        from rayx.util import placement_group, remove_placement_group
        rayx.init()
        hold = placement_group([{"special": 1}])
        assert hold.wait(30)
        def loop():
            pass
        trainer = TorchTrainer(loop, scaling_config=ScalingConfig(
            num_workers=1, resources_per_worker={"CPU": 1, "special": 1}))
        try:
            print("WAITING", flush=True)
            trainer.fit()
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        remove_placement_group(hold)
        deadline = time.monotonic() + 10
        while rayx.available_resources().get("special", 0) != 1:
            if time.monotonic() > deadline:
                sys.exit("the interrupted trainer's group still holds 'special'")
            time.sleep(0.1)
        rayx.shutdown()
    """, "TorchTrainer.fit waiting for its workers", blocked=trainer_waits)


def test_ctrl_c_interrupts_create_collective_group_and_frees_its_name(cluster):
    # The members are busy, so their joins wait behind the busy calls (up to
    # the 30 s connect timeout) inside one librayx call; after Ctrl-C the name
    # is free again and the same actors form the group under it.
    _interrupt_blocked_driver(cluster, """
        import time
        import rayx
        from rayx.util import collective
        rayx.init()
        @rayx.remote(num_cpus=0.1)
        class Busy:
            def hold(self, s):
                time.sleep(s)
                return s
            def rank(self, name):
                return collective.get_rank(name)
        actors = [Busy.remote() for _ in range(2)]
        busy = [a.hold.remote(8) for a in actors]
        try:
            print("WAITING", flush=True)
            collective.create_collective_group(actors, 2, [0, 1], group_name="interrupted")
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        rayx.get(busy, timeout=60)
        collective.create_collective_group(actors, 2, [1, 0], group_name="interrupted")
        assert rayx.get([a.rank.remote("interrupted") for a in actors], timeout=60) == [1, 0]
        rayx.shutdown()
    """, "create_collective_group")


class _Slow:
    """Its constructor takes `seconds` (a model to load); it writes its pid to
    `path` first. With `fail`, it then raises."""

    def __init__(self, path, seconds, fail=False):
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(seconds)
        if fail:
            raise RuntimeError("the weights are corrupt")

    def pid(self):
        return os.getpid()


class _SlowFirst(_Slow):
    """A _Slow whose constructor takes `seconds` only the first time (a model
    download that a restart finds done)."""

    def __init__(self, path, seconds, fail=False):
        first = not os.path.exists(path)
        super().__init__(path, seconds if first else 0, fail)


def test_a_named_actor_is_found_and_its_name_held_while_it_is_constructed(rayx_mod, cluster,
                                                                          tmp_path):
    rayx = rayx_mod
    Slow = rayx.remote(_Slow)
    log = tmp_path / "constructed"
    made = Slow.options(name="py-slow").remote(str(log), 4)
    # As in Ray, the name is taken at .remote(), not once the constructor ran.
    with pytest.raises(ValueError, match="constructor is still running"):
        Slow.options(name="py-slow").remote(str(log), 0)
    again = Slow.options(name="py-slow", get_if_exists=True).remote(str(log), 0)
    found = rayx.get_actor("py-slow")
    assert repr(found).startswith("Actor(_Slow,")
    other = run_driver(cluster, textwrap.dedent("""
        import rayx
        rayx.init()
        h = rayx.get_actor("py-slow")
        print("PID", rayx.get(h.pid.remote(), timeout=30))
        rayx.shutdown()
    """))
    pid = rayx.get(made.pid.remote(), timeout=30)
    assert rayx.get(again.pid.remote(), timeout=30) == pid
    assert rayx.get(found.pid.remote(), timeout=30) == pid
    assert other.returncode == 0, other.stderr
    assert f"PID {pid}" in other.stdout
    assert log.read_text().split() == [str(pid)], "constructed more than once"
    rayx.kill(made)


def test_a_detached_actor_deployed_by_a_driver_that_exits_at_once_is_there_later(
        rayx_mod, cluster, tmp_path):
    # The pattern of a deploy script: create a detached named actor (a model
    # that takes a while to load) and exit. The driver hands it to the head,
    # which finishes creating it.
    rayx = rayx_mod
    log = tmp_path / "constructed"
    deploy = run_driver(cluster, textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import rayx
        from test_core import _Slow
        rayx.init()
        rayx.remote(_Slow).options(name="py-deployed", lifetime="detached").remote(
            {str(log)!r}, 2)
        print("DEPLOYED")
    """))
    assert deploy.returncode == 0, deploy.stderr
    assert "DEPLOYED" in deploy.stdout
    h = rayx.get_actor("py-deployed")
    assert repr(h).startswith("Actor(_Slow,")
    pid = rayx.get(h.pid.remote(), timeout=60)
    # One actor under the name. A constructor that began just as the driver
    # exited (before its worker's report reached the head) was stopped and
    # run again; one that began earlier was taken over.
    pids = [int(p) for p in log.read_text().split()]
    assert pids[-1] == pid
    for begun in pids[:-1]:
        wait_until(lambda: not pid_alive(begun), 10, "the first, abandoned constructor's worker to exit")
    rayx.kill(h)
    wait_until(lambda: not pid_alive(pid), 10, "the killed actor's worker to exit")


def _driver_killed_during_constructor(cluster, log, name, lifetime, seconds, call=False,
                                      fail=False, cls="_Slow", max_restarts=0):
    """Runs a driver that creates actor `name` (a _Slow writing to `log`,
    failing with `fail`) and SIGKILLs it once the constructor has begun;
    returns the constructor's pid and, with `call`, the result of a call made
    through a handle got by name before the kill."""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import rayx
        from test_core import {cls}
        rayx.init()
        rayx.remote({cls}).options(name={name!r}, lifetime={lifetime!r},
                                   max_restarts={max_restarts}).remote(
            {str(log)!r}, {seconds}, {fail!r})
        print("CREATED", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, env=driver_env(cluster))
    try:
        assert p.stdout.readline().strip() == "CREATED"
        wait_until(lambda: log.exists() and log.read_text().strip(), 30,
                   "the actor's constructor to start")
        actor_pid = int(log.read_text().split()[0])
        # Taken while its constructor runs.
        with pytest.raises(ValueError, match="constructor is still running"):
            rayx_api().remote(_Slow).options(name=name).remote(str(log), 0)
        ref = rayx_api().get_actor(name).pid.remote() if call else None
        p.kill()
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return actor_pid, ref


def rayx_api():
    import rayx
    return rayx


def _name_is_free_for_another_actor(rayx, name, path, old_pid):
    """Waits for `name` to be freed, then creates another actor under it: a new
    worker, not `old_pid`."""
    def free():
        try:
            rayx.get_actor(name)
            return False
        except ValueError as e:
            assert "no actor named" in str(e), e
            return True
    wait_until(free, 20, f"the name {name!r} to be freed")
    h = rayx.remote(_Slow).options(name=name).remote(str(path), 0)
    assert rayx.get(h.pid.remote(), timeout=30) != old_pid
    rayx.kill(h)


def test_a_reserved_name_is_freed_when_its_creator_dies_first(rayx_mod, cluster, tmp_path):
    rayx = rayx_mod
    actor_pid, ref = _driver_killed_during_constructor(
        cluster, tmp_path / "constructed", "py-orphaned-name", None, 600, call=True)
    # A handle got by name while the constructor ran fails once the name goes
    # (the head ends the silent job), not after waiting 60 s for a worker.
    with pytest.raises(rayx.exceptions.ActorDiedError, match="its name is gone"):
        rayx.get(ref, timeout=40)
    wait_until(lambda: not pid_alive(actor_pid), 20, "the half-made actor's worker to exit")
    _name_is_free_for_another_actor(rayx, "py-orphaned-name", tmp_path / "second", actor_pid)


def test_a_detached_actor_whose_driver_is_killed_during_its_constructor_is_made_once(
        rayx_mod, cluster, tmp_path):
    # As in Ray, a detached actor outlives its creator from `.remote()` on.
    # Its worker told the head (through its agent) that the constructor runs,
    # so the head, seeing the job end without a word, takes that worker over:
    # the constructor (a model loading) runs once, not again from the start.
    rayx = rayx_mod
    log = tmp_path / "constructed"
    first, _ = _driver_killed_during_constructor(cluster, log, "py-kept-name", "detached", 3)
    h = rayx.get_actor("py-kept-name")  # found while its constructor runs
    pid = rayx.get(h.pid.remote(), timeout=60)
    assert pid == first, "the worker the dead driver started was replaced"
    assert [int(p) for p in log.read_text().split()] == [first], "constructed twice"
    rayx.kill(h)
    wait_until(lambda: not pid_alive(pid), 10, "the killed actor's worker to exit")


def _head_log(cluster):
    """The head's log of the test cluster, as it is now."""
    text = ""
    for root, _, files in os.walk(cluster.temp_dir):
        if "head.log" in files and os.path.basename(root) == "logs":
            with open(os.path.join(root, "head.log"), errors="replace") as f:
                text += f.read()
    return text


def test_a_taken_over_actor_whose_worker_dies_in_its_constructor_is_restarted(
        rayx_mod, cluster, tmp_path):
    rayx = rayx_mod
    log = tmp_path / "constructed"
    first, _ = _driver_killed_during_constructor(cluster, log, "py-restarted-model", "detached",
                                                 600, cls="_SlowFirst", max_restarts=1)
    h = rayx.get_actor("py-restarted-model")  # found while its constructor runs
    wait_until(lambda: "detached actor 'py-restarted-model': its job ended" in _head_log(cluster)
               and "the head takes over its worker" in _head_log(cluster), 30,
               "the head to take the actor over from its killed driver")
    os.kill(first, signal.SIGKILL)
    pid = rayx.get(h.pid.remote(), timeout=60)
    assert pid != first
    assert [int(p) for p in log.read_text().split()] == [first, pid]
    assert re.search(r"'py-restarted-model' \([^)]*\): its worker ended while its constructor "
                     r"ran .* the head restarts it \(restart 1", _head_log(cluster)), \
        "not restarted as a taken-over actor"
    rayx.kill(h)
    wait_until(lambda: not pid_alive(pid), 10, "the killed actor's worker to exit")


def test_a_taken_over_constructor_that_fails_frees_the_name_and_its_worker(
        rayx_mod, cluster, tmp_path):
    rayx = rayx_mod
    log = tmp_path / "constructed"
    first, _ = _driver_killed_during_constructor(cluster, log, "py-broken-model", "detached", 3,
                                                 fail=True)
    h = rayx.get_actor("py-broken-model")  # found while its constructor runs
    # A call waits for the constructor, then fails: nobody is left to fix it.
    with pytest.raises(rayx.exceptions.ActorDiedError, match="its name is gone"):
        rayx.get(h.pid.remote(), timeout=40)
    wait_until(lambda: not pid_alive(first), 10, "the failed actor's worker to exit")
    assert [int(p) for p in log.read_text().split()] == [first], "a failed constructor was retried"
    # The name is free for a corrected deploy.
    _name_is_free_for_another_actor(rayx, "py-broken-model", tmp_path / "fixed", first)


def test_a_detached_actor_made_by_a_task_that_returned_at_once_is_there_later(
        rayx_mod, cluster, tmp_path):
    # A task deploys a detached named actor and returns before its constructor
    # ran: the task's worker ends, and the head finishes the actor.
    rayx = rayx_mod
    log = tmp_path / "constructed"

    @rayx.remote
    def deploy(path):
        import rayx as r
        r.remote(_Slow).options(name="py-deployed-by-task", lifetime="detached").remote(path, 2)
        return os.getpid()

    task_pid = rayx.get(deploy.remote(str(log)), timeout=60)
    h = rayx.get_actor("py-deployed-by-task")
    pid = rayx.get(h.pid.remote(), timeout=60)
    assert pid != task_pid
    assert int(log.read_text().split()[-1]) == pid
    rayx.kill(h)
    wait_until(lambda: not pid_alive(pid), 10, "the killed actor's worker to exit")


def test_ctrl_c_interrupts_placement_group_wait(cluster):
    _interrupt_blocked_driver(cluster, """
        import rayx
        from rayx.util import placement_group
        rayx.init()
        held = placement_group([{"special": 1}])
        assert held.wait(30)
        blocked = placement_group([{"special": 1}])  # waits for the first to go
        try:
            print("WAITING", flush=True)
            blocked.wait(60)
            print("RETURNED", flush=True)
        except KeyboardInterrupt:
            print("INTERRUPTED", flush=True)
        rayx.shutdown()
    """, "pg.wait")


def test_wait_on_no_refs_and_huge_timeouts(rayx_mod, tmp_path):
    rayx = rayx_mod
    assert rayx.wait([]) == ([], [])  # as Ray's
    assert rayx.wait([], num_returns=0, timeout=1) == ([], [])
    ref = rayx.put("value")
    # 1e10 s once overflowed the deadline into the past: a timeout at once.
    assert rayx.get(ref, timeout=1e10) == "value"
    assert rayx.get([ref], timeout=1e10) == ["value"]
    assert rayx.wait([ref], timeout=1e10) == ([ref], [])

    wait_for = rayx.remote(_wait_for_file)

    flag = os.path.join(str(tmp_path), "go")
    pending = wait_for.remote(flag)
    # Still waiting (not a timeout at once) a while later...
    assert rayx.wait([pending], timeout=0.3) == ([], [pending])
    import threading
    threading.Timer(0.5, lambda: open(flag, "w").close()).start()
    assert rayx.get(pending, timeout=1e10) == "done"
    assert rayx.wait([pending], timeout=float("inf")) == ([pending], [])


def test_an_actor_goes_when_its_creators_handle_goes_out_of_scope(rayx_mod, tmp_path):
    """Ray's actor lifetime: an unnamed actor is stopped once its creator's
    handle is gone (after the calls already made answer), so a loop that
    makes actors needing the cluster's only "special" resource keeps going;
    a handle passed elsewhere keeps its actor."""
    rayx = rayx_mod

    @rayx.remote(resources={"special": 1}, num_cpus=0)
    class Holder:
        def __init__(self, i):
            self.i = i

        def value(self):
            return self.i

        def slow(self):
            time.sleep(0.5)
            return self.i * 10

    for i in range(4):
        holder = Holder.remote(i)
        assert rayx.get(holder.value.remote(), timeout=30) == i
    # The last handle goes with calls still queued and running: they answer first.
    ref = holder.slow.remote()
    after = holder.value.remote()
    method = holder.value
    del holder
    assert rayx.get([ref, after], timeout=30) == [30, 3]
    assert rayx.get(method.remote(), timeout=30) == 3, "a method keeps its actor"
    del method

    def make(i):
        made = Holder.remote(i)
        assert rayx.get(made.value.remote(), timeout=30) == i
        return made

    # A call through a temporary handle is made before the handle goes.
    assert rayx.get(make(5).value.remote(), timeout=30) == 5
    assert rayx.get(make(6).value.remote(), timeout=30) == 6

    @rayx.remote
    def call_when_told(h, path):
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        value = rayx.get(h.value.remote())
        rayx.kill(h)
        return value

    path = os.path.join(str(tmp_path), "go")
    passed = Holder.remote(7)
    ref = call_when_told.remote(passed, path)
    del passed  # passed to a task: not stopped
    probe = Holder.remote(8).value.remote()
    ready, _ = rayx.wait([probe], timeout=1.0)
    assert not ready, "the passed actor was stopped: its resource went to the next one"
    open(path, "w").close()
    assert rayx.get(ref, timeout=30) == 7
    assert rayx.get(probe, timeout=30) == 8
