"""runtime_env: a job's, task's or actor's environment (Ray's option).

Supported fields:
    env_vars     {name: value}, set in the worker's environment.
    working_dir  a local directory, packed (minus `excludes`, .gitignore files
                 and .git/__pycache__/*.pyc) and uploaded once to the head's
                 package store; each node unpacks it once, and the worker runs
                 in it (its cwd, first on sys.path).
    py_modules   local package directories, .py files or imported modules,
                 uploaded the same way and put on the worker's sys.path.
    excludes     gitignore-style patterns left out of working_dir and py_modules.
    worker_process_setup_hook
                 a function (or "module.function") each worker process runs once,
                 before its first call (after the directories are in place).
    config       accepted (RuntimeEnvConfig); nothing to configure here.
Fields that install packages (pip, conda, uv, container, image_uri, ...) are
refused: a rayx worker uses the Python environment of its node.

How it reaches workers. A resolved env (directories replaced by their
package hashes) travels as JSON:
  - the job's (init(runtime_env=)): in the worker command every lease of the
    job starts with (rayx._worker's `--runtime-env` argument; env_vars also in
    the process environment);
  - a task's own: in its call's Placement (worker_args and worker_env), so its
    workers are started for it and form their own pool (Placement::Key
    includes the arguments): tasks with different envs never share a worker;
  - an actor's own: in its creation call; the actor's worker (its own
    process) applies it before loading the class.
A task's or actor's env is merged over its parent's (the job's, or the
submitting task's): its fields replace the parent's, env_vars are merged.
"""

import json
import os
import re
import sys
import tempfile

from rayx import _core

SUPPORTED = ("env_vars", "working_dir", "py_modules", "excludes", "worker_process_setup_hook",
             "config")
_PACKAGE_FIELDS = ("pip", "conda", "uv", "container", "image_uri", "java_jars",
                   "py_executable", "nsight", "rocprof_sys", "mpi", "_inject_current_ray")
# Where a setup hook given as a function is kept (by content hash) for workers.
HOOK_NAMESPACE = "rayx.py.setup_hook"
# Left out of every upload, as `rayx job submit` does.
DEFAULT_EXCLUDES = (".git", "__pycache__", "*.pyc")
# The largest directory uploaded (packed); the head has its own limit too.
MAX_PACKAGE_BYTES = 512 << 20
ARG = "--runtime-env"

# The env this process runs in (a worker: its job's, task's or actor's; a
# driver: the job's), resolved. Children inherit it.
current = None

# (generation, canonical JSON of an unresolved env) -> resolved env.
_resolved_cache = {}


