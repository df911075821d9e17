"""Collective groups between actors, with Ray's names (ray.util.collective).

    import rayx.util.collective as col

    @rayx.remote
    class Worker:
        def step(self):
            grads = numpy.ones(4, numpy.float32)
            col.allreduce(grads, group_name="g")     # in place, summed over the ranks
            return grads

    workers = [Worker.remote() for _ in range(3)]
    col.create_collective_group(workers, 3, [0, 1, 2], group_name="g")
    rayx.get([w.step.remote() for w in workers])

Tensors are numpy arrays (any C-contiguous buffer of int32, int64, float32 or
float64) and torch tensors: CPU tensors on the "gloo" backend, CUDA tensors on
"nccl". Operations write in place; every rank must call the same operations in
the same order. Unlike Ray's, every operation has a deadline (`timeout_ms` of
the group, default 30 s): a rank that died or never calls fails the others with
CollectiveError naming the group, the operation and the failed rank, instead of
hanging. torch is imported only when a torch tensor is passed.
"""

import enum
import functools

from rayx import _api
from rayx import _core
from rayx.exceptions import RayxError

_c = _core.collective

_BACKENDS = ("gloo", "nccl")
DEFAULT_TIMEOUT_MS = 30000


class ReduceOp(enum.IntEnum):
    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3


class CollectiveError(RayxError):
    """A collective operation or group creation failed. `failed_rank` is the
    rank whose death, absence or abort caused it (-1 when unknown)."""

    def __init__(self, message, failed_rank=-1):
        super().__init__(message)
        self.failed_rank = failed_rank

    def __reduce__(self):
        return (CollectiveError, (str(self), self.failed_rank))


def _translate(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _c.Error as e:
            message, failed_rank = e.args
            raise CollectiveError(message, failed_rank) from None
    return wrapper


def _backend(backend):
    b = str(getattr(backend, "value", backend)).lower()
    if b not in _BACKENDS:
        raise ValueError(f"collective backend {backend!r}: use 'gloo' (CPU) or 'nccl' (GPU)")
    if b == "nccl" and not _c.HAVE_NCCL:
        raise RuntimeError("backend 'nccl': this rayx was built without NCCL (no CUDA toolkit "
                           "with NCCL was found at build time): use 'gloo', or rebuild rayx "
                           "on a machine with NCCL")
    return b


def _check_name(group_name):
    if not isinstance(group_name, str) or not group_name:
        raise ValueError("group_name must be a non-empty string")
    return group_name


def _is_torch(t):
    mod = type(t).__module__
    return mod.startswith("torch") and hasattr(t, "data_ptr")


def _tensor(t, group_name, what):
    """What rayx._core.collective takes: a buffer (host memory) or a CUDA
    tensor's ("cuda", pointer, count, dtype, stream). A CUDA tensor is refused
    here for a Gloo group, which would read its device pointer as host memory."""
    if _is_torch(t):
        if t.is_cuda:
            if _c.backend(group_name) != "nccl":
                raise ValueError(
                    f"{what}: group '{group_name}' uses the gloo backend, and the gloo backend "
                    "only accepts CPU tensors: move it with .cpu() (and copy the result back) "
                    "or use backend='nccl'")
            import torch
            if not t.is_contiguous():
                raise ValueError("the CUDA tensor is not contiguous: pass t.contiguous() and "
                                 "copy the result back")
            dtype = str(t.dtype).replace("torch.", "")
            stream = torch.cuda.current_stream(t.device).cuda_stream
            return ("cuda", t.data_ptr(), t.numel(), dtype, stream)
        return t.detach().numpy()  # a view: writes land in the tensor
    return t


def _tensors(ts, group_name, what):
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"{what}: expected a list of tensors, one per rank")
    return [_tensor(t, group_name, what) for t in ts]


def _op(op):
    try:
        return int(ReduceOp(op))
    except ValueError:
        raise ValueError(f"reduce op {op!r}: use ReduceOp.SUM, PRODUCT, MIN or MAX") from None


# --- groups ------------------------------------------------------------------------

@_translate
def init_collective_group(world_size, rank, backend="gloo", group_name="default", *,
                          timeout_ms=DEFAULT_TIMEOUT_MS):
    """Inside an actor or task: joins group `group_name` as `rank` of
    `world_size` and returns once every rank has joined (CollectiveError after
    `timeout_ms`, naming the ranks that did not)."""
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, not {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, {world_size}), not {rank!r}")
    _c.init_group(world_size, rank, _backend(backend), _check_name(group_name), int(timeout_ms))


