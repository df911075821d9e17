"""@rayx.remote: remote functions, actor classes and actor handles.

A call travels as C++ call arguments:
    [header, arguments, ref values...]
header is pickle((code key, name, num_returns)) for tasks and actor creation,
pickle((method, num_returns, actor id[, concurrency group])) for actor
methods; arguments is the
serialized (args, kwargs) with each ObjectRef replaced by a slot number; the
ObjectRefs themselves follow as C++ object arguments, which the runtime
resolves before the call runs (a ref nested inside a value arrives resolved).
Functions and classes are exported once per job through the head's KV under
their content hash and loaded once per worker (rayx._worker). The head drops
a job's code when the job ends, and each init() starts a new job: what this
process exported is remembered per init (rayx._api.generation).
"""

import hashlib
import json
import pickle

from rayx import _api
from rayx import _core
from rayx import _serialization as ser

KV_NAMESPACE = "rayx.py.fn"
# Where detached actors made by older rayx kept their Python class name and
# method num_returns, by actor id (now ActorInfo::metadata, with the name).
_OLD_ACTOR_NAMESPACE = "rayx.py.actor"
# Ray's default: a task whose worker or node dies runs again up to 3 times.
DEFAULT_MAX_RETRIES = 3
# The head's KV holds values up to 1 MiB: a bigger function or class (a closure
# capturing data) is refused at .remote().
MAX_CODE_BYTES = 1 << 20

_TASK_OPTIONS = {"num_cpus", "num_gpus", "resources", "name", "num_returns", "max_retries",
                 "retry_exceptions", "scheduling_strategy", "placement_group",
                 "placement_group_bundle_index", "placement_group_capture_child_tasks",
                 "memory", "runtime_env", "label_selector", "max_calls", "enable_task_events",
                 "accelerator_type", "_metadata"}
_ACTOR_OPTIONS = {"num_cpus", "num_gpus", "resources", "name", "lifetime", "max_restarts",
                  "max_task_retries", "scheduling_strategy", "placement_group",
                  "placement_group_bundle_index", "placement_group_capture_child_tasks",
                  "namespace", "get_if_exists", "max_concurrency", "memory", "runtime_env",
                  "label_selector", "concurrency_groups", "max_pending_calls",
                  "enable_task_events", "accelerator_type", "_metadata"}
# Accepted with no effect here: max_calls (a task worker is kept for the next
# task), max_pending_calls (calls queue without a limit), enable_task_events
# (rayx records no task events), memory (not a resource rayx schedules),
# _metadata. max_concurrency and concurrency_groups travel to the actor's
# worker (rayx._concurrency).

# The context of the call running in this worker process, set by
# rayx._worker: the task's (per call) or the actor's (at creation). A dict with
# "res" (resources held, when not a task's default {CPU: 1}), "pg" and
# "bundle" (its placement group), "cap" (children go to that group too),
# "actor" (the actor's id), or None.
_call_ctx = None
# The placement group children of the running call go to by default
# (placement_group_capture_child_tasks), or None: part of a RemoteFunction's
# prepared call, checked on every .remote().
_capture = None
# Of this worker process (rayx._worker sets them): how many calls it has run
# (names the running one for get_task_id), whether it hosts an actor, that
# actor's id (its methods' calls carry it) and whether its construction was a
# restart.
_call_count = lambda: 0  # noqa: E731 - replaced by rayx._worker
_hosted_actor_id = lambda: None  # noqa: E731 - replaced by rayx._worker
_is_actor = False
_actor_reconstructed = False

# The method every Python actor answers (with None) once it runs.
READY_METHOD = "__rayx_ready__"
_HANDLE_WAIT_S = 300

# (id(obj), detached) -> (obj, generation, key): what this process exported,
# in which init() of it.
_exported = {}


