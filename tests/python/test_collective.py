"""rayx.util.collective from Python on the 3-node loopback cluster: every
operation with exact values over Gloo, groups made from the driver and inside
actors, clear errors for bad tensors, and a dead or absent rank failing the
others within the deadline (naming it) instead of hanging."""

import time

import numpy as np
import pytest

import rayx.util.collective as col
from conftest import wait_until


class Member:
    """A rank: runs the operations it is asked to and returns what it saw."""

    def __init__(self):
        import os
        self.pid = os.getpid()

    def node(self):
        import os
        return os.environ.get("RAYX_NODE_IP", "")

    def join(self, world_size, rank, group):
        col.init_collective_group(world_size, rank, group_name=group)
        return col.get_rank(group), col.get_collective_group_size(group)

    def every_op(self, group):
        rank = col.get_rank(group)
        n = col.get_collective_group_size(group)
        out = {"rank": rank, "size": n}
        x = np.arange(6, dtype=np.float32) + 10 * rank
        col.allreduce(x, group_name=group)
        out["allreduce"] = x.tolist()
        m = np.array([rank + 1], dtype=np.int64)
        col.allreduce(m, group_name=group, op=col.ReduceOp.MAX)
        out["max"] = int(m[0])
        gathered = [np.zeros(2, dtype=np.int32) for _ in range(n)]
        col.allgather(gathered, np.array([rank, rank * rank], dtype=np.int32), group_name=group)
        out["allgather"] = [g.tolist() for g in gathered]
        b = np.full(3, 7.5 if rank == 1 else -1.0, dtype=np.float64)
        col.broadcast(b, src_rank=1, group_name=group)
        out["broadcast"] = b.tolist()
        r = np.array([rank, 1], dtype=np.int64)
        col.reduce(r, dst_rank=0, group_name=group)
        out["reduce"] = r.tolist()
        rs = np.zeros(2, dtype=np.float64)
        col.reducescatter(rs, [np.full(2, rank + i, dtype=np.float64) for i in range(n)],
                          group_name=group)
        out["reducescatter"] = rs.tolist()
        # A ring of send/recv: even ranks send first, odd ranks receive first.
        got = np.zeros(4, dtype=np.float32)
        mine = np.full(4, rank, dtype=np.float32)
        right, left = (rank + 1) % n, (rank - 1) % n
        if rank % 2 == 0:
            col.send(mine, right, group_name=group)
            col.recv(got, left, group_name=group)
        else:
            col.recv(got, left, group_name=group)
            col.send(mine, right, group_name=group)
        out["recv"] = got.tolist()
        col.barrier(group_name=group)
        return out

    def torch_allreduce(self, group):
        import torch
        t = torch.ones(3, dtype=torch.float32) * (col.get_rank(group) + 1)
        col.allreduce(t, group_name=group)
        return t.tolist()

    def allreduce_timed(self, group):
        start = time.monotonic()
        try:
            col.allreduce(np.ones(4, dtype=np.float32), group_name=group)
            return ("ok", time.monotonic() - start, -1)
        except col.CollectiveError as e:
            return (str(e), time.monotonic() - start, e.failed_rank)

    def leave(self, group):
        col.destroy_collective_group(group)
        return col.is_group_initialized(group)

    def get_pid(self):
        return self.pid


def _members(rayx, n):
    cls = rayx.remote(Member)
    actors = [cls.options(scheduling_strategy="SPREAD").remote() for _ in range(n)]
    rayx.get([a.node.remote() for a in actors], timeout=30)
    return actors


