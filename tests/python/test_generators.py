"""Generator tasks and actor methods (Ray's streaming and dynamic generators)
on a real loopback cluster: items reach the caller while the generator still
runs, errors come after the items yielded before them, a worker that dies
mid-stream ends it with that error, and items nobody took go with the
generator (entries and stored copies)."""

import asyncio
import glob
import os
import signal
import time

import pytest

import gates
from conftest import wait_until


_wait_for_file = gates.wait_for_file


def _item_id(return_id, index):
    """The object id of a generator's item (protocol::GeneratorItemId)."""
    head, tail = return_id[:-16], int(return_id[-16:], 16)
    return head + format(tail ^ ((index + 1) << 40), "016x")


def _stored_copies(job, object_id):
    return glob.glob(f"/dev/shm/**/{job}-{object_id}", recursive=True)


def test_a_streaming_task_hands_over_items_while_it_still_runs(rayx_mod, tmp_path):
    rayx = rayx_mod
    gate = str(tmp_path / "gate")

    @rayx.remote
    def numbers(path):
        yield 1
        _wait_for_file(path)  # the caller must have item 0 by now
        yield 2

    gen = numbers.remote(gate)
    assert isinstance(gen, rayx.ObjectRefGenerator)
    first = next(gen)
    assert rayx.get(first, timeout=60) == 1
    ready, not_ready = rayx.wait([gen], timeout=0)
    assert ready == [] and not_ready == [gen], "item 1 cannot have come: the gate is shut"
    assert rayx.wait([gen.completed()], timeout=0)[0] == [], "the task still runs"
    open(gate, "w").close()
    ready, _ = rayx.wait([gen], timeout=60)
    assert ready == [gen]
    assert rayx.get(next(gen), timeout=60) == 2
    with pytest.raises(StopIteration):
        next(gen)
    with pytest.raises(StopIteration):
        next(gen)
    assert rayx.get(gen.completed(), timeout=60) == 2, "the call's value is its item count"