def _export(obj, detached):
    """The KV key of `obj`'s code, exporting it on first use in this job."""
    cache_key = (id(obj), detached)
    hit = _exported.get(cache_key)
    if hit is not None and hit[0] is obj and hit[1] == _api.generation:
        return hit[2]
    import cloudpickle
    try:
        code = cloudpickle.dumps(obj, protocol=5)
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"cannot export {_name(obj)} to the cluster: "
                        f"{ser._describe_unpicklable(obj, e)}") from e
    if len(code) > MAX_CODE_BYTES:
        raise ValueError(
            f"{_name(obj)} pickles to {len(code)} bytes, over the {MAX_CODE_BYTES}-byte limit for "
            "remote functions and classes: it probably captures large data. Store the data with "
            "rayx.put() and pass the ObjectRef as an argument instead.")
    digest = hashlib.sha256(code).hexdigest()[:40]
    # Detached actors outlive their job: their class is kept until deleted.
    key = f"detached/{digest}" if detached else f"{_core.job_id()}/{digest}"
    _core.kv_put(KV_NAMESPACE, key, code, True, not detached)
    _exported[cache_key] = (obj, _api.generation, key)
    return key


def _name(obj):
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


class _Slot:
    """Stands for the ObjectRef argument number `i` (its element `index`)."""
    __slots__ = ("i", "index")

    def __init__(self, i, index):
        self.i = i
        self.index = index

    def __reduce__(self):
        return (_Slot, (self.i, self.index))


_EMPTY_ARGS = None


def encode_args(args, kwargs):
    """[arguments blob, ObjectRef cores...] for a call."""
    global _EMPTY_ARGS
    if not args and not kwargs:
        if _EMPTY_ARGS is None:
            _EMPTY_ARGS = bytes(ser.to_bytes(((), {})))
        return [_EMPTY_ARGS]
    value = (args, kwargs)
    if ser._builtin(value, 0):  # no ObjectRef in it: the common case, without the slot walk
        return [ser.builtin_bytes(value)]
    cores = []
    slots = {}

    def slot(ref):
        key = ref._core.id
        i = slots.get(key)
        if i is None:
            i = slots[key] = len(cores)
            cores.append(ref._core)
        return i

    def top(a):
        if isinstance(a, _api.ObjectRef) and not a._resolved:
            if a._index is _api._DYNAMIC:
                return _api._get_one(a, None)  # its items' refs, below
            return _Slot(slot(a), a._index)
        return a

    def nested(ref):
        if ref._index is _api._DYNAMIC and not ref._resolved:
            _api._get_one(ref, None)  # the generator finished: its items' refs go by value
        if ref._resolved:
            return None  # pickled by value
        return (slot(ref), ref._index)

    top_args = tuple(top(a) for a in args)
    top_kwargs = {k: top(v) for k, v in kwargs.items()}
    blob = ser.to_bytes((top_args, top_kwargs), on_ref=nested)
    return [blob] + cores


def _resources(opts, default_cpu):
    res = {}
    cpus = opts.get("num_cpus")
    if cpus is None:
        cpus = default_cpu
    if cpus:
        res["CPU"] = float(cpus)
    if opts.get("num_gpus"):
        res["GPU"] = float(opts["num_gpus"])
    res.update(_api._check_resources(opts.get("resources") or {}, "options"))
    explicit = any(opts.get(k) is not None for k in ("num_cpus", "num_gpus", "resources"))
    return res, explicit


