"""Futures of ObjectRefs (ref.future(), `await ref`): one waiter thread
completes them all.

The thread waits on every pending ref at once (rayx._core.wait, the GIL
released) in slices of _SLICE_S, so a ref added while it waits joins the next
slice; with nothing pending it sleeps on a condition. A ready ref's value is
read on the thread (rayx.get's decoding and errors) and set on its futures.
Nothing here runs on the call path of get/remote: it loads on first use.
"""

import concurrent.futures
import threading

from rayx import _api, _core, exceptions

# How long one wait lasts before refs added meanwhile are included.
_SLICE_S = 0.02

_lock = threading.Condition()
_pending = {}  # ref key -> (ref, [futures])
_thread = None


def future_of(ref):
    """A concurrent.futures.Future of `ref`'s value (or of the exception
    rayx.get would raise for it)."""
    _api._require()
    fut = concurrent.futures.Future()
    if ref._resolved or (_api._cancelled and ref in _api._cancelled):
        _complete(ref, [fut])
        return fut
    global _thread
    with _lock:
        entry = _pending.get(ref._key())
        if entry is None:
            _pending[ref._key()] = (ref, [fut])
        else:
            entry[1].append(fut)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="rayx-futures", daemon=True)
            _thread.start()
        _lock.notify()
    return fut


def _complete(ref, futures):
    try:
        value = _api._get_one(ref, 0.0)
        error = None
    except BaseException as e:  # noqa: BLE001 - given to the futures
        value, error = None, e
    for fut in futures:
        if fut.cancelled():
            continue
        try:
            if error is None:
                fut.set_result(value)
            else:
                fut.set_exception(error)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile by its awaiting task


def _take(keys):
    with _lock:
        return [_pending.pop(k) for k in keys if k in _pending]


def _run():
    while True:
        with _lock:
            while not _pending:
                _lock.wait()
            refs = [ref for ref, _ in _pending.values()]
        try:
            # Not a call blocking: the awaiting coroutines' loop runs on, so
            # the worker's lease does not lend its CPU for this wait.
            flags = _core.wait([r._core for r in refs], 1, _SLICE_S, counts_as_blocked=False)
        except Exception as e:  # noqa: BLE001 - e.g. the runtime stopped: fail them
            _fail([r._key() for r in refs], e)
            continue
        ready = [r._key() for r, f in zip(refs, flags) if f]
        for ref, futures in _take(ready):
            _complete(ref, futures)


def _fail(keys, error):
    for _, futures in _take(keys):
        for fut in futures:
            try:
                fut.set_exception(error)
            except concurrent.futures.InvalidStateError:
                pass


def cancelled(ref):
    """rayx.cancel(ref) happened: its futures end now."""
    for ref_, futures in _take([ref._key()]):
        _complete(ref_, futures)


def fail_pending():
    """rayx.shutdown(): every pending future fails."""
    with _lock:
        keys = list(_pending)
    _fail(keys, exceptions.RuntimeStoppedError._with_message(
        "rayx.shutdown() was called before this object was ready"))
