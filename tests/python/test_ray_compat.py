"""Ray programs on rayx with only the import changed (`import rayx as ray`),
on the 3-node loopback cluster: implicit init, init()'s arguments and
context, Ray's exception classes across processes, Ray's module names,
ActorPool, Queue, the runtime context, cancel, kill with restart, method
options and scheduling options."""

import os
import pickle
import textwrap
import time

import pytest

import gates
from conftest import run_driver, wait_until


def _driver_ok(cluster, code, timeout=90):
    r = run_driver(cluster, textwrap.dedent(code), timeout=timeout)
    assert r.returncode == 0, f"driver failed:\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


# --- init ---------------------------------------------------------------------------

def test_first_use_initializes_as_ray_does(cluster):
    """get/put/remote/wait/nodes/get_actor connect on first use (the cluster
    `rayx start` runs here, found through RAYX_ADDRESS), and again after a
    shutdown."""
    r = _driver_ok(cluster, """
        import rayx as ray
        assert not ray.is_initialized()
        ref = ray.put(41)                       # put connects
        assert ray.is_initialized()
        job1 = ray.get_runtime_context().get_job_id()
        print("PUT", ray.get(ref) + 1)
        ray.shutdown()
        assert not ray.is_initialized()

        @ray.remote
        def f(x):
            return x * 2
        print("REMOTE", ray.get(f.remote(21)))  # .remote() connects (a new job)
        assert ray.get_runtime_context().get_job_id() != job1
        ray.shutdown()
        print("NODES", sum(n["Alive"] for n in ray.nodes()))   # nodes() connects
        ray.shutdown()
        try:
            ray.get_actor("nobody-has-this-name")                 # get_actor connects
        except ValueError:
            print("GET_ACTOR connected:", ray.is_initialized())
        ray.shutdown()
        ready, _ = ray.wait([ray.put(1)])
        print("WAIT", len(ready))
    """)
    assert "PUT 42" in r.stdout
    assert "REMOTE 42" in r.stdout
    assert "NODES 3" in r.stdout
    assert "GET_ACTOR connected: True" in r.stdout
    assert "WAIT 1" in r.stdout


def test_init_takes_the_memory_monitors_system_config_for_a_private_cluster_only(cluster):
    r = _driver_ok(cluster, """
        import warnings
        import rayx as ray
        try:
            ray.init(address="auto", _system_config={"memory_usage_threshold": "high"})
        except ValueError as e:
            print("BAD", "memory_usage_threshold" in str(e))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ray.init(address="auto", _system_config={"memory_usage_threshold": 0.9,
                                                     "memory_monitor_refresh_ms": 100})
        said = [str(w.message) for w in caught]
        print("JOINED", any("private cluster only" in m and "--memory-usage-threshold" in m
                            for m in said))
        print("NOT IGNORED", not any("rayx.init ignores" in m for m in said))
        ray.shutdown()
    """)
    for line in ("BAD True", "JOINED True", "NOT IGNORED True"):
        assert line in r.stdout, r.stdout