def test_the_error_comes_after_the_items_yielded_before_it(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def fails_at_two():
        yield "a"
        yield "b"
        raise ValueError("no third item")

    refs = list(fails_at_two.remote())
    assert len(refs) == 3, refs
    assert rayx.get(refs[:2], timeout=60) == ["a", "b"]
    with pytest.raises(ValueError, match="no third item"):
        rayx.get(refs[2], timeout=60)
    with pytest.raises(rayx.exceptions.RayTaskError):
        rayx.get(refs[2], timeout=60)


def test_num_returns_streaming_and_a_non_generator_is_a_clear_error(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_returns="streaming")
    def not_a_generator():
        return 5

    refs = list(not_a_generator.remote())
    assert len(refs) == 1
    with pytest.raises(TypeError, match="make it a generator function"):
        rayx.get(refs[0], timeout=60)
    with pytest.raises(ValueError, match="num_returns must be"):
        rayx.remote(num_returns="many")(lambda: 1)


def test_sync_async_and_threaded_actor_methods_stream(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    class Sync:
        def count(self, n):
            for i in range(n):
                yield i

    @rayx.remote
    class Async:
        async def count(self, n):
            for i in range(n):
                await asyncio.sleep(0)
                yield i * 10

    @rayx.remote(max_concurrency=3)
    class Threaded:
        def count(self, n):
            for i in range(n):
                yield -i

    for cls, scale in ((Sync, 1), (Async, 10), (Threaded, -1)):
        actor = cls.remote()
        values = [rayx.get(ref, timeout=60) for ref in actor.count.remote(4)]
        assert values == [i * scale for i in range(4)], cls
        # Explicit, as Ray's @ray.method(num_returns="streaming") or .options():
        gen = actor.count.options(num_returns="streaming").remote(2)
        assert [rayx.get(r, timeout=60) for r in gen] == [0, 1 * scale]


def test_async_for_in_a_driver_runs_two_streams_at_once(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def letters(prefix):
        for i in range(3):
            yield f"{prefix}{i}"

    async def consume(prefix):
        return [await ref async for ref in letters.remote(prefix)]

    async def main():
        return await asyncio.gather(consume("x"), consume("y"))

    assert asyncio.run(main()) == [["x0", "x1", "x2"], ["y0", "y1", "y2"]]


def test_dynamic_generators_give_a_generator_of_refs(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_returns="dynamic")
    def split(values, size):
        for i in range(0, len(values), size):
            yield values[i:i + size]

    ref = split.remote(list(range(10)), 4)
    assert isinstance(ref, rayx.ObjectRef)
    gen = rayx.get(ref, timeout=60)
    assert isinstance(gen, rayx.DynamicObjectRefGenerator) and len(gen) == 3
    assert [rayx.get(r, timeout=60) for r in gen] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert rayx.get(ref) is gen, "a second get gives the same refs"


def test_large_items_from_another_node_and_what_dropping_the_generator_frees(rayx_mod):
    rayx = rayx_mod
    import numpy as np

    @rayx.remote(resources={"special": 0.01})  # on 127.0.0.3: its items are pulled
    def blocks(n):
        for i in range(n):
            yield np.full(64 * 1024, i, dtype=np.int64)  # 512 KiB: stored on that node

    baseline = rayx._core.object_count()
    job = rayx.get_runtime_context().get_job_id()
    gen = blocks.remote(4)
    first = next(gen)
    assert rayx.get(first, timeout=60)[0] == 0
    call_id = gen._core.id
    rayx.get(gen.completed(), timeout=60)  # every item arrived (three unclaimed)
    items = [_item_id(call_id, i) for i in range(4)]
    assert first.hex() == items[0]
    assert all(_stored_copies(job, i) for i in items), "each item is stored on its node"
    assert rayx._core.object_count() == baseline + 5, "the call's result and its 4 items"
    del gen
    wait_until(lambda: rayx._core.object_count() == baseline + 1, 10,
               "the generator and its unclaimed items to go (the taken one stays)")
    wait_until(lambda: not any(_stored_copies(job, i) for i in items[1:]), 10,
               "the unclaimed items' stored copies to be deleted")
    assert rayx.get(first, timeout=60)[0] == 0, "the item taken is still readable"
    del first
    wait_until(lambda: rayx._core.object_count() == baseline, 10, "the taken item to go")
    wait_until(lambda: not _stored_copies(job, items[0]), 10, "its stored copy to go")


def test_a_worker_killed_mid_stream_ends_it_with_worker_crashed(rayx_mod, tmp_path):
    rayx = rayx_mod
    gate = str(tmp_path / "never")

    @rayx.remote(max_retries=3)  # generators are never retried, whatever this says
    def pid_then_wait(path):
        yield os.getpid()
        _wait_for_file(path, timeout=120)
        yield "never"

    baseline = rayx._core.object_count()
    gen = pid_then_wait.remote(gate)
    pid = rayx.get(next(gen), timeout=60)
    os.kill(pid, signal.SIGKILL)
    last = next(gen)
    with pytest.raises(rayx.exceptions.WorkerCrashedError):
        rayx.get(last, timeout=60)
    with pytest.raises(StopIteration):
        next(gen)
    del gen, last
    wait_until(lambda: rayx._core.object_count() == baseline, 10,
               "the generator's entries to go (none left pending)")


def test_a_dynamic_generator_passed_to_a_task_gives_it_the_items(rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_returns="dynamic")
    def upto(n, fail):
        for i in range(1, n + 1):
            yield i
        if fail:
            raise KeyError("after the last")

    @rayx.remote
    def total(gen):
        return sum(rayx.get(ref) for ref in gen)

    ref = upto.remote(3, False)
    assert rayx.get(total.remote(ref), timeout=60) == 6, "as the ref"
    assert rayx.get(total.remote(rayx.get(ref)), timeout=60) == 6, "as the generator"
    gen = rayx.get(upto.remote(2, True), timeout=60)
    assert len(gen) == 3, "the error is the last item"
    first, second, error = gen
    assert rayx.get([first, second], timeout=60) == [1, 2]
    with pytest.raises(KeyError):
        rayx.get(error, timeout=60)


def test_a_generator_function_with_num_returns_n_fills_its_returns(rayx_mod):
    rayx = rayx_mod

    @rayx.remote
    def two_then_fail():
        yield "a"
        yield "b"
        raise RuntimeError("after two")

    a, b, c, d = two_then_fail.options(num_returns=4).remote()
    assert rayx.get([a, b], timeout=60) == ["a", "b"]
    for ref in (c, d):
        with pytest.raises(RuntimeError, match="after two"):
            rayx.get(ref, timeout=60)
    # As Ray documents: an error after every return was made is only logged.
    a, b = two_then_fail.options(num_returns=2).remote()
    assert rayx.get([a, b], timeout=60) == ["a", "b"]
    a, b, c = two_then_fail.options(num_returns=3).remote()
    assert rayx.get([a, b], timeout=60) == ["a", "b"]
    with pytest.raises(RuntimeError):
        rayx.get(c, timeout=60)
