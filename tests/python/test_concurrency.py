"""Async actors, threaded actors and concurrency groups (Ray's "AsyncIO /
Concurrency for Actors") on the loopback cluster. Overlap is shown by what the
actor itself records (start and end times, counts of running calls), never by
wall-clock bounds."""

import asyncio
import os
import sys
import threading
import time

import pytest

from conftest import pid_alive, wait_until


def test_an_async_actor_runs_100_sleeps_at_once(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Sleeper:
        async def nap(self, i):
            start = time.monotonic()
            await asyncio.sleep(0.5)
            return i, start, time.monotonic()

    a = Sleeper.remote()
    results = rayx.get([a.nap.remote(i) for i in range(100)], timeout=60)
    assert [r[0] for r in results] == list(range(100))
    # Every call started before the first one ended: all 100 ran at once.
    assert max(r[1] for r in results) < min(r[2] for r in results)


def test_an_async_actors_max_concurrency_is_a_ceiling(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(max_concurrency=3)
    class Limited:
        def __init__(self):
            self.running = 0
            self.peak = 0

        async def work(self):
            self.running += 1
            self.peak = max(self.peak, self.running)
            await asyncio.sleep(0.05)
            self.running -= 1

        def peak_seen(self):
            return self.peak

    a = Limited.remote()
    rayx.get([a.work.remote() for _ in range(20)], timeout=60)
    assert rayx.get(a.peak_seen.remote()) == 3  # never more than 3, and 3 were reached


def test_sync_methods_of_an_async_actor_run_on_its_event_loop(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Gate:
        def __init__(self):
            self.event = asyncio.Event()  # used on the loop's thread only
            self.waiting = 0
            self.threads = set()

        async def wait(self):
            self.threads.add(threading.get_ident())
            self.waiting += 1
            await self.event.wait()
            return self.waiting

        def open_when(self, n):
            self.threads.add(threading.get_ident())
            if self.waiting >= n:
                self.event.set()
            return self.waiting

        def thread_count(self):
            return len(self.threads)

    a = Gate.remote()
    refs = [a.wait.remote() for _ in range(200)]
    # The sync method runs between the coroutines, which all wait at once
    # (more than Ray's default limit of a threaded actor; within the 256
    # calls one caller keeps in flight to an actor).
    wait_until(lambda: rayx.get(a.open_when.remote(200), timeout=30) >= 200, 30,
               "200 coroutines waiting at once")
    assert rayx.get(refs, timeout=30) == [200] * 200
    assert rayx.get(a.thread_count.remote()) == 1  # one thread: the event loop's


def test_coroutines_await_refs_and_other_actors_without_blocking_the_loop(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def double(x):
        return 2 * x

    @rayx.remote
    class Signal:
        def __init__(self):
            self.event = asyncio.Event()

        async def wait(self):
            await self.event.wait()
            return "signalled"

        def send(self):
            self.event.set()

    @rayx.remote
    class Caller:
        def __init__(self, signal):
            self.signal = signal
            self.pings = 0

        async def gather(self, n):
            one = await double.remote(21)
            many = await asyncio.gather(*[double.remote(i) for i in range(n)])
            return one, list(many)

        async def wait_for_signal(self):
            return await self.signal.wait.remote()

        async def ping(self):
            self.pings += 1
            return self.pings

    signal = Signal.remote()
    c = Caller.remote(signal)
    assert rayx.get(c.gather.remote(5), timeout=60) == (42, [0, 2, 4, 6, 8])
    waiting = c.wait_for_signal.remote()
    # While one coroutine awaits another actor, the loop serves other calls.
    assert rayx.get([c.ping.remote() for _ in range(5)], timeout=30) == [1, 2, 3, 4, 5]
    ready, _ = rayx.wait([waiting], timeout=0.2)
    assert not ready
    rayx.get(signal.send.remote())
    assert rayx.get(waiting, timeout=30) == "signalled"


def test_a_threaded_actor_runs_calls_on_max_concurrency_threads(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(max_concurrency=4)
    class Threaded:
        def __init__(self):
            self.barrier = threading.Barrier(4, timeout=20)
            self.lock = threading.Lock()
            self.running = 0
            self.peak = 0
            self.threads = set()

        def meet(self, i):
            # Passes only when 4 calls wait here at the same time.
            self.barrier.wait()
            return i

        def work(self):
            with self.lock:
                self.running += 1
                self.peak = max(self.peak, self.running)
                self.threads.add(threading.get_ident())
            time.sleep(0.05)  # the GIL is released: another call runs
            with self.lock:
                self.running -= 1

        def stats(self):
            return self.peak, len(self.threads)

    a = Threaded.remote()
    assert rayx.get([a.meet.remote(i) for i in range(4)], timeout=60) == [0, 1, 2, 3]
    rayx.get([a.work.remote() for _ in range(16)], timeout=60)
    peak, threads = rayx.get(a.stats.remote())
    assert peak == 4
    assert threads == 4


def test_a_threaded_actors_calls_finish_out_of_order(rayx_mod, tmp_path):
    rayx = rayx_mod

    @rayx.remote(max_concurrency=2)
    class Waiter:
        def __init__(self):
            self.event = threading.Event()

        def first(self):
            # Waits for a later call: possible only with calls running at once.
            assert self.event.wait(timeout=20), "the second call never ran"
            return "first"

        def second(self):
            self.event.set()
            return "second"

    a = Waiter.remote()
    first = a.first.remote()
    assert rayx.get(a.second.remote(), timeout=30) == "second"
    assert rayx.get(first, timeout=30) == "first"


def test_a_sync_actor_keeps_its_calls_in_order_on_one_thread(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Ordered:
        def __init__(self):
            self.seen = []
            self.threads = set()

        def add(self, i):
            self.threads.add(threading.get_ident())
            self.seen.append(i)

        def result(self):
            return self.seen, len(self.threads)

    a = Ordered.remote()
    for i in range(200):
        a.add.remote(i)
    seen, threads = rayx.get(a.result.remote(), timeout=30)
    assert seen == list(range(200))
    assert threads == 1


def test_concurrency_groups_of_an_async_actor_have_their_own_limits(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(concurrency_groups={"io": 2, "compute": 4})
    class Grouped:
        def __init__(self):
            self.running = {}
            self.peak = {}

        async def _run(self, tag):
            self.running[tag] = self.running.get(tag, 0) + 1
            self.peak[tag] = max(self.peak.get(tag, 0), self.running[tag])
            await asyncio.sleep(0.05)
            self.running[tag] -= 1

        @rayx.method(concurrency_group="io")
        async def read(self):
            await self._run("io")

        @rayx.method(concurrency_group="compute")
        async def compute(self):
            await self._run("compute")

        async def other(self, tag="default"):
            await self._run(tag)

        def peaks(self):
            return self.peak

    a = Grouped.remote()
    refs = [a.read.remote() for _ in range(10)]
    refs += [a.compute.remote() for _ in range(12)]
    refs += [a.other.remote() for _ in range(12)]
    # A method of the default group sent to "io" for this call only.
    refs += [a.other.options(concurrency_group="io").remote("io") for _ in range(6)]
    rayx.get(refs, timeout=60)
    assert rayx.get(a.peaks.remote()) == {"io": 2, "compute": 4, "default": 12}


def test_concurrency_groups_of_a_threaded_actor_have_their_own_pools(rayx_mod):
    rayx = rayx_mod

    # max_concurrency stays 1: the default group runs its calls one at a time.
    @rayx.remote(concurrency_groups={"io": 3})
    class Grouped:
        def __init__(self):
            self.lock = threading.Lock()
            self.running = {}
            self.peak = {}
            self.order = []

        def _run(self, tag, i=None):
            with self.lock:
                self.running[tag] = self.running.get(tag, 0) + 1
                self.peak[tag] = max(self.peak.get(tag, 0), self.running[tag])
                if i is not None:
                    self.order.append(i)
            time.sleep(0.03)
            with self.lock:
                self.running[tag] -= 1

        @rayx.method(concurrency_group="io")
        def read(self):
            self._run("io")

        def step(self, i):
            self._run("default", i)

        def stats(self):
            return self.peak, self.order

    a = Grouped.remote()
    refs = [a.read.remote() for _ in range(9)] + [a.step.remote(i) for i in range(9)]
    rayx.get(refs, timeout=60)
    peak, order = rayx.get(a.stats.remote())
    assert peak == {"io": 3, "default": 1}
    assert order == list(range(9))  # one thread: the default group's calls in order


def test_a_call_to_a_group_the_actor_does_not_have_fails_clearly(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(concurrency_groups={"io": 1})
    class Grouped:
        async def f(self):
            return 1

    @rayx.remote
    class Plain:
        def f(self):
            return 1

    for actor in (Grouped.remote(), Plain.remote()):
        with pytest.raises(ValueError, match="concurrency group 'nope' is not one of"):
            rayx.get(actor.f.options(concurrency_group="nope").remote(), timeout=30)
        assert rayx.get(actor.f.remote(), timeout=30) == 1  # the actor lives on


def test_bad_concurrency_options_are_refused_when_declared(rayx_mod):
    rayx = rayx_mod

    class A:
        pass

    with pytest.raises(ValueError, match="max_concurrency must be an int >= 1"):
        rayx.remote(max_concurrency=0)(A)
    with pytest.raises(TypeError, match="concurrency_groups must be a dict"):
        rayx.remote(concurrency_groups=["io"])(A)
    with pytest.raises(ValueError, match="concurrency group 'io' must have"):
        rayx.remote(concurrency_groups={"io": 0})(A)
    with pytest.raises(TypeError, match="concurrency_group must be a group's name"):
        rayx.method(concurrency_group=3)


def test_errors_in_async_methods_reach_the_caller(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Failing:
        async def fail(self, message):
            await asyncio.sleep(0)
            raise ValueError(message)

        async def ok(self):
            return "ok"

        def sync_fail(self):
            raise KeyError("sync")

    a = Failing.remote()
    with pytest.raises(ValueError, match="bad input") as info:
        rayx.get(a.fail.remote("bad input"), timeout=30)
    assert isinstance(info.value, rayx.exceptions.RayTaskError)
    assert "Failing.fail" in str(info.value)
    with pytest.raises(KeyError):
        rayx.get(a.sync_fail.remote(), timeout=30)
    assert rayx.get(a.ok.remote(), timeout=30) == "ok"


def test_a_coroutine_that_never_ends_holds_only_its_own_call(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Stuck:
        async def forever(self):
            await asyncio.Event().wait()

        async def ping(self):
            return os.getpid()

    a = Stuck.remote()
    stuck = [a.forever.remote() for _ in range(3)]
    pid = rayx.get(a.ping.remote(), timeout=30)
    ready, _ = rayx.wait(stuck, num_returns=1, timeout=0.2)
    assert not ready
    # Killing the actor ends them: the process goes, the calls fail.
    rayx.kill(a)
    for ref in stuck:
        with pytest.raises(rayx.exceptions.ActorDiedError):
            rayx.get(ref, timeout=30)
    wait_until(lambda: not pid_alive(pid),
               10, "the killed actor's process to exit")


@pytest.mark.parametrize("how", ["exit_actor", "sys.exit"])
def test_exiting_inside_an_async_method_ends_the_actor(rayx_mod, how):
    rayx = rayx_mod

    @rayx.remote
    class Exiting:
        async def pid(self):
            return os.getpid()

        async def wait(self):
            await asyncio.Event().wait()

        async def leave(self, how):
            await asyncio.sleep(0)
            if how == "exit_actor":
                from rayx.actor import exit_actor
                exit_actor()
            sys.exit(0)

    a = Exiting.remote()
    pid = rayx.get(a.pid.remote(), timeout=30)
    waiting = a.wait.remote()
    with pytest.raises(rayx.exceptions.ActorDiedError):
        rayx.get(a.leave.remote(how), timeout=30)
    with pytest.raises(rayx.exceptions.ActorDiedError):
        rayx.get(waiting, timeout=30)  # the calls that were running end with it
    with pytest.raises(rayx.exceptions.ActorDiedError):
        rayx.get(a.pid.remote(), timeout=30)
    wait_until(lambda: not pid_alive(pid),
               10, "the exited actor's process to end")


def test_exiting_inside_a_threaded_method_ends_the_actor(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(max_concurrency=2)
    class Exiting:
        def leave(self):
            sys.exit(0)

    a = Exiting.remote()
    with pytest.raises(rayx.exceptions.ActorDiedError):
        rayx.get(a.leave.remote(), timeout=30)


def test_concurrent_calls_have_their_own_task_ids(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Ids:
        async def task_id(self):
            before = rayx.get_runtime_context().get_task_id()
            await asyncio.sleep(0.1)  # the other calls start meanwhile
            return before, rayx.get_runtime_context().get_task_id()

    a = Ids.remote()
    pairs = rayx.get([a.task_id.remote() for _ in range(5)], timeout=30)
    assert all(before == after for before, after in pairs)
    assert len({before for before, _ in pairs}) == 5


def test_terminate_waits_for_the_calls_sent_before_it(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Slow:
        async def nap(self):
            await asyncio.sleep(0.3)
            return "done"

    # Several at once: the answers sent just before each exit must all
    # arrive (the exit waits for them to leave, the caller reads them before
    # it acts on the disconnect).
    actors = [Slow.remote() for _ in range(4)]
    naps = [a.nap.remote() for a in actors for _ in range(3)]
    for a in actors:
        a.__ray_terminate__.remote()
    assert rayx.get(naps, timeout=30) == ["done"] * 12
    for a in actors:
        with pytest.raises(rayx.exceptions.ActorDiedError):
            rayx.get(a.nap.remote(), timeout=30)