@_translate
def create_collective_group(actors, world_size, ranks, backend="gloo", group_name="default", *,
                            timeout_ms=DEFAULT_TIMEOUT_MS):
    """From a driver: makes actors[i] rank ranks[i] of group `group_name` and
    returns once all are connected, so their next calls can use it. A rank that
    does not join in time fails it (CollectiveError naming the rank); the others
    leave again. destroy_collective_group(group_name) here ends it."""
    from rayx._remote import ActorHandle
    _api._require()
    actors = list(actors)
    ranks = list(ranks)
    if len(actors) != world_size or len(ranks) != world_size:
        raise ValueError(f"create_collective_group: {len(actors)} actors and {len(ranks)} ranks "
                         f"for world_size {world_size}: pass one actor and one rank per member")
    if sorted(ranks) != list(range(world_size)):
        raise ValueError(f"create_collective_group: ranks {ranks} must be 0..{world_size - 1}, "
                         "each once")
    for a in actors:
        if not isinstance(a, ActorHandle):
            raise TypeError(f"create_collective_group takes actor handles, not {type(a).__name__}")
    by_rank = [None] * world_size
    for actor, rank in zip(actors, ranks):
        by_rank[rank] = actor._core
    _c.create_group_over_actors(by_rank, _backend(backend), _check_name(group_name),
                                int(timeout_ms))


@_translate
def destroy_collective_group(group_name="default"):
    """Leaves and frees the group in this process (in a driver: makes every
    member of a group it created leave). Operations in progress on it fail."""
    _c.destroy_group(_check_name(group_name))


def is_group_initialized(group_name="default"):
    return _c.is_initialized(group_name)


@_translate
def get_rank(group_name="default"):
    """This process's rank in the group; -1 when it is not a member (Ray's convention)."""
    if not _c.is_initialized(group_name):
        return -1
    return _c.rank(group_name)


@_translate
def get_collective_group_size(group_name="default"):
    """The group's world size; -1 when this process is not a member."""
    if not _c.is_initialized(group_name):
        return -1
    return _c.world_size(group_name)


# --- operations ----------------------------------------------------------------------

@_translate
def allreduce(tensor, group_name="default", op=ReduceOp.SUM):
    """Reduces `tensor` over the ranks, in place on every rank."""
    _c.allreduce(_tensor(tensor, group_name, "allreduce"), _op(op), group_name)


@_translate
def allgather(tensor_list, tensor, group_name="default"):
    """Fills tensor_list[i] (one tensor per rank, shaped like `tensor`) with rank i's `tensor`."""
    _c.allgather(_tensors(tensor_list, group_name, "allgather"),
                 _tensor(tensor, group_name, "allgather"), group_name)


@_translate
def reducescatter(tensor, tensor_list, group_name="default", op=ReduceOp.SUM):
    """Rank i gets in `tensor` the reduction of every rank's tensor_list[i]."""
    _c.reducescatter(_tensor(tensor, group_name, "reducescatter"),
                     _tensors(tensor_list, group_name, "reducescatter"), _op(op), group_name)


@_translate
def broadcast(tensor, src_rank=0, group_name="default"):
    """Copies `tensor` of rank `src_rank` into `tensor` on every rank."""
    _c.broadcast(_tensor(tensor, group_name, "broadcast"), int(src_rank), group_name)


@_translate
def reduce(tensor, dst_rank=0, group_name="default", op=ReduceOp.SUM):
    """The reduction lands in `tensor` on `dst_rank`; the others' are unchanged."""
    _c.reduce(_tensor(tensor, group_name, "reduce"), int(dst_rank), _op(op), group_name)


@_translate
def send(tensor, dst_rank, group_name="default"):
    _c.send(_tensor(tensor, group_name, "send"), int(dst_rank), group_name)


@_translate
def recv(tensor, src_rank, group_name="default"):
    """Receives into `tensor`, which must already have the sender's shape and type."""
    _c.recv(_tensor(tensor, group_name, "recv"), int(src_rank), group_name)


@_translate
def barrier(group_name="default"):
    """Returns once every rank of the group has called barrier."""
    _c.barrier(group_name)


__all__ = [
    "CollectiveError", "ReduceOp", "allgather", "allreduce", "barrier", "broadcast",
    "create_collective_group", "destroy_collective_group", "get_collective_group_size",
    "get_rank", "init_collective_group", "is_group_initialized", "recv", "reduce",
    "reducescatter", "send",
]