def _placement(opts, capture=None):
    """The Placement dict of `opts`, and the call context's placement group
    fields (pg, bundle, cap) for its header."""
    if capture is None and not _has_placement(opts):
        return {}, {}
    from rayx.util import scheduling_strategies as ss
    from rayx.util.placement_group import PlacementGroup
    p = {}
    strategy = opts.get("scheduling_strategy")
    pg = opts.get("placement_group")
    bundle = opts.get("placement_group_bundle_index", -1)
    cap = opts.get("placement_group_capture_child_tasks")
    if isinstance(strategy, ss.PlacementGroupSchedulingStrategy):
        pg = strategy.placement_group
        bundle = strategy.placement_group_bundle_index
        cap = strategy.placement_group_capture_child_tasks
        if pg is None:
            pg = "none"  # explicitly outside any group, a captured parent's included
    elif isinstance(strategy, ss.NodeAffinitySchedulingStrategy):
        p["strategy"] = "NODE_AFFINITY"
        p["node_id"] = strategy.node_id
        p["soft"] = bool(strategy.soft)
    elif isinstance(strategy, ss.NodeLabelSchedulingStrategy):
        p["label_selector"] = strategy.label_selector()
    elif strategy in (None, "DEFAULT"):
        pass
    elif strategy == "SPREAD":
        p["strategy"] = "SPREAD"
    else:
        raise ValueError(f"scheduling_strategy {strategy!r}: use 'DEFAULT', 'SPREAD', "
                         "NodeAffinitySchedulingStrategy, NodeLabelSchedulingStrategy or "
                         "PlacementGroupSchedulingStrategy")
    selector = opts.get("label_selector")
    if selector is not None:
        if not isinstance(selector, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
            raise TypeError("label_selector must be a dict of label name to value (str to str)")
        for k, v in selector.items():
            if v.startswith("!") or v.startswith("in(") or v.startswith("!in("):
                raise ValueError(f"label_selector[{k!r}] = {v!r}: rayx matches labels by "
                                 "equality only: give the one value the node must have")
        p.setdefault("label_selector", {}).update(selector)
    accelerator = opts.get("accelerator_type")
    if accelerator is not None:
        # A node started with --labels accelerator_type=<name> (rayx.util.accelerators).
        if not isinstance(accelerator, str) or not accelerator:
            raise TypeError("accelerator_type must be a name such as 'V100' "
                            "(rayx.util.accelerators)")
        p.setdefault("label_selector", {})["accelerator_type"] = accelerator
    ctx = {}
    if pg is None and strategy is None and capture is not None:
        pg, bundle, cap = capture, -1, True  # a child of a capturing group's call
    if pg is not None and pg != "default" and pg != "none":
        if isinstance(pg, PlacementGroup):
            pg_id = pg.id
            count = None if pg._bundles is None else len(pg._bundles)
        elif isinstance(pg, str):
            pg_id, count = pg, None
        else:
            raise TypeError("placement_group must be a rayx.util.placement_group(...) result")
        if bundle is None:
            bundle = -1
        if count is not None and not -1 <= bundle < count:
            raise ValueError(f"placement_group_bundle_index {bundle} is out of range: the group "
                             f"has {count} bundles")
        p["placement_group_id"] = pg_id
        p["bundle_index"] = int(bundle)
        ctx = {"pg": pg_id, "bundle": int(bundle)}
        if cap:
            ctx["cap"] = True
    return p, ctx


def _retry_spec(retry, what="retry_exceptions"):
    """retry_exceptions as the worker checks it: False, True, or the qualified
    names of the exception classes to retry."""
    if retry is None or isinstance(retry, bool):
        return bool(retry)
    if isinstance(retry, (list, tuple)) and retry and all(
            isinstance(c, type) and issubclass(c, BaseException) for c in retry):
        return tuple(f"{c.__module__}.{c.__qualname__}" for c in retry)
    raise TypeError(f"{what}: retry_exceptions must be True, False or a non-empty list of "
                    f"exception classes, not {retry!r}")


def _check_options(opts, allowed, what):
    bad = set(opts) - allowed
    if bad:
        raise TypeError(f"{what}: unknown option(s) {', '.join(sorted(bad))}; valid: "
                        f"{', '.join(sorted(allowed))}")
    for k in ("num_cpus", "num_gpus"):
        v = opts.get(k)
        if v is not None and (not isinstance(v, (int, float)) or v < 0):
            raise ValueError(f"{what}: {k} must be a number >= 0, not {v!r}")
    gpus = opts.get("num_gpus")
    if gpus is not None and gpus > 1 and gpus != int(gpus):
        # The head's rule (ResourceDemand::CheckGpuAmount), said before the call is sent.
        raise ValueError(f"{what}: num_gpus={gpus!r}: an amount above 1 must be a whole number "
                         "of GPUs (a share never spans two devices)")
    n = opts.get("num_returns", 1)
    if n not in _api.GENERATOR_RETURNS and (not isinstance(n, int) or n < 1):
        raise ValueError(f"{what}: num_returns must be an int >= 1, \"streaming\" or "
                         f"\"dynamic\", not {n!r}")
    if "max_concurrency" in opts or "concurrency_groups" in opts:
        from rayx import _concurrency
        _concurrency.check_options(opts.get("max_concurrency"), opts.get("concurrency_groups"),
                                   what)
    retries = opts.get("max_retries")
    if retries is not None and (not isinstance(retries, int) or retries < -1):
        raise ValueError(f"{what}: max_retries must be an int >= 0 (or -1), not {retries!r}")
    _retry_spec(opts.get("retry_exceptions"), what)
    for k in ("max_restarts", "max_task_retries"):
        v = opts.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < -1):
            raise ValueError(f"{what}: {k} must be an int >= 0 (or -1: no limit), not {v!r}")


