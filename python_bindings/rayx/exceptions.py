"""rayx's exceptions, with Ray's names and class hierarchy (ray.exceptions).

Every class pickles across processes whatever its constructor takes: an error
raised in a task reaches the caller as the same class. rayx's own older names
(RayxError, RayxTaskError) are aliases of Ray's.

rayx raises these with a message (`_with_message`); user code may construct
them with Ray's arguments, and str() then reads as Ray's does.
"""


def _rebuild(cls, args, state):
    """Unpickles an error without calling its __init__ (whose arguments differ
    from class to class): BaseException.__new__ sets args, then the state."""
    err = cls.__new__(cls, *args)
    err.__dict__.update(state)
    return err


class RayError(Exception):
    """Base of every error rayx raises."""

    @classmethod
    def _with_message(cls, message, **attrs):
        """An instance carrying rayx's message (its str()) and `attrs`."""
        err = cls.__new__(cls, message)
        err.__dict__.update(attrs)
        err._message = message
        return err

    def __reduce__(self):
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    def __str__(self):
        message = self.__dict__.get("_message")
        if message is not None:
            return message
        return self._default_str()

    def _default_str(self):
        return Exception.__str__(self)


RayxError = RayError


class CrossLanguageError(RayError):
    """A value or an error cannot cross between Python and C++."""


class TaskCancelledError(RayError):
    """The task was cancelled (rayx.cancel) before its result was read."""

    task_id = None
    error_message = None

    def __init__(self, task_id=None, error_message=None):
        super().__init__(task_id, error_message)
        self.task_id = task_id
        self.error_message = error_message

    def _default_str(self):
        msg = f"Task: {self.task_id} was cancelled. " if self.task_id else ""
        return msg + (self.error_message or "")


class RayTaskError(RayError):
    """A remote function or actor method raised. The instance rayx.get raises
    is also an instance of the original exception's class (as_instanceof_cause),
    so `except ValueError:` still catches a remote ValueError; `.cause` is the
    original exception."""

    def __init__(self, function_name, traceback_str, cause, proctitle=None, pid=None, ip=None,
                 actor_repr=None, actor_id=None):
        super().__init__(function_name, traceback_str, cause, proctitle, pid, ip)
        self.function_name = function_name
        self.traceback_str = traceback_str
        self.cause = cause
        self.proctitle = proctitle or function_name
        self.pid = pid or 0
        self.ip = ip or ""
        self.actor_repr = actor_repr
        self._actor_id = actor_id

    @property
    def node_ip(self):  # rayx's older name
        return self.ip

    def _default_str(self):
        where = f" on node {self.ip} (pid {self.pid})" if self.ip else ""
        return f"{self.function_name} failed{where}:\n{self.traceback_str.rstrip()}"

    def __str__(self):
        return self._default_str()

    def as_instanceof_cause(self):
        """This error as an instance of both RayTaskError and the cause's class
        (itself when the two classes cannot be combined)."""
        cause_cls = type(self.cause)
        if not isinstance(self.cause, Exception) or issubclass(RayTaskError, cause_cls) or \
                issubclass(cause_cls, RayTaskError):
            return self
        dual = _dual_classes.get(cause_cls)
        if dual is None:
            name = f"RayTaskError({cause_cls.__name__})"
            try:
                dual = type(name, (_DualTaskError, cause_cls), {})
            except TypeError:
                return self  # e.g. conflicting instance layouts
            dual.__module__ = __name__
            _dual_classes[cause_cls] = dual
        try:
            err = dual.__new__(dual)
        except TypeError:
            return self
        err.__dict__.update(self.__dict__)
        err.args = (str(self),)
        return err


class _DualTaskError(RayTaskError):
    """Base of the classes as_instanceof_cause makes: the cause's attributes
    read through, and pickling rebuilds the pair on the other side."""

    def __init__(self, *args, **kwargs):  # noqa: D107 - made by as_instanceof_cause only
        pass

    def __getattr__(self, name):
        cause = self.__dict__.get("cause")
        if cause is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(cause, name)

    def __str__(self):
        return RayTaskError._default_str(self)

    def __reduce__(self):
        return (_rebuild_dual, (self.function_name, self.traceback_str, self.cause, self.pid,
                                self.ip))


def _rebuild_dual(function_name, traceback_str, cause, pid, ip):
    return RayTaskError(function_name, traceback_str, cause, pid=pid, ip=ip).as_instanceof_cause()


