"""rayx's exceptions, with Ray's names."""


class RayxError(Exception):
    """Base of every error rayx raises."""


class RayxTaskError(RayxError):
    """A remote function or actor method raised. The instance raised by
    rayx.get is also an instance of the original exception's class, so
    `except ValueError:` still catches a remote ValueError."""

    def __init__(self, function_name, traceback_str, cause, node_ip="", pid=0):
        self.function_name = function_name
        self.traceback_str = traceback_str
        self.cause = cause
        self.node_ip = node_ip
        self.pid = pid
        super().__init__(self._message())

    def _message(self):
        where = f" on node {self.node_ip} (pid {self.pid})" if self.node_ip else ""
        return (f"{self.function_name} failed{where}:\n{self.traceback_str.rstrip()}")

    def __str__(self):
        return self._message()

    def as_instanceof_cause(self):
        """This error as an instance of both RayxTaskError and the cause's class."""
        cause_cls = type(self.cause)
        if cause_cls is RayxTaskError or not isinstance(self.cause, Exception) or \
                issubclass(cause_cls, RayxTaskError):
            return self
        name = f"RayxTaskError({cause_cls.__name__})"
        try:
            dual = _dual_classes.get(cause_cls)
            if dual is None:
                dual = type(name, (RayxTaskError, cause_cls), {
                    "__init__": lambda s, *a, **k: None,
                    "__str__": RayxTaskError.__str__,
                    "__reduce__": lambda s: (RayxTaskError, (s.function_name, s.traceback_str,
                                                             s.cause, s.node_ip, s.pid)),
                })
                dual.__module__ = "rayx.exceptions"
                _dual_classes[cause_cls] = dual
            err = dual.__new__(dual)
        except TypeError:
            return self  # classes that cannot be combined (e.g. conflicting layouts)
        err.function_name = self.function_name
        err.traceback_str = self.traceback_str
        err.cause = self.cause
        err.node_ip = self.node_ip
        err.pid = self.pid
        err.args = (self._message(),)
        try:
            err.__dict__.update({k: v for k, v in vars(self.cause).items()
                                 if k not in err.__dict__})
        except TypeError:
            pass
        return err


_dual_classes = {}


class WorkerCrashedError(RayxError):
    """The worker running the task died (killed, crashed, its node died)."""


class ActorDiedError(RayxError):
    """The actor's process died, it was killed, or its constructor failed."""


class GetTimeoutError(RayxError, TimeoutError):
    """rayx.get timed out."""


class ObjectLostError(RayxError):
    """Every copy of the object is gone (its node died)."""


class InfeasibleError(RayxError):
    """No node of the cluster could ever hold the requested resources."""


class RuntimeStoppedError(RayxError):
    """rayx was shut down while the call was pending."""


class CrossLanguageError(RayxError):
    """A value cannot cross between Python and C++."""


# rayx's C++ error kinds (TaskError.type) -> the class raised in Python.
_KINDS = {
    "WorkerCrashed": WorkerCrashedError,
    "WorkerUnreachable": WorkerCrashedError,
    "WorkerStartFailed": WorkerCrashedError,
    "ActorDied": ActorDiedError,
    "Infeasible": InfeasibleError,
    "PlacementGroupRemoved": RayxError,
    "ObjectLost": ObjectLostError,
    "RuntimeStopped": RuntimeStoppedError,
}


def from_core(kind, message, function, node):
    """The Python exception for a rayx._core.TaskError's fields."""
    cls = _KINDS.get(kind, RayxError)
    where = f" on node {node}" if node else ""
    return cls(f"{function} failed{where}: {kind}: {message}")


__all__ = [
    "RayxError", "RayxTaskError", "WorkerCrashedError", "ActorDiedError", "GetTimeoutError",
    "ObjectLostError", "InfeasibleError", "RuntimeStoppedError", "CrossLanguageError",
]