def test_init_takes_rays_arguments_and_warns_once_about_the_ignored(cluster):
    r = _driver_ok(cluster, """
        import logging, warnings, os
        import rayx as ray
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctx = ray.init(address="auto", include_dashboard=False, log_to_driver=False,
                           dashboard_port=8265, object_store_memory=10**9,
                           _system_config={"a": 1}, logging_level=logging.WARNING,
                           configure_logging=True)
        ours = [str(w.message) for w in caught if "rayx.init ignores" in str(w.message)]
        print("WARNINGS", len(ours))
        print("NAMED", all(n in ours[0] for n in ("dashboard_port", "_system_config")))
        # A store's size is the private cluster's; a joined one's is its own.
        print("STORE", any("object_store_memory" in str(w.message) and
                           "private cluster only" in str(w.message) for w in caught))
        print("QUIET", "include_dashboard" not in ours[0] and "log_to_driver" not in ours[0])
        print("LEVEL", logging.getLogger("rayx").level == logging.WARNING)
        print("ADDRESS", ctx["address"] == os.environ["RAYX_ADDRESS"],
              ctx.address_info["gcs_address"] == ctx["address"])
        print("NODE_ID", ctx["node_id"] in [n["NodeID"] for n in ray.nodes()])
        print("DASHBOARD", ctx.dashboard_url)
        try:
            ray.init()
        except RuntimeError as e:
            print("TWICE", "ignore_reinit_error" in str(e))
        print("REINIT", ray.init(ignore_reinit_error=True)["job_id"] == ctx["job_id"])
        ray.shutdown()
        with ray.init() as ctx2:              # Ray's context manager: shutdown at the end
            assert ray.is_initialized()
        print("WITH", ray.is_initialized())
    """)
    for line in ("WARNINGS 1", "NAMED True", "STORE True", "QUIET True", "LEVEL True",
                 "ADDRESS True True",
                 "NODE_ID True", "DASHBOARD None", "TWICE True", "REINIT True", "WITH False"):
        assert line in r.stdout, r.stdout


def test_init_refuses_unknown_arguments_like_ray(rayx_mod):
    ray = rayx_mod
    with pytest.raises(RuntimeError, match="Unknown keyword argument"):
        ray.init(no_such_argument=1)
    with pytest.raises(TypeError):
        ray.init(no_such_argument=1)
    with pytest.raises(RuntimeError, match="allow_multiple"):
        ray.init(allow_multiple=True)
    # Still connected: a refused init changes nothing.
    assert ray.get(ray.put(5)) == 5