def _check_group(group, what):
    if group is not None and (not isinstance(group, str) or not group):
        raise TypeError(f"{what}: concurrency_group must be a group's name (a non-empty "
                        f"string), not {group!r}")


def _refs(core, n, name=None):
    if n == 1:
        return _api.ObjectRef(core, None, name)
    if n == "streaming":
        return _api.ObjectRefGenerator(core, name)
    if n == "dynamic":
        return _api.ObjectRef(core, _api._DYNAMIC, name)
    return [_api.ObjectRef(core, i, name) for i in range(n)]


class RemoteFunction:
    """A function run as tasks in the cluster: f.remote(...) -> ObjectRef."""

    def __init__(self, function, options):
        _check_options(options, _TASK_OPTIONS, f"@rayx.remote({_name(function)})")
        if options.get("runtime_env") is not None:
            from rayx import _runtime_env
            _runtime_env.validate(options["runtime_env"], f"@rayx.remote({_name(function)})")
        self._function = function
        self._options = options
        # (generation, capture, num_returns, header, submit_task's other
        # arguments): the call worked out once per job and call context.
        self._prepared = None
        self.__name__ = getattr(function, "__name__", "remote_function")
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)
        self.__doc__ = getattr(function, "__doc__", None)
        self.__wrapped__ = function

    def __call__(self, *args, **kwargs):
        raise TypeError(f"remote function {self.__name__} cannot be called directly: use "
                        f"{self.__name__}.remote(...)")

    def __getstate__(self):
        # A copy in another process (captured by a task) works its call out again.
        state = dict(self.__dict__)
        state["_prepared"] = None
        return state

    def options(self, **options):
        merged = dict(self._options)
        merged.update(options)
        return RemoteFunction(self._function, merged)

    def remote(self, *args, **kwargs):
        if _api._mode is None:
            _api._auto_init()
        p = self._prepared
        if p is None or p[0] != _api.generation or p[1] != _capture:
            p = self._prepare()
        core = _core.submit_task("rayx.py.task", [p[3]] + encode_args(args, kwargs), *p[4])
        return _refs(core, p[2])

    def _prepare(self):
        """Works out the options' meaning for this job and call context: the
        code exported, the header, resources, placement and runtime_env."""
        opts = self._options
        capture = _capture
        n = opts.get("num_returns")
        if n is None:
            n = "streaming" if _is_generator(self._function) else 1
        key = _export(self._function, False)
        res, explicit = _resources(opts, 1)
        placement, ctx = _placement(opts, capture)
        if explicit and res != {"CPU": 1.0}:
            ctx["res"] = res
        env = opts.get("runtime_env")
        if env is not None:
            from rayx import _runtime_env
            resolved = _runtime_env.resolve(env, _runtime_env.current)
            if resolved:
                placement.update(_runtime_env.worker_placement(resolved, _worker_base_env()))
        header = pickle.dumps((key, _name(self._function), n,
                               _retry_spec(opts.get("retry_exceptions")), ctx or None))
        retries = opts.get("max_retries")
        if n in _api.GENERATOR_RETURNS:
            retries = 0  # items already taken could not be made again: never retried
        elif retries is None:
            retries = DEFAULT_MAX_RETRIES
        elif retries == -1:
            retries = 2**31 - 1  # Ray's "retry forever"
        submit = (opts.get("name") or self.__name__, res, explicit, placement, retries,
                  bool(opts.get("retry_exceptions")))
        self._prepared = (_api.generation, capture, n, header, submit)
        return self._prepared


