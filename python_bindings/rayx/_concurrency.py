"""How a Python actor runs calls concurrently (Ray's async and threaded
actors, and concurrency groups); rayx._worker hands each call to one.

An actor class with any `async def` method is an async actor: an asyncio event
loop on a thread of its own runs every call as a task (a sync method runs on
the loop's thread too, blocking it, as in Ray), at most each concurrency
group's limit at once (an asyncio.Semaphore per group). Any other actor with
max_concurrency > 1 or concurrency groups is a threaded actor: a thread pool
per group, of the group's size. The default group's size is max_concurrency
(Ray's defaults: 1000 for an async actor, 1 otherwise). Calls start in the
order they arrive and may finish in any order. An actor with neither runs its
calls one at a time on the worker's own thread and never comes here.

Every job given to an executor is one whole call: it runs the method, makes
the result's bytes and answers the caller itself (rayx._worker); an executor
only decides where and when it runs.
"""

import asyncio
import concurrent.futures
import inspect
import threading

# Ray's default max_concurrency of an async actor's default group.
ASYNC_DEFAULT_MAX_CONCURRENCY = 1000
# The default group's key (methods that name no group).
DEFAULT_GROUP = None


def is_async_class(cls):
    """Whether `cls` has an async method (a coroutine or async generator function)."""
    for attr in dir(cls):
        try:
            member = inspect.getattr_static(cls, attr)
        except AttributeError:
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member):
            return True
    return False


def check_options(max_concurrency, groups, what):
    """Raises a ValueError/TypeError that says what is wrong with an actor's
    max_concurrency or concurrency_groups."""
    if max_concurrency is not None and (not isinstance(max_concurrency, int) or
                                        isinstance(max_concurrency, bool) or max_concurrency < 1):
        raise ValueError(f"{what}: max_concurrency must be an int >= 1, not {max_concurrency!r}")
    if groups is None:
        return
    if not isinstance(groups, dict):
        raise TypeError(f"{what}: concurrency_groups must be a dict of group name to its "
                        f"max concurrency, e.g. {{'io': 2}}, not {type(groups).__name__}")
    for name, size in groups.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what}: concurrency group names are non-empty strings, not {name!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"{what}: concurrency group {name!r} must have a max concurrency "
                             f"(int) >= 1, not {size!r}")


def for_actor(cls, max_concurrency, groups):
    """The executor of an actor of class `cls` with these options, or None when
    it runs its calls one at a time on the worker's thread."""
    is_async = is_async_class(cls)
    if not is_async and not groups and (max_concurrency or 1) <= 1:
        return None
    default = max_concurrency or (ASYNC_DEFAULT_MAX_CONCURRENCY if is_async else 1)
    limits = {DEFAULT_GROUP: default}
    limits.update(groups or {})
    executor = AsyncExecutor(limits) if is_async else ThreadExecutor(limits)
    executor.class_name = cls.__name__
    return executor


class _Executor:
    class_name = ""

    def __init__(self, limits):
        self._limits = limits
        self._method_groups = {}  # method name -> its declared group

    def group_of(self, name, method, override=None):
        """The group a call of `method` (named `name`) runs in: `override` (the
        call's .options(concurrency_group=...)), else the method's
        @rayx.method(concurrency_group=...), else the default group. A
        ValueError names the actor's groups when the group is not one."""
        group = override
        if group is None:
            try:
                group = self._method_groups[name]
            except KeyError:
                group = self._method_groups[name] = getattr(
                    method, "__rayx_concurrency_group__", DEFAULT_GROUP)
        if group not in self._limits:
            known = sorted(g for g in self._limits if g is not DEFAULT_GROUP)
            raise ValueError(
                f"{self.class_name}.{name}: concurrency group {group!r} is not one of the "
                f"actor's groups ({', '.join(map(repr, known)) or 'it has none'}): declare it "
                "with @rayx.remote(concurrency_groups={...: max concurrency})")
        return group


class AsyncExecutor(_Executor):
    """An asyncio event loop on the thread "rayx-asyncio". submit(group, job,
    *args) runs the coroutine job(*args) as a task once the group has room."""

    def __init__(self, limits):
        super().__init__(limits)
        self._semaphores = {}  # made on the loop's thread (a semaphore belongs to one loop)
        self._tasks = set()  # running or waiting for their group
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="rayx-asyncio",
                                        daemon=True)
        self._thread.start()
        ready.wait()

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def submit(self, group, job, *args):
        self.loop.call_soon_threadsafe(self._start, group, job, args)

    def _start(self, group, job, args):
        semaphore = self._semaphores.get(group)
        if semaphore is None:
            semaphore = self._semaphores[group] = asyncio.Semaphore(self._limits[group])
        task = self.loop.create_task(self._limited(semaphore, job, args))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _limited(semaphore, job, args):
        async with semaphore:
            await job(*args)

    def after_running(self, fn):
        """Runs fn() on the loop's thread once every call submitted before has
        finished."""
        self.loop.call_soon_threadsafe(self._start_after, fn)

    def _start_after(self, fn):
        earlier = list(self._tasks)

        async def wait_then_run():
            if earlier:
                await asyncio.wait(earlier)
            fn()
        self.loop.create_task(wait_then_run())


class ThreadExecutor(_Executor):
    """A thread pool per concurrency group. submit(group, job, *args) runs
    job(*args) on one of the group's threads."""

    def __init__(self, limits):
        super().__init__(limits)
        self._pools = {}
        self._lock = threading.Lock()
        self._running = set()  # futures not done yet

    def _pool(self, group):
        pool = self._pools.get(group)
        if pool is None:
            prefix = "rayx-actor" if group is DEFAULT_GROUP else f"rayx-group-{group}"
            pool = self._pools[group] = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._limits[group], thread_name_prefix=prefix)
        return pool

    def submit(self, group, job, *args):
        future = self._pool(group).submit(job, *args)
        with self._lock:
            self._running.add(future)
        future.add_done_callback(self._done)

    def _done(self, future):
        with self._lock:
            self._running.discard(future)

    def after_running(self, fn):
        """Runs fn() on a thread of its own once every call submitted before has
        finished."""
        with self._lock:
            earlier = list(self._running)

        def wait_then_run():
            concurrent.futures.wait(earlier)
            fn()
        threading.Thread(target=wait_then_run, name="rayx-after", daemon=True).start()
