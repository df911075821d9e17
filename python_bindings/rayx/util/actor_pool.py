"""ActorPool: spreads calls over a fixed set of actors (Ray's ray.util.ActorPool).

    pool = ActorPool([Worker.remote(), Worker.remote()])
    list(pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4]))   # [2, 4, 6, 8]

A call goes to an idle actor; while none is idle, submissions wait in the
pool (not in the actors' queues) and go out as results are read. Results
come back in submission order (get_next, map) or as they finish
(get_next_unordered, map_unordered). Not thread-safe, as Ray's.
"""

from rayx import _api


def _first_ref(future):
    """The ObjectRef that says when a submission is done (the first of a
    list, for methods with several returns)."""
    return future[0] if isinstance(future, (list, tuple)) else future


class ActorPool:
    def __init__(self, actors):
        self._idle = list(actors)
        self._busy = {}          # submission index -> (future, actor)
        self._waiting = []       # (fn, value) submitted while no actor was idle
        self._next_index = 0     # the index the next submission gets
        self._next_return = 0    # the submission get_next returns next

    # --- submitting ----------------------------------------------------------------

    def submit(self, fn, value):
        """Runs fn(actor, value) (which returns an ObjectRef: actor.method.remote(v))
        on an idle actor, or once one is free."""
        if not self._idle:
            self._waiting.append((fn, value))
            return
        actor = self._idle.pop()
        future = fn(actor, value)
        self._busy[self._next_index] = (future, actor)
        self._next_index += 1

    def map(self, fn, values):
        """Results of fn(actor, v) for each of `values`, in order (a generator).
        Results of earlier submissions not read yet are dropped."""
        self._drop_pending()
        for v in values:
            self.submit(fn, v)

        def results():
            while self.has_next():
                yield self.get_next()
        return results()

    def map_unordered(self, fn, values):
        """As map(), in the order the calls finish."""
        self._drop_pending()
        for v in values:
            self.submit(fn, v)

        def results():
            while self.has_next():
                yield self.get_next_unordered()
        return results()

    def _drop_pending(self):
        while self.has_next():
            try:
                self.get_next(timeout=0, ignore_if_timedout=True)
            except TimeoutError:
                pass

    # --- results -----------------------------------------------------------------

    def has_next(self):
        """Whether a submission's result is still to be read."""
        return bool(self._busy) or bool(self._waiting)

    def get_next(self, timeout=None, ignore_if_timedout=False):
        """The next result in submission order. TimeoutError after `timeout`
        seconds (with ignore_if_timedout the submission is dropped first);
        StopIteration when nothing is pending."""
        if not self.has_next():
            raise StopIteration("No more results to get")
        if self._next_return not in self._busy:
            if self._next_return >= self._next_index and self._waiting:
                self._make_room()
            if self._next_return not in self._busy:
                raise ValueError("get_next() cannot follow get_next_unordered() on the same "
                                 "submissions: read them all with one of the two")
        future, actor = self._busy[self._next_return]
        if timeout is not None:
            ready, _ = _api.wait([_first_ref(future)], timeout=timeout)
            if not ready:
                if not ignore_if_timedout:
                    raise TimeoutError("Timed out waiting for result")
                self._finish(self._next_return)
                raise TimeoutError(f"Timed out waiting for result: submission "
                                   f"{self._next_return - 1} is dropped")
        self._finish(self._next_return)
        return _api.get(future)

    def get_next_unordered(self, timeout=None, ignore_if_timedout=False):
        """The result of whichever pending submission finishes first."""
        if not self.has_next():
            raise StopIteration("No more results to get")
        if not self._busy:
            self._make_room()
        by_ref = {_first_ref(f): i for i, (f, _) in self._busy.items()}
        ready, _ = _api.wait(list(by_ref), num_returns=1, timeout=timeout)
        if not ready:
            raise TimeoutError("Timed out waiting for result")
        index = by_ref[ready[0]]
        future, _ = self._busy[index]
        self._finish(index)
        self._next_return = max(self._next_return, index + 1)
        return _api.get(future)

    def _finish(self, index):
        _, actor = self._busy.pop(index)
        if index == self._next_return:
            self._next_return += 1
        self._return(actor)

    def _make_room(self):
        # Submissions wait only while every actor is busy; none is busy here.
        while self._waiting and self._idle:
            self.submit(*self._waiting.pop(0))

    def _return(self, actor):
        self._idle.append(actor)
        if self._waiting:
            self.submit(*self._waiting.pop(0))

    # --- actors --------------------------------------------------------------------

    def has_free(self):
        """Whether an actor is idle and no submission waits for one."""
        return bool(self._idle) and not self._waiting

    def pop_idle(self):
        """Takes an idle actor out of the pool (None when none is free)."""
        return self._idle.pop() if self.has_free() else None

    def push(self, actor):
        """Adds `actor` to the pool (ValueError when it is in it already)."""
        busy = [a for _, a in self._busy.values()]
        if actor in self._idle or actor in busy:
            raise ValueError("Actor already belongs to current ActorPool")
        self._return(actor)


__all__ = ["ActorPool"]