def _has_placement(opts):
    return any(opts.get(k) is not None for k in
               ("scheduling_strategy", "placement_group", "label_selector", "accelerator_type"))


def _worker_base_env():
    """The environment every Python worker of this process's calls gets."""
    return _api._worker_command()[2]


class ActorClass:
    """A class whose instances live in their own worker process:
    Cls.remote(...) -> ActorHandle."""

    def __init__(self, cls, options):
        _check_options(options, _ACTOR_OPTIONS, f"@rayx.remote({_name(cls)})")
        if options.get("runtime_env") is not None:
            from rayx import _runtime_env
            _runtime_env.validate(options["runtime_env"], f"@rayx.remote({_name(cls)})")
        self._cls = cls
        self._options = options
        self.__name__ = cls.__name__
        self.__qualname__ = getattr(cls, "__qualname__", cls.__name__)
        self.__doc__ = getattr(cls, "__doc__", None)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"actor class {self.__name__} cannot be instantiated directly: use "
                        f"{self.__name__}.remote(...)")

    def options(self, **options):
        merged = dict(self._options)
        merged.update(options)
        return ActorClass(self._cls, merged)

    def remote(self, *args, **kwargs):
        if _api._mode is None:
            _api._auto_init()
        opts = self._options
        lifetime = opts.get("lifetime")
        if lifetime not in (None, "detached", "non_detached"):
            raise ValueError(f"lifetime must be 'detached' or None, not {lifetime!r}")
        detached = lifetime == "detached"
        namespace = opts.get("namespace")
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(f"namespace must be a non-empty string, not {namespace!r}")
        user_name = opts.get("name") or ""
        if user_name and not isinstance(user_name, str):
            raise TypeError(f"an actor's name must be a string, not {type(user_name).__name__}")
        name = _full_name(user_name, namespace) if user_name else ""
        if detached and not name:
            raise ValueError("a detached actor needs a name (options(name=...)), so that it can "
                             "be found with rayx.get_actor after this job ends")
        get_if_exists = bool(name and opts.get("get_if_exists"))
        if get_if_exists:
            try:
                return _get_actor_by_full_name(name)
            except ValueError:
                pass
        key = _export(self._cls, detached)
        res, _ = _resources(opts, 0)
        placement, ctx = _placement(opts, _capture)
        if res:
            ctx["res"] = res
        env = opts.get("runtime_env")
        if env is not None:
            from rayx import _runtime_env
            resolved = _runtime_env.resolve(env, _runtime_env.current)
            if resolved:
                ctx["env"] = resolved  # applied by the actor's worker before the class loads
        max_restarts = opts.get("max_restarts") or 0
        if max_restarts:
            import uuid
            # Names this actor across its restarts: its worker tells a first
            # construction from a restart by it.
            ctx["incarnation"] = uuid.uuid4().hex
            ctx["detached"] = detached
        conc = {}
        if opts.get("max_concurrency") is not None:
            conc["max"] = opts["max_concurrency"]
        if opts.get("concurrency_groups"):
            conc["groups"] = dict(opts["concurrency_groups"])
        if conc:
            ctx["conc"] = conc  # the worker runs the calls concurrently (rayx._concurrency)
        if user_name:
            ctx["name"] = user_name
            if namespace or _api._namespace:
                ctx["namespace"] = namespace or _api._namespace
        header = pickle.dumps((key, _name(self._cls), 1, ctx or None))
        returns = _method_returns(self._cls)
        # Kept with the name at the head, for rayx.get_actor in any process.
        metadata = json.dumps([self.__name__, returns]).encode() if name else b""
        try:
            core = _core.create_actor([header] + encode_args(args, kwargs), name, detached, res,
                                      placement, max_restarts,
                                      opts.get("max_task_retries") or 0, metadata)
        except ValueError as e:
            # Another process took the name between our lookup and our creation.
            if not get_if_exists or "already exists" not in str(e):
                raise
            return _get_actor_by_full_name(name)
        return ActorHandle(core, self.__name__, returns)

    def get_or_create(self, *args, **kwargs):
        """The actor named by options(name=...) if it exists, else a new one
        made with these arguments (which an existing actor ignores)."""
        if not self._options.get("name"):
            raise ValueError("get_or_create needs a name: Cls.options(name=...).get_or_create()")
        return self.options(get_if_exists=True).remote(*args, **kwargs)

    def bind(self, *args, **kwargs):
        raise NotImplementedError("Ray DAGs (.bind) are not supported by rayx: use .remote()")