_dual_classes = {}
RayxTaskError = RayTaskError


class LocalRayletDiedError(RayError):
    """The task's node agent died."""


class WorkerCrashedError(RayError):
    """The worker running the task died (killed, crashed, its node died)."""

    def _default_str(self):
        return "The worker died unexpectedly while executing this task."


class RayActorError(RayError):
    """The actor could not finish the call: it died (ActorDiedError) or is
    unreachable for now (ActorUnavailableError)."""

    actor_id = None
    error_msg = "The actor experienced an error before finishing this task."

    def __init__(self, actor_id=None, error_msg="The actor experienced an error before "
                 "finishing this task.", actor_init_failed=False, preempted=False):
        super().__init__(actor_id, error_msg)
        self.actor_id = actor_id
        self.error_msg = error_msg
        self._actor_init_failed = actor_init_failed
        self._preempted = preempted

    @property
    def actor_init_failed(self):
        return self.__dict__.get("_actor_init_failed", False)

    @property
    def preempted(self):
        return self.__dict__.get("_preempted", False)

    def _default_str(self):
        return self.error_msg


class ActorDiedError(RayActorError):
    """The actor's process died, it was killed, or its constructor failed."""

    def __init__(self, cause=None):
        init_failed = isinstance(cause, RayTaskError)
        msg = "The actor died unexpectedly before finishing this task."
        if init_failed:
            msg = f"The actor died because of an error raised in its creation task, {cause}"
        super().__init__(None, msg, init_failed)


class ActorUnavailableError(RayActorError):
    """The actor is unreachable for now (e.g. restarting); it may answer later."""

    def __init__(self, error_message="", actor_id=None):
        super().__init__(actor_id, f"The actor {actor_id} is unavailable: {error_message}.")


class RaySystemError(RayError):
    """rayx itself failed."""

    client_exc = None
    traceback_str = None

    def __init__(self, client_exc=None, traceback_str=None):
        super().__init__(client_exc, traceback_str)
        self.client_exc = client_exc
        self.traceback_str = traceback_str

    def _default_str(self):
        msg = f"System error: {self.client_exc}"
        return msg + (f"\ntraceback: {self.traceback_str}" if self.traceback_str else "")


class UserCodeException(RayError):
    """Wraps an exception of user code."""


class ObjectStoreFullError(RayError):
    """The node's object store and its spill space are full."""


class OutOfDiskError(RayError):
    """The node's disk is full."""


class OutOfMemoryError(RayError):
    """The node ran out of memory and a worker was killed."""


class NodeDiedError(RayError):
    """The node is dead or unreachable."""


class ObjectLostError(RayError):
    """Every copy of the object is gone (its node died)."""

    object_ref_hex = ""
    owner_address = ""
    call_site = ""

    def __init__(self, object_ref_hex="", owner_address="", call_site=""):
        super().__init__(object_ref_hex, owner_address, call_site)
        self.object_ref_hex = object_ref_hex
        self.owner_address = owner_address
        self.call_site = call_site

    def _default_str(self):
        return f"Failed to retrieve object {self.object_ref_hex}: all its copies are lost."


class ObjectFetchTimedOutError(ObjectLostError):
    """No location of the object answered in time."""


class RpcError(RayError):
    """A message between rayx processes failed."""


class ReferenceCountingAssertionError(ObjectLostError, AssertionError):
    """The object was freed while a reference to it remained."""


class ObjectFreedError(ObjectLostError):
    """The object was freed by the application."""


class OwnerDiedError(ObjectLostError):
    """The process that owns the object (made it with .remote() or put) exited."""


class ObjectReconstructionFailedError(ObjectLostError):
    """The lost object cannot be made again."""


class ObjectReconstructionFailedMaxAttemptsExceededError(ObjectLostError):
    """The lost object's task ran out of retries."""


class ObjectReconstructionFailedLineageEvictedError(ObjectLostError):
    """The lost object's lineage was dropped."""


class GetTimeoutError(RayError, TimeoutError):
    """rayx.get (or wait on a future) timed out."""


class PlasmaObjectNotAvailable(RayError):
    """An object was not available within the timeout."""


class AsyncioActorExit(RayError):
    """An asyncio actor exits on purpose (exit_actor)."""


class RuntimeEnvSetupError(RayError):
    """The call's runtime_env could not be set up in its worker."""

    error_message = None

    def __init__(self, error_message=None):
        super().__init__(error_message)
        self.error_message = error_message

    def _default_str(self):
        return "Failed to set up runtime environment." + (
            f"\n{self.error_message}" if self.error_message else "")