def test_the_nccl_backend_is_offered_whenever_librayx_has_it():
    """rayx._core.collective.HAVE_NCCL (what backend='nccl' checks first) is
    true exactly when librayx links NCCL: a build that compiled the backend but
    not the flag would refuse every NCCL group in Python. Checked in a fresh
    interpreter that loads nothing but rayx._core (torch would map its own
    libnccl)."""
    import subprocess
    import sys
    code = ("import rayx._core as c\n"
            "nccl = any('libnccl.so' in line for line in open('/proc/self/maps'))\n"
            "print(c.collective.HAVE_NCCL, nccl)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    have, loaded = r.stdout.split()
    assert have == loaded, r.stdout


def test_every_operation_over_four_actors_from_a_driver_made_group(rayx_mod):
    rayx = rayx_mod
    actors = _members(rayx, 4)
    assert len(set(rayx.get([a.node.remote() for a in actors]))) >= 2, "members span nodes"
    # actors[i] gets rank 3 - i: ranks need not follow the list's order.
    col.create_collective_group(actors, 4, [3, 2, 1, 0], group_name="ops")
    results = rayx.get([a.every_op.remote("ops") for a in actors], timeout=60)
    by_rank = {r["rank"]: r for r in results}
    assert sorted(by_rank) == [0, 1, 2, 3]
    n = 4
    for rank, r in by_rank.items():
        assert r["size"] == n
        assert r["allreduce"] == [4 * i + 10 * (0 + 1 + 2 + 3) for i in range(6)]
        assert r["max"] == 4
        assert r["allgather"] == [[k, k * k] for k in range(n)]
        assert r["broadcast"] == [7.5, 7.5, 7.5]
        assert r["reduce"] == ([0 + 1 + 2 + 3, n] if rank == 0 else [rank, 1])
        # Rank i: sum over ranks k of (k + i).
        assert r["reducescatter"] == [float(6 + n * rank)] * 2
        assert r["recv"] == [float((rank - 1) % n)] * 4
    col.destroy_collective_group("ops")
    for a in actors:
        rayx.kill(a)


def test_group_made_inside_actors_and_torch_cpu_tensors(rayx_mod):
    rayx = rayx_mod
    pytest.importorskip("torch")
    actors = _members(rayx, 3)
    joined = rayx.get([a.join.remote(3, i, "inside") for i, a in enumerate(actors)], timeout=60)
    assert joined == [(0, 3), (1, 3), (2, 3)]
    sums = rayx.get([a.torch_allreduce.remote("inside") for a in actors], timeout=60)
    assert sums == [[6.0, 6.0, 6.0]] * 3
    assert rayx.get([a.leave.remote("inside") for a in actors]) == [False] * 3
    for a in actors:
        rayx.kill(a)


def test_a_group_made_inside_actors_again_after_a_member_restarted(rayx_mod):
    # A member's process is replaced (a restarted actor) and the ranks make the
    # group again inside the actors: they agree on a fresh attempt through the
    # head's KV, so the new process never rendezvouses on the finished
    # attempt's keys (a per-process count would put it one attempt behind).
    import os
    import signal
    rayx = rayx_mod
    cls = rayx.remote(Member)
    actors = [cls.options(scheduling_strategy="SPREAD", max_restarts=1).remote()
              for _ in range(2)]
    assert rayx.get([a.join.remote(2, i, "again") for i, a in enumerate(actors)],
                    timeout=60) == [(0, 2), (1, 2)]
    old_pid = rayx.get(actors[1].get_pid.remote(), timeout=30)
    os.kill(old_pid, signal.SIGKILL)

    def restarted():
        try:
            return rayx.get(actors[1].get_pid.remote(), timeout=30) != old_pid
        except rayx.exceptions.ActorDiedError:
            return False  # the call reached the old process as it died
    wait_until(restarted, 30, "rank 1's actor to restart")
    assert rayx.get(actors[0].leave.remote("again"), timeout=30) is False
    # The restarted rank calls first: it must wait for rank 0's new attempt.
    joined = [actors[1].join.remote(2, 1, "again"), actors[0].join.remote(2, 0, "again")]
    assert rayx.get(joined, timeout=60) == [(1, 2), (0, 2)]
    results = rayx.get([a.every_op.remote("again") for a in actors], timeout=60)
    for r in results:
        assert r["allreduce"] == [float(2 * i + 10) for i in range(6)]
    for a in actors:
        rayx.kill(a)


def test_bad_tensors_get_clear_errors(rayx_mod):
    del rayx_mod
    # A group of one in the driver itself.
    col.init_collective_group(1, 0, group_name="solo")
    try:
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        with pytest.raises(ValueError, match="not C-contiguous.*ascontiguousarray"):
            col.allreduce(a[:, ::2], group_name="solo")
        with pytest.raises(ValueError, match="not C-contiguous"):
            col.allreduce(a.T, group_name="solo")
        ro = np.ones(4, dtype=np.float64)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            col.broadcast(ro, 0, group_name="solo")
        with pytest.raises(TypeError, match="not supported: use int32, int64, float32"):
            col.allreduce(np.ones(3, dtype=np.uint8), group_name="solo")
        with pytest.raises(TypeError, match="numpy array or a torch tensor"):
            col.allreduce([1.0, 2.0], group_name="solo")
        with pytest.raises(ValueError, match="has 2 tensors but group 'solo' has 1 ranks"):
            col.allgather([np.zeros(2, np.float32)] * 2, np.zeros(2, np.float32), "solo")
        with pytest.raises(col.CollectiveError, match="'nope' is not initialised"):
            col.allreduce(np.ones(2, np.float32), group_name="nope")
        with pytest.raises(ValueError, match="ranks .* must be 0..1"):
            col.create_collective_group([None, None], 2, [0, 0], group_name="x")
        # Contiguous slices and a group of one work; a send to oneself is refused.
        b = a[1]
        col.allreduce(b, group_name="solo")
        assert b.tolist() == [4.0, 5.0, 6.0, 7.0]
        assert col.get_rank("solo") == 0 and col.get_rank("nope") == -1
    finally:
        col.destroy_collective_group("solo")
    assert not col.is_group_initialized("solo")


def test_killed_member_fails_the_others_naming_its_rank(rayx_mod):
    rayx = rayx_mod
    actors = _members(rayx, 3)
    col.create_collective_group(actors, 3, [0, 1, 2], group_name="doomed", timeout_ms=20000)
    rayx.kill(actors[1])
    start = time.monotonic()
    results = rayx.get([actors[0].allreduce_timed.remote("doomed"),
                        actors[2].allreduce_timed.remote("doomed")], timeout=40)
    assert time.monotonic() - start < 20, "the survivors waited out the deadline"
    for message, elapsed, failed_rank in results:
        assert message != "ok"
        assert "doomed" in message and "rank 1" in message, message
        assert failed_rank == 1, message
        assert elapsed < 20
    for a in (actors[0], actors[2]):
        rayx.kill(a)


def test_absent_rank_fails_the_others_at_the_deadline(rayx_mod):
    rayx = rayx_mod
    actors = _members(rayx, 3)
    col.create_collective_group(actors, 3, [0, 1, 2], group_name="late", timeout_ms=1500)
    start = time.monotonic()
    # Rank 2 never calls.
    results = rayx.get([a.allreduce_timed.remote("late") for a in actors[:2]], timeout=30)
    assert time.monotonic() - start < 15
    for message, elapsed, failed_rank in results:
        assert "late" in message and "allreduce" in message.lower(), message
        assert 1.0 < elapsed < 10, (elapsed, message)
    assert any(f == 2 or "rank 2" in m for m, _, f in results), results
    for a in actors:
        rayx.kill(a)


def test_a_member_whose_actor_was_never_placed_is_named_as_waiting(rayx_mod):
    """A group whose member's actor waits for resources fails saying so, not
    that the member 'did not join'."""
    rayx = rayx_mod
    cls = rayx.remote(Member)
    placed = cls.options(num_cpus=0, resources={"special": 1}).remote()
    rayx.get(placed.node.remote(), timeout=30)
    waiting = cls.options(num_cpus=0, resources={"special": 1}).remote()  # the only one is held
    try:
        start = time.monotonic()
        with pytest.raises(col.CollectiveError) as e:
            col.create_collective_group([placed, waiting], 2, [0, 1], group_name="unplaced",
                                        timeout_ms=1500)
        assert time.monotonic() - start < 10, "the waiting member's leave was waited for"
        message = str(e.value)
        assert "rank(s) 1 (actor " in message and "never started" in message, message
        assert "wait for resources" in message, message
    finally:
        rayx.kill(waiting)
        rayx.kill(placed)


class _FakeCudaTensor:
    """Looks like a torch CUDA tensor to rayx (no GPU or torch needed)."""
    __module__ = "torch.fake"

    class device:  # noqa: N801 - torch's attribute name
        type = "cuda"

    is_cuda = True
    dtype = "torch.float32"

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 0xdead0000

    def numel(self):
        return 4


def test_cuda_tensor_on_a_gloo_group_is_refused_before_cpp(rayx_mod, monkeypatch):
    del rayx_mod
    col.init_collective_group(1, 0, backend="gloo", group_name="gloo-only")
    try:
        calls = []
        for op in ("allreduce", "broadcast", "reduce", "send", "recv", "allgather",
                   "reducescatter"):
            monkeypatch.setattr(col._c, op, lambda *a, _op=op: calls.append(_op))
        cuda = _FakeCudaTensor()
        refused = r"gloo backend only accepts CPU tensors.*\.cpu\(\).*backend='nccl'"
        with pytest.raises(ValueError, match=refused):
            col.allreduce(cuda, group_name="gloo-only")
        with pytest.raises(ValueError, match=refused):
            col.broadcast(cuda, 0, group_name="gloo-only")
        with pytest.raises(ValueError, match=refused):
            col.reduce(cuda, 0, group_name="gloo-only")
        with pytest.raises(ValueError, match=refused):
            col.send(cuda, 0, group_name="gloo-only")
        with pytest.raises(ValueError, match=refused):
            col.recv(cuda, 0, group_name="gloo-only")
        with pytest.raises(ValueError, match=refused):
            col.allgather([np.zeros(4, np.float32)], cuda, group_name="gloo-only")
        with pytest.raises(ValueError, match=refused):
            col.reducescatter(np.zeros(4, np.float32), [cuda], group_name="gloo-only")
        assert calls == [], f"called into C++ with a CUDA tensor: {calls}"
        monkeypatch.undo()
        # Host arrays still work on the same group.
        a = np.ones(4, np.float32)
        col.allreduce(a, group_name="gloo-only")
        assert a.tolist() == [1.0] * 4
    finally:
        col.destroy_collective_group("gloo-only")