def _full_name(name, namespace=None):
    """The name an actor has at the head: scoped by its namespace (the
    options', else the job's) when there is one."""
    namespace = namespace or _api._namespace
    return f"{namespace}/{name}" if namespace else name


def _is_generator(fn):
    import inspect
    fn = inspect.unwrap(fn)
    return inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)


def _method_returns(cls):
    """num_returns of each method that is not 1: @rayx.method's, else
    "streaming" for generator methods (Ray's default)."""
    out = {}
    for attr in dir(cls):
        m = getattr(cls, attr, None)
        n = getattr(m, "__rayx_num_returns__", None)
        if n is None and callable(m) and _is_generator(m):
            n = "streaming"
        if n is not None:
            out[attr] = n
    return out


def method(*args, num_returns=None, concurrency_group=None, max_task_retries=None,
           retry_exceptions=None, enable_task_events=None, **unknown):
    """@rayx.method(num_returns=n) on an actor method. concurrency_group names
    the group its calls run in (one of the actor's concurrency_groups);
    max_task_retries, retry_exceptions and enable_task_events are accepted
    with no effect per method (set max_task_retries on the actor)."""
    del max_task_retries, retry_exceptions, enable_task_events
    if unknown:
        raise TypeError(f"rayx.method: unknown option(s) {', '.join(sorted(unknown))}; valid: "
                        "num_returns, concurrency_group, max_task_retries, retry_exceptions, "
                        "enable_task_events")
    if args:
        raise TypeError("@rayx.method takes keyword options, e.g. @rayx.method(num_returns=2)")
    if num_returns is not None:
        _check_options({"num_returns": num_returns}, {"num_returns"}, "rayx.method")
    _check_group(concurrency_group, "rayx.method")

    def wrap(fn):
        if num_returns is not None:
            fn.__rayx_num_returns__ = num_returns
        if concurrency_group is not None:
            fn.__rayx_concurrency_group__ = concurrency_group
        return fn
    return wrap


class ActorMethod:
    # Holds what a call needs (the actor's core, not its handle): a handle caches
    # its methods without a reference cycle. The core is what keeps an unnamed
    # actor alive (rayx._core releases it when the last core object of its
    # creator's handle goes), so a method keeps its actor too.
    __slots__ = ("_core", "_class_name", "_name", "_num_returns", "_header", "_group")

    def __init__(self, core, class_name, name, num_returns, group=None):
        self._core = core
        self._class_name = class_name
        self._name = name
        self._num_returns = num_returns
        self._header = None
        self._group = group

    def options(self, *, num_returns=None, concurrency_group=None, name=None,
                enable_task_events=None, **unused):
        """num_returns and concurrency_group (one of the actor's groups, for
        this call) for this call; name and enable_task_events are accepted
        with no effect here."""
        del name, enable_task_events
        if unused:
            raise TypeError(f"actor method options: unsupported {', '.join(sorted(unused))}; "
                            "valid: num_returns, concurrency_group, name, enable_task_events")
        if num_returns is not None:
            _check_options({"num_returns": num_returns}, {"num_returns"}, "actor method options")
        _check_group(concurrency_group, "actor method options")
        return ActorMethod(self._core, self._class_name, self._name,
                           num_returns or self._num_returns, concurrency_group or self._group)

    def remote(self, *args, **kwargs):
        if _api._mode is None:
            _api._auto_init()
        n = self._num_returns
        header = self._header
        if header is None:
            # The actor's id rides along: get_runtime_context().get_actor_id().
            fields = (self._name, n, self._core.id)
            if self._group is not None:
                fields += (self._group,)  # the worker runs it in that group
            header = self._header = pickle.dumps(fields)
        core = _core.submit_actor_task(self._core, [header] + encode_args(args, kwargs))
        return _refs(core, n, f"{self._class_name}.{self._name}")

    def __call__(self, *args, **kwargs):
        raise TypeError(f"actor method {self._name} cannot be called directly: use "
                        f".{self._name}.remote(...)")