def test_init_auto_without_a_cluster_is_a_connection_error(tmp_path):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("RAYX_ADDRESS", "RAYX_TOKEN")}
    env["RAYX_TEMP_DIR"] = str(tmp_path)  # no session there
    code = textwrap.dedent(f"""
        import rayx as ray
        try:
            ray.init(address="auto", _temp_dir={str(tmp_path)!r})
        except ConnectionError as e:
            print("REFUSED", "rayx start" in str(e))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert "REFUSED True" in r.stdout


def test_namespaces_scope_actor_names(rayx_mod, cluster):
    ray = rayx_mod

    @ray.remote
    class Named:
        def where(self):
            ctx = ray.get_runtime_context()
            return ctx.namespace, ctx.get_actor_name()

    a = Named.options(name="svc", namespace="team-a", lifetime="detached").remote()
    assert ray.get(a.where.remote()) == ("team-a", "svc")
    assert ray.get(ray.get_actor("svc", namespace="team-a").where.remote()) == ("team-a", "svc")
    with pytest.raises(ValueError):
        ray.get_actor("svc")  # not in the shared (no) namespace
    # A job in that namespace finds it by its bare name, in its tasks too.
    r = _driver_ok(cluster, """
        import rayx as ray
        ray.init(namespace="team-a")
        print("DRIVER", ray.get(ray.get_actor("svc").where.remote()))

        @ray.remote
        def look():
            return ray.get(ray.get_actor("svc").where.remote())
        print("TASK", ray.get(look.remote()))
        print("NAMES", ray.util.list_named_actors())
    """)
    assert "DRIVER ('team-a', 'svc')" in r.stdout
    assert "TASK ('team-a', 'svc')" in r.stdout
    assert "NAMES ['svc']" in r.stdout
    ray.kill(a)


# --- exceptions ------------------------------------------------------------------------

def test_exception_classes_follow_rays_hierarchy_and_pickle():
    from rayx import exceptions as ex
    assert ex.RayxError is ex.RayError and ex.RayxTaskError is ex.RayTaskError
    expected = {
        ex.RayTaskError: ex.RayError, ex.RayActorError: ex.RayError,
        ex.ActorDiedError: ex.RayActorError, ex.ActorUnavailableError: ex.RayActorError,
        ex.GetTimeoutError: TimeoutError, ex.ObjectLostError: ex.RayError,
        ex.OwnerDiedError: ex.ObjectLostError, ex.ObjectFetchTimedOutError: ex.ObjectLostError,
        ex.ReferenceCountingAssertionError: AssertionError,
        ex.WorkerCrashedError: ex.RayError, ex.TaskCancelledError: ex.RayError,
        ex.NodeDiedError: ex.RayError, ex.RaySystemError: ex.RayError,
        ex.ObjectStoreFullError: ex.RayError, ex.OutOfMemoryError: ex.RayError,
        ex.RuntimeEnvSetupError: ex.RayError, ex.TaskUnschedulableError: ex.RayError,
        ex.ActorUnschedulableError: ex.RayError, ex.RayChannelTimeoutError: TimeoutError,
        ex.InfeasibleError: ex.TaskUnschedulableError,
    }
    for cls, base in expected.items():
        assert issubclass(cls, base), (cls, base)
    made = [ex.ObjectLostError("ab12", "", ""), ex.OwnerDiedError("ab12", "", ""),
            ex.TaskCancelledError("t1"), ex.ActorDiedError(), ex.GetTimeoutError("late"),
            ex.RaySystemError("boom"), ex.NodeDiedError("gone"), ex.OutOfMemoryError("oom"),
            ex.ActorUnavailableError("restarting", "a1"), ex.RuntimeEnvSetupError("bad env"),
            ex.WorkerCrashedError._with_message("rayx's message", extra=3)]
    for e in made:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e), e
        assert vars(back) == vars(e)
    assert pickle.loads(pickle.dumps(made[0])).object_ref_hex == "ab12"


def test_rayx_error_kinds_are_the_ones_cpp_names():
    from rayx import _core, exceptions as ex
    # One table: C++'s TaskErrorKind names, which the mapping uses.
    assert _core.TASK_ERROR_KINDS[0] == "Exception"
    assert {"WorkerCrashed", "ActorDied", "ObjectLost", "OutOfMemory",
            "ObjectStoreFullError"} <= set(_core.TASK_ERROR_KINDS)
    assert set(ex._KINDS) <= set(_core.TASK_ERROR_KINDS)
    err = ex.from_core("ActorDied", "the actor's worker died", "Counter.add", "10.0.0.7")
    assert isinstance(err, ex.ActorDiedError) and "Counter.add failed on node 10.0.0.7" in str(err)
    assert type(ex.from_core("std::bad_alloc", "no memory", "f", "")) is ex.RaySystemError


def test_errors_raised_in_tasks_are_caught_by_rays_names(rayx_mod, tmp_path):
    ray = rayx_mod
    from rayx import exceptions as ex

    @ray.remote
    def raises(kind):
        if kind == "value":
            raise ValueError("bad 17")
        if kind == "lost":
            raise ex.ObjectLostError("feed", "", "")
        if kind == "timeout":
            ray.get(slow.remote(), timeout=0.01)

    @ray.remote
    def slow():
        gates.wait_for_file(str(tmp_path / "go"))

    with pytest.raises(ex.RayTaskError) as info:
        ray.get(raises.remote("value"))
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err.cause, ValueError)
    assert "bad 17" in str(err) and isinstance(err.as_instanceof_cause(), ValueError)
    back = pickle.loads(pickle.dumps(err))  # the dual class pickles as itself
    assert isinstance(back, ValueError) and isinstance(back, ex.RayTaskError)
    with pytest.raises(ex.ObjectLostError) as lost:
        ray.get(raises.remote("lost"))
    assert lost.value.object_ref_hex == "feed"
    with pytest.raises(ex.GetTimeoutError):
        ray.get(raises.remote("timeout"))
    (tmp_path / "go").touch()

    @ray.remote(max_retries=0)
    def crash():
        os._exit(3)

    with pytest.raises(ex.WorkerCrashedError):
        ray.get(crash.remote())

    @ray.remote
    class A:
        def ping(self):
            return 1

    a = A.remote()
    ray.get(a.ping.remote())
    ray.kill(a)
    with pytest.raises(ex.ActorDiedError) as died:
        ray.get(a.ping.remote())
    assert isinstance(died.value, ex.RayActorError)


# --- module names ------------------------------------------------------------------------

def test_rays_module_names_import():
    import rayx as ray
    import rayx.actor
    import rayx.cloudpickle
    import rayx.remote_function
    import rayx.util.queue
    from rayx.actor import ActorClass, ActorHandle, exit_actor  # noqa: F401
    from rayx.remote_function import RemoteFunction
    from rayx.runtime_env import RuntimeEnv
    from rayx.util import ActorPool  # noqa: F401
    from rayx.util.queue import Empty, Full, Queue  # noqa: F401
    assert ray.actor.ActorHandle is ray.ActorHandle and RemoteFunction is ray.RemoteFunction
    assert ray.ObjectRef is rayx._api.ObjectRef
    import cloudpickle
    assert rayx.cloudpickle is cloudpickle
    assert ray.cloudpickle.loads(ray.cloudpickle.dumps(lambda x: x + 1))(1) == 2
    assert ray.get_runtime_context is rayx.runtime_context.get_runtime_context
    with pytest.raises(ValueError, match="pip"):
        RuntimeEnv(pip=["requests"])
    from rayx._raylet import ObjectRefGenerator
    assert ObjectRefGenerator is ray.ObjectRefGenerator  # Ray's import place works too
    with pytest.raises(TypeError, match="non-actor|inside an actor"):
        exit_actor()


# --- ActorPool and Queue --------------------------------------------------------------------

def test_actor_pool_maps_in_order_and_unordered(rayx_mod, tmp_path):
    ray = rayx_mod
    from rayx.util import ActorPool

    @ray.remote
    class Doubler:
        def double(self, n):
            return 2 * n

        def gate(self, path):
            gates.wait_for_file(path)
            return path

    actors = [Doubler.remote(), Doubler.remote()]
    pool = ActorPool(actors)
    assert list(pool.map(lambda a, v: a.double.remote(v), range(7))) == [2 * v for v in range(7)]
    assert sorted(pool.map_unordered(lambda a, v: a.double.remote(v), range(7))) == \
        [2 * v for v in range(7)]
    # The first submission blocks on a file: unordered returns the others first.
    first = str(tmp_path / "first")
    pool.submit(lambda a, v: a.gate.remote(v), first)
    pool.submit(lambda a, v: a.double.remote(v), 21)
    pool.submit(lambda a, v: a.double.remote(v), 50)  # waits for a free actor
    assert not pool.has_free()
    assert pool.get_next_unordered(timeout=30) == 42
    assert pool.get_next_unordered(timeout=30) == 100
    with pytest.raises(TimeoutError):
        pool.get_next_unordered(timeout=0.2)
    open(first, "w").close()
    assert pool.get_next_unordered(timeout=30) == first
    assert not pool.has_next()
    with pytest.raises(StopIteration):
        pool.get_next()
    # Ordered results, idle actors taken out and pushed back.
    for v in range(4):
        pool.submit(lambda a, v: a.double.remote(v), v)
    assert [pool.get_next(timeout=30) for _ in range(4)] == [0, 2, 4, 6]
    idle = pool.pop_idle()
    assert idle is not None and pool.has_free()
    with pytest.raises(ValueError, match="already belongs"):
        pool.push(actors[0] if actors[0] is not idle else actors[1])
    pool.push(idle)
    assert list(pool.map(lambda a, v: a.double.remote(v), [5])) == [10]


def test_queue_between_driver_and_tasks(rayx_mod):
    ray = rayx_mod
    from rayx.util.queue import Empty, Full, Queue

    q = Queue(maxsize=3)
    assert q.empty() and not q.full() and q.size() == 0 and len(q) == 0

    @ray.remote
    def consumer(queue, n):
        return [queue.get(block=True, timeout=30) for _ in range(n)]

    @ray.remote
    def producer(queue, items):
        for i in items:
            queue.put(i, timeout=30)  # blocks while the queue is full
        return True

    got = consumer.remote(q, 8)
    assert ray.get(producer.remote(q, list(range(8))), timeout=60)
    assert ray.get(got, timeout=60) == list(range(8))  # FIFO, through a bounded queue
    q.put_nowait("a")
    q.put_nowait_batch(["b", "c"])
    assert q.full() and q.qsize() == 3
    with pytest.raises(Full):
        q.put_nowait("d")
    start = time.monotonic()
    with pytest.raises(Full):
        q.put("d", timeout=0.3)
    assert time.monotonic() - start >= 0.3
    assert q.get_nowait_batch(2) == ["a", "b"]
    with pytest.raises(Empty):
        q.get_nowait_batch(5)
    assert q.get() == "c"
    with pytest.raises(Empty):
        q.get_nowait()
    with pytest.raises(Empty):
        q.get(timeout=0.2)
    with pytest.raises(ValueError):
        q.get(timeout=-1)

    import asyncio

    async def roundtrip():
        await q.put_async("x")
        return await q.get_async(timeout=10)

    assert asyncio.run(roundtrip()) == "x"
    q.shutdown()


# --- runtime context ---------------------------------------------------------------------

def test_runtime_context_in_driver_task_and_actor(rayx_mod):
    ray = rayx_mod
    ctx = ray.get_runtime_context()
    job = ctx.get_job_id()
    assert ctx.get_task_id() is None and ctx.get_actor_id() is None
    assert ctx.get_node_id() in [n["NodeID"] for n in ray.nodes()]
    assert ctx.get_assigned_resources() == {}

    @ray.remote(num_cpus=2)
    def in_task():
        c = ray.get_runtime_context()
        return (c.get_job_id(), c.get_task_id(), c.get_actor_id(), c.get_node_id(),
                c.get_worker_id(), c.get_assigned_resources(), os.environ["RAYX_NODE_IP"])

    got_job, task_id, actor_id, node_id, worker_id, resources, ip = ray.get(in_task.remote())
    assert got_job == job and actor_id is None and task_id and worker_id
    assert resources == {"CPU": 2.0}
    node_ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    assert node_ips[node_id] == ip
    t1, t2 = ray.get([in_task.remote(), in_task.remote()])
    assert t1[1] != t2[1]  # each call its own task id

    @ray.remote(num_gpus=1)
    class Holder:
        def who(self):
            c = ray.get_runtime_context()
            return (c.get_actor_id(), c.get_accelerator_ids(), c.get_assigned_resources(),
                    c.was_current_actor_reconstructed, c.get_job_id())

    h = Holder.remote()
    actor_id, accel, resources, restarted, got_job = ray.get(h.who.remote())
    assert actor_id == h._actor_id.hex() and got_job == job
    assert len(accel["GPU"]) == 1 and resources == {"GPU": 1.0}
    assert restarted is False
    ray.kill(h)


def test_kill_without_no_restart_restarts_the_actor(rayx_mod):
    ray = rayx_mod

    @ray.remote(max_restarts=1)
    class Phoenix:
        def state(self):
            return os.getpid(), ray.get_runtime_context().was_current_actor_reconstructed

    p = Phoenix.remote()
    pid1, restarted1 = ray.get(p.state.remote())
    assert restarted1 is False
    ray.kill(p, no_restart=False)

    def restarted():
        try:
            return ray.get(p.state.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return None  # a call that met the exit
    pid2, restarted2 = wait_until(restarted, 60, "the actor's restart")
    assert pid2 != pid1 and restarted2 is True
    ray.kill(p)  # no_restart=True: for good
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(p.state.remote(), timeout=30)


def test_get_or_create_ready_and_sys_exit(rayx_mod):
    ray = rayx_mod

    @ray.remote
    class Greeter:
        def __init__(self, text):
            self.text = text

        def hello(self):
            return self.text

        def leave(self):
            import sys
            sys.exit(0)

    a = Greeter.options(name="compat-g1").get_or_create("Hi Alice")
    assert ray.get(a.__ray_ready__.remote()) is None
    b = Greeter.options(name="compat-g1").get_or_create("Hi Dave")  # exists: args ignored
    assert ray.get(b.hello.remote()) == "Hi Alice"
    with pytest.raises(ValueError, match="needs a name"):
        Greeter.get_or_create("x")
    # sys.exit() in a method ends the actor (Ray's intentional exit).
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(a.leave.remote(), timeout=30)
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(a.hello.remote(), timeout=30)


def test_util_metrics_keep_values_in_process():
    from rayx.util.metrics import Counter, Gauge, Histogram
    with pytest.warns(UserWarning, match="does not export"):
        c = Counter("requests", description="d", tag_keys=("actor",))
    c.set_default_tags({"actor": "a"})
    c.inc()
    c.inc(2)
    assert c.value() == 3.0
    g = Gauge("size")
    g.set(7)
    assert g.value() == 7
    h = Histogram("latency", boundaries=[0.1, 1])
    h.observe(0.5)
    assert h.value() == [0.5]
    with pytest.raises(ValueError):
        Counter("bad", tag_keys=("k",)).inc()  # the tag's value is missing


def test_method_options_and_exit_actor(rayx_mod):
    ray = rayx_mod
    from rayx.actor import exit_actor

    @ray.remote
    class M:
        @ray.method(num_returns=2, concurrency_group="io")
        def pair(self):
            return 1, 2

        def triple(self):
            return 1, 2, 3

        def leave(self):
            exit_actor()

    m = M.remote()
    a, b = m.pair.remote()
    assert ray.get([a, b]) == [1, 2]
    refs = m.triple.options(num_returns=3).remote()
    assert ray.get(refs) == [1, 2, 3]
    assert M._cls.pair.__rayx_concurrency_group__ == "io"
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(m.leave.remote(), timeout=30)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(m.triple.remote(), timeout=30)
    with pytest.raises(TypeError, match="unknown option"):
        ray.method(no_such=1)


# --- cancel, misc ------------------------------------------------------------------------

def test_cancel_makes_get_and_wait_raise_task_cancelled(rayx_mod, tmp_path):
    ray = rayx_mod
    gate = tmp_path / "gate"

    @ray.remote
    def blocked(path):
        gates.wait_for_file(path)
        return "ran"

    ref = blocked.remote(str(gate))
    ray.cancel(ref)
    ready, not_ready = ray.wait([ref], timeout=5)
    assert ready == [ref] and not_ready == []
    start = time.monotonic()
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(ref)
    assert time.monotonic() - start < 5
    gate.touch()  # lets the task, which rayx does not stop, finish
    finished = blocked.remote(str(gate))
    assert ray.get(finished, timeout=30) == "ran"
    ray.cancel(finished)  # already finished: nothing happens (Ray's rule)
    assert ray.get(finished) == "ran"

    gate2 = tmp_path / "gate2"
    forced = blocked.remote(str(gate2))
    ray.cancel(forced, force=True)
    with pytest.raises(ray.exceptions.WorkerCrashedError):  # Ray's documented outcome
        ray.get(forced)
    gate2.touch()

    @ray.remote
    class A:
        def f(self, path):
            gates.wait_for_file(path)
            return 1

    a = A.remote()
    gate3 = str(tmp_path / "gate3")
    with pytest.raises(ValueError, match="actor"):
        ray.cancel(a.f.remote(gate3), force=True)
    call = a.f.remote(gate3)
    ray.cancel(call)
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(call)
    with pytest.raises(ray.exceptions.RayTaskError):  # as Ray's cancelled actor calls
        ray.get(call)
    open(gate3, "w").close()
    ray.kill(a)


def test_gpu_ids_resources_and_timeline(rayx_mod, tmp_path):
    ray = rayx_mod
    assert ray.get_gpu_ids() == []
    # (A resource all held now is absent from available_resources, as in Ray.)
    assert ray.available_resources().get("CPU", 0) <= ray.cluster_resources()["CPU"]
    with pytest.warns(UserWarning, match="timeline"):
        assert ray.timeline() == []
    out = tmp_path / "trace.json"
    with pytest.warns(UserWarning):
        ray.timeline(filename=str(out))
    assert out.read_text() == "[]"


# --- scheduling options -----------------------------------------------------------------------

def test_placement_group_capture_table_and_current_group(rayx_mod):
    ray = rayx_mod
    from rayx.util import (get_current_placement_group, placement_group, placement_group_table,
                           remove_placement_group)
    from rayx.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK", name="compat-pg")
    assert ray.get(pg.ready(), timeout=30)
    info = placement_group_table(pg)
    assert info["state"] == "CREATED" and info["name"] == "compat-pg"
    assert info["bundles"] == {0: {"CPU": 1.0}, 1: {"CPU": 1.0}}
    assert pg.id in placement_group_table()
    assert ray.util.get_placement_group("compat-pg").id == pg.id
    assert get_current_placement_group() is None  # a driver is in no group

    @ray.remote(num_cpus=1)
    def child():
        current = get_current_placement_group()
        return None if current is None else current.id

    @ray.remote(num_cpus=1)
    def parent(explicit_out):
        current = get_current_placement_group()
        kid = child.options(scheduling_strategy=PlacementGroupSchedulingStrategy(None)) \
            if explicit_out else child
        return current.id, ray.get(kid.remote(), timeout=60)

    capture = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
    assert ray.get(parent.options(scheduling_strategy=capture).remote(False), timeout=60) == \
        (pg.id, pg.id)
    assert ray.get(parent.options(scheduling_strategy=capture).remote(True), timeout=60) == \
        (pg.id, None)
    plain = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    assert ray.get(parent.options(scheduling_strategy=plain).remote(False), timeout=60) == \
        (pg.id, None)
    remove_placement_group(pg)
    from rayx.util import get_placement_group_state
    wait_until(lambda: get_placement_group_state(pg)[0] == "REMOVED", 10,
               "the removed group's state")
    assert placement_group_table(pg).get("state", "REMOVED") == "REMOVED"


def test_node_affinity_and_label_selector(rayx_mod):
    ray = rayx_mod
    from rayx.util.scheduling_strategies import (In, NodeAffinitySchedulingStrategy,
                                                 NodeLabelSchedulingStrategy)
    target = next(n for n in ray.nodes() if n["NodeManagerAddress"] == "127.0.0.3")

    @ray.remote
    def where():
        return os.environ["RAYX_NODE_IP"], ray.get_runtime_context().get_node_id()

    strategy = NodeAffinitySchedulingStrategy(node_id=target["NodeID"], soft=False)
    assert ray.get(where.options(scheduling_strategy=strategy).remote()) == \
        ("127.0.0.3", target["NodeID"])
    # No node has this label: the scheduler (not Python) refuses the task.
    with pytest.raises(ray.exceptions.TaskUnschedulableError, match="zone"):
        ray.get(where.options(label_selector={"zone": "nowhere"}).remote(), timeout=60)
    with pytest.raises(ValueError, match="equality"):
        where.options(label_selector={"zone": "!a"}).remote()
    with pytest.raises(ValueError, match="equality"):
        NodeLabelSchedulingStrategy(hard={"zone": In("a", "b")})
