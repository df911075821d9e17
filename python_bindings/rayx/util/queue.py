"""Queue: a FIFO queue shared by tasks and actors, kept by an actor (Ray's
ray.util.queue.Queue).

    q = Queue(maxsize=100)
    consumer.remote(q)          # a Queue passes to tasks and actors
    q.put(item); q.get(timeout=5)

Ray keeps its queue in an async actor, whose waiting get() and put() calls
park there. A rayx actor runs one call at a time, so waiting happens on the
caller's side: put(block=True) and get(block=True) try the non-blocking call
again with a growing pause (1 ms up to 50 ms) until it succeeds or `timeout`
passes. Items travel through the actor (pickled, as task arguments).
"""

import asyncio
import collections
import queue as _queue
import time

from rayx import _api, _remote


class Empty(_queue.Empty):
    """get_nowait() (or get() past its timeout) found the queue empty."""


class Full(_queue.Full):
    """put_nowait() (or put() past its timeout) found the queue full."""


class _QueueActor:
    def __init__(self, maxsize):
        self.maxsize = maxsize
        self.items = collections.deque()

    def qsize(self):
        return len(self.items)

    def put_nowait(self, item):
        if 0 < self.maxsize <= len(self.items):
            return False
        self.items.append(item)
        return True

    def put_nowait_batch(self, items):
        if self.maxsize > 0 and len(self.items) + len(items) > self.maxsize:
            return False
        self.items.extend(items)
        return True

    def get_nowait(self):
        if not self.items:
            return False, None
        return True, self.items.popleft()

    def get_nowait_batch(self, num_items):
        if num_items > len(self.items):
            return False, len(self.items)
        return True, [self.items.popleft() for _ in range(num_items)]


_QueueActorClass = None
_FIRST_PAUSE_S = 0.001
_MAX_PAUSE_S = 0.05


def _actor_class():
    global _QueueActorClass
    if _QueueActorClass is None:
        _QueueActorClass = _remote.ActorClass(_QueueActor, {})
    return _QueueActorClass


def _check_timeout(timeout):
    if timeout is not None and timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")


class Queue:
    """A FIFO queue; maxsize <= 0: unbounded. actor_options: the keeping
    actor's options (num_cpus, resources, scheduling_strategy, ...)."""

    def __init__(self, maxsize=0, actor_options=None):
        self.maxsize = maxsize
        self.actor = _actor_class().options(**(actor_options or {})).remote(maxsize)

    def __len__(self):
        return self.size()

    def size(self):
        return _api.get(self.actor.qsize.remote())

    def qsize(self):
        return self.size()

    def empty(self):
        return self.size() == 0

    def full(self):
        return 0 < self.maxsize <= self.size()

    # --- put ---------------------------------------------------------------------

    def put(self, item, block=True, timeout=None):
        """Adds `item`; when full, waits (block) up to `timeout` s, else Full."""
        if not block:
            return self.put_nowait(item)
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_PAUSE_S
        while not _api.get(self.actor.put_nowait.remote(item)):
            if deadline is not None and time.monotonic() >= deadline:
                raise Full
            time.sleep(pause if deadline is None else
                       max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, _MAX_PAUSE_S)

    def put_nowait(self, item):
        if not _api.get(self.actor.put_nowait.remote(item)):
            raise Full

    def put_nowait_batch(self, items):
        """Adds all of `items` or none (Full when they do not fit)."""
        if not isinstance(items, (list, tuple)):
            raise TypeError("put_nowait_batch takes a list of items")
        if not _api.get(self.actor.put_nowait_batch.remote(list(items))):
            raise Full(f"Cannot add {len(items)} items to queue of size {self.size()} and "
                       f"maxsize {self.maxsize}.")

    async def put_async(self, item, block=True, timeout=None):
        """put() for asyncio code: waits without blocking the event loop."""
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_PAUSE_S
        while not await self.actor.put_nowait.remote(item):
            if not block or (deadline is not None and time.monotonic() >= deadline):
                raise Full
            await asyncio.sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE_S)

    # --- get ---------------------------------------------------------------------

    def get(self, block=True, timeout=None):
        """Removes and returns the oldest item; when empty, waits (block) up
        to `timeout` s, else Empty."""
        if not block:
            return self.get_nowait()
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_PAUSE_S
        while True:
            ok, item = _api.get(self.actor.get_nowait.remote())
            if ok:
                return item
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty
            time.sleep(pause if deadline is None else
                       max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, _MAX_PAUSE_S)

    def get_nowait(self):
        ok, item = _api.get(self.actor.get_nowait.remote())
        if not ok:
            raise Empty
        return item

    def get_nowait_batch(self, num_items):
        """Removes and returns `num_items` items, or none (Empty when fewer are there)."""
        if not isinstance(num_items, int) or num_items < 0:
            raise ValueError("'num_items' must be a nonnegative integer")
        ok, items = _api.get(self.actor.get_nowait_batch.remote(num_items))
        if not ok:
            raise Empty(f"Cannot get {num_items} items from queue of size {items}.")
        return items

    async def get_async(self, block=True, timeout=None):
        """get() for asyncio code: waits without blocking the event loop."""
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_PAUSE_S
        while True:
            ok, item = await self.actor.get_nowait.remote()
            if ok:
                return item
            if not block or (deadline is not None and time.monotonic() >= deadline):
                raise Empty
            await asyncio.sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE_S)

    def shutdown(self, force=False, grace_period_s=5):
        """Stops the queue's actor (its items are lost)."""
        del force, grace_period_s
        if self.actor is not None:
            _remote.kill(self.actor)
        self.actor = None


__all__ = ["Empty", "Full", "Queue"]