class ActorHandle:
    """A handle to an actor: handle.method.remote(...) -> ObjectRef. Handles
    can be passed to tasks and other actors.

    Like Ray's, an actor goes when its creator's handle goes out of scope
    (after the calls already submitted have answered), unless it is named or
    detached, or the handle was passed to a task or another actor (then it
    lives until its job ends or rayx.kill)."""

    def __init__(self, core, class_name="", returns=None):
        self._core = core
        self._class_name = class_name
        self._returns = returns or {}

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        d = self.__dict__
        if "_core" not in d:
            raise AttributeError(name)
        method = ActorMethod(d["_core"], d["_class_name"], name, d["_returns"].get(name, 1))
        d[name] = method  # later lookups skip __getattr__
        return method

    @property
    def _actor_id(self):
        """The actor's id (Ray's handle._actor_id; .hex() gives the string)."""
        return _HexId(self._core.id)

    @property
    def __ray_ready__(self):
        """Ray's built-in method: its ObjectRef is ready once the actor runs."""
        return ActorMethod(self._core, self._class_name, READY_METHOD, 1)

    @property
    def __ray_terminate__(self):
        """Ray's built-in method: the actor exits once the calls before this one
        have run (rayx restarts it when max_restarts allows: use rayx.kill to
        stop one for good)."""
        return _TerminateMethod(self)

    @property
    def _ray_actor_id(self):
        return self._actor_id

    def __repr__(self):
        return f"Actor({self._class_name}, {self._core.id})"

    def __eq__(self, other):
        return isinstance(other, ActorHandle) and other._core.id == self._core.id

    def __hash__(self):
        return hash(self._core.id)

    def __reduce__(self):
        try:
            data = _core.serialize_actor(self._core)
        except RuntimeError:
            # Not running yet: a handle names the actor's process, so wait for
            # it to start (an ActorDiedError if it never does).
            _api.get(ActorMethod(self._core, self._class_name, READY_METHOD, 1).remote(),
                     timeout=_HANDLE_WAIT_S)
            data = _core.serialize_actor(self._core)
        return (_rebuild_handle, (data, self._class_name, self._returns))


class _TerminateMethod:
    def __init__(self, handle):
        self._handle = handle

    def remote(self):
        import uuid
        return ActorMethod(self._handle._core, self._handle._class_name, EXIT_METHOD,
                           1).remote(uuid.uuid4().hex)


class _HexId(str):
    """An id as Ray's ID objects show it: hex() and binary()."""

    def hex(self):
        return str(self)

    def binary(self):
        return str(self).encode()


def _rebuild_handle(data, class_name, returns):
    return ActorHandle(_core.deserialize_actor(data), class_name, returns)


def get_actor(name, namespace=None):
    """The named actor `name` (of any job, detached ones included), in
    `namespace` (default: the job's). ValueError when there is none."""
    _api._require()
    if not isinstance(name, str) or not name:
        raise ValueError("rayx.get_actor: name must be a non-empty string")
    return _get_actor_by_full_name(_full_name(name, namespace))