def validate(env, where):
    """Raises a clear error for what rayx cannot honour in `env`."""
    if env is None:
        return
    if not isinstance(env, dict):
        raise TypeError(f"{where}: runtime_env must be a dict (or RuntimeEnv), not "
                        f"{type(env).__name__}")
    for key, value in env.items():
        if key in _PACKAGE_FIELDS:
            if value in (None, "", [], {}):
                continue
            raise ValueError(
                f"{where}: runtime_env['{key}'] is not supported by rayx: a worker uses the "
                "Python environment of its node, so install the packages there (the same "
                "venv or image on every node) and drop this field. Supported: "
                + ", ".join(SUPPORTED))
        if key not in SUPPORTED:
            raise ValueError(f"{where}: runtime_env has an unknown field '{key}'; the fields "
                             f"rayx supports: {', '.join(SUPPORTED)}")
    env_vars = env.get("env_vars")
    if env_vars is not None:
        if not isinstance(env_vars, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
            raise TypeError(f"{where}: runtime_env['env_vars'] must be a dict of str to str")
        for k in env_vars:
            if not k or "=" in k or "\0" in k:
                raise ValueError(f"{where}: runtime_env['env_vars'] has a bad name {k!r}")
            if k.startswith("RAYX_"):
                raise ValueError(f"{where}: runtime_env['env_vars'][{k!r}]: RAYX_ variables are "
                                 "set by rayx itself")
    wd = env.get("working_dir")
    if wd is not None:
        if not isinstance(wd, (str, os.PathLike)):
            raise TypeError(f"{where}: runtime_env['working_dir'] must be a local directory path")
        wd = os.fspath(wd)
        if "://" in wd:
            raise ValueError(f"{where}: runtime_env['working_dir'] {wd!r}: remote URIs are not "
                             "supported by rayx; give a local directory")
        if not wd.startswith("pkg:") and not os.path.isdir(wd):
            raise ValueError(f"{where}: runtime_env['working_dir'] {wd!r} is not a directory")
    mods = env.get("py_modules")
    if mods is not None:
        if not isinstance(mods, (list, tuple)):
            raise TypeError(f"{where}: runtime_env['py_modules'] must be a list")
        for m in mods:
            _module_path(m, where)
    hook = env.get("worker_process_setup_hook")
    if hook is not None and not callable(hook) and not (
            isinstance(hook, str) and "." in hook.strip(".")):
        raise TypeError(f"{where}: runtime_env['worker_process_setup_hook'] must be a function "
                        "or a 'module.function' string")
    excludes = env.get("excludes")
    if excludes is not None and (not isinstance(excludes, (list, tuple)) or
                                 not all(isinstance(e, str) for e in excludes)):
        raise TypeError(f"{where}: runtime_env['excludes'] must be a list of patterns")


def _module_path(m, where):
    """The local path of a py_modules entry (a path or an imported module)."""
    if isinstance(m, str) and m.startswith("pkg:"):
        return m
    if hasattr(m, "__file__") and not isinstance(m, (str, os.PathLike)):
        if m.__file__ is None:
            raise ValueError(f"{where}: py_modules: module {m.__name__} has no file")
        path = m.__file__
        if os.path.basename(path) == "__init__.py":
            path = os.path.dirname(path)
        return path
    if not isinstance(m, (str, os.PathLike)):
        raise TypeError(f"{where}: py_modules entries are paths or modules, not {m!r}")
    path = os.fspath(m)
    if "://" in path or path.endswith(".whl"):
        raise ValueError(f"{where}: py_modules entry {path!r}: remote URIs and wheels are not "
                         "supported by rayx; give a local package directory or .py file")
    if not (os.path.isdir(path) or (os.path.isfile(path) and path.endswith(".py"))):
        raise ValueError(f"{where}: py_modules entry {path!r} is not a directory or .py file")
    return path


def merge(parent, child):
    """`child` over `parent` (both resolved): child's fields win; env_vars merge."""
    if not parent:
        return child
    if not child:
        return parent
    out = dict(parent)
    out.update(child)
    if parent.get("env_vars") and child.get("env_vars"):
        out["env_vars"] = {**parent["env_vars"], **child["env_vars"]}
    return out


def resolve(env, parent):
    """`env` validated, its directories uploaded (once per job), merged over
    `parent`: the dict workers apply. None when there is nothing to apply."""
    from rayx import _api
    validate(env, "runtime_env")
    key = (_api.generation, json.dumps(_jsonable(env), sort_keys=True))
    own = _resolved_cache.get(key)
    if own is None:
        own = {}
        excludes = list(env.get("excludes") or ())
        if env.get("env_vars"):
            own["env_vars"] = dict(env["env_vars"])
        if env.get("working_dir") is not None:
            wd = os.fspath(env["working_dir"])
            own["working_dir"] = wd if wd.startswith("pkg:") else _upload(wd, excludes)
        if env.get("py_modules"):
            own["py_modules"] = [_upload_module(_module_path(m, "runtime_env"), excludes)
                                 for m in env["py_modules"]]
        hook = env.get("worker_process_setup_hook")
        if hook is not None:
            own["worker_process_setup_hook"] = hook if isinstance(hook, str) else _export_hook(hook)
        _resolved_cache[key] = own
    merged = merge(parent, own)
    return merged or None


def _export_hook(fn):
    """'kv:<key>': the function, kept in the head's KV for the job's workers."""
    import cloudpickle
    import hashlib
    blob = cloudpickle.dumps(fn)
    key = hashlib.sha256(blob).hexdigest()[:40]
    _core.kv_put(HOOK_NAMESPACE, key, blob, True, True)
    return "kv:" + key


def _run_hook(hook):
    if hook.startswith("kv:"):
        blob = _core.kv_get(HOOK_NAMESPACE, hook[3:])
        if blob is None:
            raise RuntimeError("the worker_process_setup_hook is not in the cluster's KV (its "
                               "job ended)")
        import pickle
        pickle.loads(blob)()
        return
    import importlib
    module, _, name = hook.rpartition(".")
    getattr(importlib.import_module(module), name)()


def _jsonable(env):
    out = {}
    for k, v in env.items():
        if k == "worker_process_setup_hook" and callable(v):
            import cloudpickle
            import hashlib
            v = hashlib.sha256(cloudpickle.dumps(v)).hexdigest()
        elif k == "py_modules":
            v = [_module_path(m, "runtime_env") for m in v]
        elif isinstance(v, os.PathLike):
            v = os.fspath(v)
        out[k] = v
    return out


def _upload(path, excludes):
    """'pkg:<hash>' of the directory `path` in the head's package store."""
    path = os.path.abspath(path)
    left_out = excluded_paths(path, list(DEFAULT_EXCLUDES) + list(excludes))
    patterns = ["./" + _tar_escape(p) for p in left_out]
    try:
        return "pkg:" + _core.upload_package(path, patterns, MAX_PACKAGE_BYTES)
    except ValueError as e:
        raise ValueError(f"runtime_env: cannot upload {path}: {e}. Leave large files out "
                         "with runtime_env['excludes'] (gitignore patterns)") from None


def _upload_module(path, excludes):
    """'pkg:<hash>/<name>': the package directory (or .py file) `path`,
    unpacked on the worker as <dir>/<name> with <dir> on sys.path."""
    if isinstance(path, str) and path.startswith("pkg:"):
        return path
    path = os.path.abspath(path)
    name = os.path.basename(path.rstrip("/"))
    if os.path.isfile(path):
        import shutil
        staging = tempfile.mkdtemp(prefix="rayx-py-module-")
        try:
            shutil.copy2(path, os.path.join(staging, name))
            return _upload(staging, excludes) + "/."
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return _upload(path, excludes) + "/" + name


def _tar_escape(path):
    return re.sub(r"([*?\[\]\\])", r"\\\1", path)


# --- gitignore-style patterns ----------------------------------------------------

def _compile(pattern):
    """(regex over a relative posix path, negated, directories only) for one
    gitignore line, or None for blanks and comments."""
    line = pattern.rstrip("\n")
    if not line.strip() or line.startswith("#"):
        return None
    if line.startswith("\\#") or line.startswith("\\!"):
        line = line[1:]
        negate = False
    else:
        negate = line.startswith("!")
        if negate:
            line = line[1:]
    line = re.sub(r"(?<!\\)\s+$", "", line)
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    anchored = "/" in line
    line = line.lstrip("/")
    if not line:
        return None
    out = []
    i = 0
    while i < len(line):
        if line.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif line.startswith("/**", i) and i + 3 == len(line):
            out.append("/.*")
            i += 3
        elif line.startswith("**", i):
            out.append(".*")
            i += 2
        elif line[i] == "*":
            out.append("[^/]*")
            i += 1
        elif line[i] == "?":
            out.append("[^/]")
            i += 1
        elif line[i] == "[":
            j = line.find("]", i + 1)
            if j < 0:
                out.append(re.escape("["))
                i += 1
            else:
                body = line[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j + 1
        elif line[i] == "\\" and i + 1 < len(line):
            out.append(re.escape(line[i + 1]))
            i += 2
        else:
            out.append(re.escape(line[i]))
            i += 1
    body = "".join(out)
    regex = ("^" if anchored else "^(?:.*/)?") + body + "$"
    return re.compile(regex), negate, dir_only


def _ignored(rules, rel, is_dir):
    """Whether the last rule matching `rel` excludes it."""
    verdict = False
    for base, (regex, negate, dir_only) in rules:
        if dir_only and not is_dir:
            continue
        if base:
            if not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1:]
        else:
            sub = rel
        if regex.match(sub):
            verdict = not negate
    return verdict


def excluded_paths(root, patterns):
    """The paths under `root` (relative, posix) that `patterns` and the
    .gitignore files met on the way leave out. A left-out directory is listed
    once, without its contents (as git, nothing inside it comes back)."""
    rules = [("", r) for r in map(_compile, patterns) if r is not None]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        gitignore = os.path.join(dirpath, ".gitignore")
        if os.path.isfile(gitignore):
            try:
                with open(gitignore, encoding="utf-8", errors="replace") as f:
                    rules = rules + [(rel_dir, r) for r in map(_compile, f) if r is not None]
            except OSError:
                pass
        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if _ignored(rules, rel, True):
                out.append(rel)
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if _ignored(rules, rel, False):
                out.append(rel)
    return out


# --- how envs reach workers ---------------------------------------------------------

def encode(env):
    return json.dumps(env, sort_keys=True, separators=(",", ":"))


def worker_placement(env, base_env):
    """The Placement fields of a task whose workers apply `env`: this
    interpreter running rayx._worker with the env as an argument (which keeps
    its pool apart) and env_vars in the process environment."""
    worker_env = dict(base_env)
    worker_env.update(env.get("env_vars") or {})
    return {"worker_executable": sys.executable,
            "worker_args": ["-m", "rayx._worker", ARG, encode(env)],
            "worker_env": worker_env}


def install_worker_command(env):
    """Workers this process starts from now on (no env of their own) apply
    `env`: the job's in a driver, the running task's or actor's in a worker."""
    global current
    current = env
    from rayx import _api
    exe, args, base = _api._worker_command()
    worker_env = dict(base)
    if env:
        args = args + [ARG, encode(env)]
        worker_env.update(env.get("env_vars") or {})
    _core.set_worker_command(exe, args, worker_env)


# The setup hooks this process ran (an actor's env repeats its job's).
_hooks_run = set()


def _cache_root():
    return os.path.join(tempfile.gettempdir(), "rayx-runtime-env")


def apply(env):
    """In a worker: makes `env` this process's environment (env_vars set, the
    working_dir its cwd and first on sys.path, py_modules on sys.path).
    Raises RuntimeEnvSetupError naming what failed."""
    from rayx import exceptions
    if not env:
        return
    try:
        os.environ.update(env.get("env_vars") or {})
        root = _cache_root()
        for mod in reversed(env.get("py_modules") or ()):
            hash_, _, name = mod[len("pkg:"):].partition("/")
            base = os.path.join(root, "py_modules", hash_)
            dest = base if name in ("", ".") else os.path.join(base, name)
            _core.fetch_package(hash_, dest)
            if base not in sys.path:
                sys.path.insert(0, base)
        wd = env.get("working_dir")
        if wd:
            dest = _core.fetch_package(wd[len("pkg:"):], os.path.join(root, "working_dir",
                                                                       wd[len("pkg:"):]))
            os.chdir(dest)
            if dest not in sys.path:
                sys.path.insert(0, dest)
        hook = env.get("worker_process_setup_hook")
        if hook and hook not in _hooks_run:
            _hooks_run.add(hook)
            _run_hook(hook)
    except Exception as e:  # noqa: BLE001 - reported to the caller
        raise exceptions.RuntimeEnvSetupError._with_message(
            f"Failed to set up runtime environment on node "
            f"{os.environ.get('RAYX_NODE_IP', '?')}: {type(e).__name__}: {e}") from e
    install_worker_command(env)