class TaskPlacementGroupRemoved(RayError):
    """The task's placement group was removed."""

    def _default_str(self):
        return "The placement group corresponding to this task has been removed."


class ActorPlacementGroupRemoved(RayError):
    """The actor's placement group was removed."""

    def _default_str(self):
        return "The placement group corresponding to this Actor has been removed."


class PendingCallsLimitExceeded(RayError):
    """Too many calls wait on the actor."""


class TaskUnschedulableError(RayError):
    """No node can run the task (e.g. its affinity node is dead)."""

    error_message = ""

    def __init__(self, error_message=""):
        super().__init__(error_message)
        self.error_message = error_message

    def _default_str(self):
        return f"The task is not schedulable: {self.error_message}"


class ActorUnschedulableError(RayError):
    """No node can host the actor."""

    error_message = ""

    def __init__(self, error_message=""):
        super().__init__(error_message)
        self.error_message = error_message

    def _default_str(self):
        return f"The actor is not schedulable: {self.error_message}"


class ObjectRefStreamEndOfStreamError(RayError):
    """A streaming generator has no more ObjectRefs."""


class RayChannelError(RaySystemError):
    """A compiled-graph channel failed (not supported by rayx)."""


class RayChannelTimeoutError(RayChannelError, TimeoutError):
    """A compiled-graph channel timed out (not supported by rayx)."""


# --- rayx's own -------------------------------------------------------------------

class InfeasibleError(TaskUnschedulableError):
    """No node of the cluster could ever hold the requested resources."""


class RuntimeStoppedError(RaySystemError):
    """rayx was shut down while the call was pending."""


# rayx's C++ error kinds (TaskError.type) -> the class raised in Python.
_KINDS = {
    "WorkerCrashed": WorkerCrashedError,
    "WorkerUnreachable": WorkerCrashedError,
    "WorkerStartFailed": WorkerCrashedError,
    "ActorDied": ActorDiedError,
    "Infeasible": InfeasibleError,
    "PlacementGroupRemoved": TaskPlacementGroupRemoved,
    "ObjectLost": ObjectLostError,
    "OutOfMemory": OutOfMemoryError,  # the node's memory monitor killed the worker
    "ObjectStoreFullError": ObjectStoreFullError,  # a result found the store and spill full
    "RuntimeStopped": RuntimeStoppedError,
}


def _check_kinds():
    # Every kind mapped here is one C++ names (the same table): a renamed kind
    # fails the import, not a user's error later.
    from rayx import _core
    unknown = set(_KINDS) - set(_core.TASK_ERROR_KINDS)
    if unknown:
        raise ImportError(f"rayx.exceptions maps unknown task error kinds: {sorted(unknown)}")


_check_kinds()


def from_core(kind, message, function, node):
    """The Python exception for a rayx._core.TaskError's fields."""
    cls = _KINDS.get(kind, RaySystemError)
    where = f" on node {node}" if node else ""
    return cls._with_message(f"{function} failed{where}: {kind}: {message}")


RAY_EXCEPTION_TYPES = [
    PlasmaObjectNotAvailable, RayError, RayTaskError, WorkerCrashedError, RayActorError,
    ObjectStoreFullError, ObjectLostError, ObjectFetchTimedOutError,
    ReferenceCountingAssertionError, ObjectReconstructionFailedError,
    ObjectReconstructionFailedMaxAttemptsExceededError,
    ObjectReconstructionFailedLineageEvictedError, OwnerDiedError, GetTimeoutError,
    AsyncioActorExit, RuntimeEnvSetupError, TaskPlacementGroupRemoved, ActorPlacementGroupRemoved,
    PendingCallsLimitExceeded, LocalRayletDiedError, TaskUnschedulableError, ActorDiedError,
    ActorUnschedulableError, ActorUnavailableError, RayChannelError, RayChannelTimeoutError,
]

__all__ = sorted({c.__name__ for c in RAY_EXCEPTION_TYPES} | {
    "ActorUnavailableError", "CrossLanguageError", "InfeasibleError", "NodeDiedError",
    "ObjectFreedError", "ObjectRefStreamEndOfStreamError", "OutOfDiskError", "OutOfMemoryError",
    "RaySystemError", "RayxError", "RayxTaskError", "RpcError", "RuntimeStoppedError",
    "TaskCancelledError", "UserCodeException",
})
