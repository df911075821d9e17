"""Ray's ray.actor module: actor classes, handles and exit_actor()."""

from rayx._remote import ActorClass, ActorHandle, ActorMethod, method

__all__ = ["ActorClass", "ActorHandle", "ActorMethod", "exit_actor", "method"]


def exit_actor():
    """Inside an actor: ends its process at once. The call that runs this
    fails with ActorDiedError for its caller, and so do calls queued behind it.

    Unlike Ray, rayx's runtime sees an exit as a crash: an actor with
    max_restarts left is restarted (use rayx.kill(handle) from outside to stop
    one for good)."""
    from rayx import _api, _remote
    if _api._mode != "worker" or not _remote._is_actor:
        raise TypeError("exit_actor() is called inside an actor's method, not in a driver or "
                        "a task")
    from rayx import _worker
    _worker._exit_process(0)