def _get_actor_by_full_name(name):
    try:
        core = _core.get_named_actor(name)
    except RuntimeError as e:
        raise ValueError(str(e)) from None
    if core.metadata:
        class_name, returns = json.loads(core.metadata)
        return ActorHandle(core, class_name, returns)
    # A detached actor made before the class info travelled with the name.
    described = _core.kv_get(_OLD_ACTOR_NAMESPACE, core.id)
    if described is None:
        return ActorHandle(core, name)  # not made by Python's ActorClass (e.g. from C++)
    class_name, returns = pickle.loads(described)
    return ActorHandle(core, class_name, returns)


# The method a Python actor answers by exiting its process at once (a crash to
# the runtime, which restarts the actor when max_restarts allows).
EXIT_METHOD = "__rayx_exit__"


def kill(actor, *, no_restart=True):
    """Stops the actor's process; its pending calls fail with ActorDiedError.

    no_restart=True (the default): at once, and for good. no_restart=False:
    the actor's process exits as if it crashed, so the runtime restarts it
    when its max_restarts allows; rayx has no out-of-band way to do that, so
    the exit happens once the calls sent before it have run."""
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"rayx.kill takes an actor handle, not {type(actor).__name__}")
    if no_restart:
        _core.kill_actor(actor._core)
        return
    import uuid
    ActorMethod(actor._core, actor._class_name, EXIT_METHOD, 1).remote(uuid.uuid4().hex)


def remote(*args, **options):
    """@rayx.remote or @rayx.remote(num_cpus=..., ...) on a function or class."""
    def make(obj):
        if isinstance(obj, type):
            return ActorClass(obj, options)
        if callable(obj):
            import inspect
            if inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj):
                raise NotImplementedError(
                    f"@rayx.remote on the async function {_name(obj)}: async remote functions "
                    "are not supported by rayx yet; make it a plain function")
            return RemoteFunction(obj, options)
        raise TypeError("@rayx.remote applies to functions and classes")
    if len(args) == 1 and not options and callable(args[0]):
        return make(args[0])
    if args:
        raise TypeError("@rayx.remote takes keyword options only, e.g. @rayx.remote(num_gpus=1)")
    return make


class CppFunction:
    """A C++ function registered with RAYX_REMOTE in `executable` (a rayx C++
    program: its main() calls rayx::Init(argc, argv) first), run as tasks by
    C++ workers. Arguments and the result cross as msgpack: None, bool, int,
    float, str, bytes, list, tuple and dict."""

    def __init__(self, name, executable, options):
        self._name = name
        self._executable = executable
        self._options = options

    def options(self, **options):
        _check_options(options, {"num_cpus", "num_gpus", "resources", "name",
                                 "scheduling_strategy", "placement_group",
                                 "placement_group_bundle_index"}, f"cpp_function({self._name})")
        merged = dict(self._options)
        merged.update(options)
        return CppFunction(self._name, self._executable, merged)

    def remote(self, *args):
        _api._require()
        values = [_core.msgpack_dumps(a, f"argument {i} of {self._name}") for i, a in enumerate(args)]
        res, explicit = _resources(self._options, 1)
        placement, _ = _placement(self._options)
        placement["worker_executable"] = self._executable
        core = _core.submit_task(self._name, values, self._options.get("name") or self._name, res,
                                 explicit, placement, DEFAULT_MAX_RETRIES, False)
        ref = _api.ObjectRef(core, None, self._name)
        ref._msgpack = True
        return ref


def cpp_function(name, executable=None):
    """rayx.cpp_function("Square", executable="./build/my_program").remote(7):
    calls a C++ function of a rayx C++ program (default: $RAYX_CPP_WORKER)."""
    import os
    executable = executable or os.environ.get("RAYX_CPP_WORKER", "")
    if not executable:
        raise ValueError("cpp_function: name the C++ program that registers the function "
                         "(executable=... or $RAYX_CPP_WORKER)")
    executable = os.path.abspath(executable)
    if not os.access(executable, os.X_OK):
        raise ValueError(f"cpp_function: {executable} is not an executable program")
    return CppFunction(name, executable, {})
