#!/usr/bin/env python3
"""Runs Ray's Ray Core documentation examples on Ray or on rayx, one by one, and says which pass.

The examples are Ray's own code (Apache-2.0) and are not kept in this repository: take them
from a checkout of ray-project/ray, directory `doc/source/ray-core/doc_code` (one `.py` file
per example), and point --examples at that directory. Nothing is fetched at run time.

    # Ray (a venv outside the repository):
    /usr/bin/python3 -m venv --system-site-packages /path/ray-venv
    /path/ray-venv/bin/pip install "ray==2.60.*" grpcio
    python3 bench/ray_doc_examples.py --examples DIR --backend ray \\
        --python /path/ray-venv/bin/python --json ray.json
    # rayx (the developers' build), compared with that Ray run:
    PYTHONPATH=build/python RAYX_BIN_DIR=build/bin python3 bench/ray_doc_examples.py \\
        --examples DIR --backend rayx --python /usr/bin/python3 --ray-results ray.json \\
        --json rayx.json

For rayx each example's imports are rewritten and nothing else (`import ray` becomes
`import rayx as ray`, `import ray.util.x` becomes `import rayx.util.x; import rayx as ray`,
`from ray.x import y` becomes `from rayx.x import y`); for Ray the file runs as it is. Each
example runs in a fresh interpreter, in a fresh temp directory (its cwd and its TMPDIR, so
Ray's and rayx's private clusters and session files stay apart from anything else on the
machine; $RAYX_TEMP_DIR points at an empty directory there, so rayx's init() starts a private
one-machine cluster instead of joining one started with `rayx start`), with a timeout, and
counts as passed when it exits with status 0.

Not counted (EXCLUDED), with the reason: examples of APIs outside the scope of this
comparison, found in the code (comments and strings aside): `ray._private`,
`ray.experimental`, `ray.dag` and compiled graphs (`experimental_compile`, `cgraph_*`), tensor
transport (`tensor_transport`, GPU objects) and Neuron cores; and, found by running them, those
that cannot run on this machine on Ray either: a third-party module that is not installed
(ModuleNotFoundError), or a GPU the machine lacks. With --ray-results the Ray run's verdicts
decide the latter (a rayx failure is then never excused), so both backends count the same
examples.

Cleanup: each example starts in a new session (a timed-out one gets SIGTERM, then SIGKILL, to
its process group), and every process it starts, Ray's and rayx's daemons and workers
included, inherits a marker in its environment. When the example has ended, the runner gives
those processes 10 s to exit, then stops the rayx clusters whose sessions are in the example's
temp directory (`rayx stop --temp-dir`), then SIGTERMs and SIGKILLs whatever still carries the
marker, and records how many it found ("leftover_processes"). No process is ever found or
killed by name (so `ray stop --force`, which matches names machine-wide, is never run). An
example whose processes together use more than --max-memory-gb (proportional set size) is
stopped and fails, so one that allocates until a memory monitor stops it cannot take the
machine down.

Python 3.10 or newer (3.11 here), standard library only.
"""

import argparse
import ast
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize
import uuid

MARKER_VAR = "RAYX_DOC_EXAMPLE_RUN"
TAIL_LINES = 30


# --- import rewriting --------------------------------------------------------------------------

def _is_ray_module(name):
    return name == "ray" or name.startswith("ray.")


def rewrite_imports(source):
    """Returns `source` with its imports of Ray's package turned into imports of rayx; every
    other character stays as it is (line numbers included)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(lineno, col):
        # ast columns are UTF-8 byte offsets within the line.
        line = lines[lineno - 1]
        return offsets[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    edits = []  # (start, end, replacement)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            needs_ray_name = False
            for alias in node.names:
                if not _is_ray_module(alias.name):
                    continue
                start = pos(alias.lineno, alias.col_offset)
                end = pos(alias.end_lineno, alias.end_col_offset)
                new = "rayx" + alias.name[3:]
                if alias.asname is None:
                    if alias.name == "ray":
                        new += " as ray"
                    else:
                        needs_ray_name = True  # `import ray.x` binds `ray`
                else:
                    new += " as " + alias.asname
                edits.append((start, end, new))
            if needs_ray_name:
                end = pos(node.end_lineno, node.end_col_offset)
                edits.append((end, end, "; import rayx as ray"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and _is_ray_module(node.module):
            start = pos(node.lineno, node.col_offset)
            m = re.compile(r"from(?:\s|\\\n)+ray\b").match(source, start)
            if m is None:
                raise ValueError(f"cannot rewrite the import at line {node.lineno}")
            edits.append((m.end() - 3, m.end(), "rayx"))
    out = source
    for start, end, new in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:start] + new + out[end:]
    return out


# --- what an example uses ----------------------------------------------------------------------

def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _code_words(source):
    """The NAME tokens of `source` (comments and strings left out)."""
    words = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NAME:
                words.add(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return words


def static_exclusion(name, source):
    """The reason `source` is outside this comparison, or None."""
    modules = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None  # runs (and fails) on both backends
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module)
                modules.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Attribute):
                dotted = _dotted(node)
                if dotted:
                    modules.add(dotted)
    words = _code_words(source)

    def uses(prefix):
        return any(m == prefix or m.startswith(prefix + ".") for m in modules)

    if uses("ray._private"):
        return "uses ray._private"
    if uses("ray.dag") or "experimental_compile" in words or name.startswith("cgraph"):
        return "ray.dag / compiled graphs"
    if words & {"tensor_transport", "_tensor_transport", "enable_tensor_transport",
                "with_tensor_transport"} or name.startswith(("gpu_objects_", "direct_transport_")):
        return "tensor transport (GPU objects)"
    if uses("ray.experimental"):
        return "uses ray.experimental"
    if "neuron" in name or any("neuron" in w.lower() for w in words):
        return "needs AWS Neuron cores"
    return None


def uses_gpus(source):
    """Whether the code asks for GPUs (num_gpus > 0, CUDA devices, accelerator types)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "num_gpus" \
                and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, (int, float)) and node.value.value > 0:
            return True
        if isinstance(node, ast.keyword) and node.arg == "accelerator_type":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "cuda":
            return True
        if isinstance(node, ast.Constant) and node.value == "cuda":
            return True
    return False


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def dynamic_exclusion(source, output):
    """After a failed run: the reason it cannot run on this machine at all, or None."""
    for module in _MISSING_MODULE.findall(output):
        top = module.split(".")[0]
        if top not in ("ray", "rayx"):
            return f"needs package {top} (not installed)"
    if uses_gpus(source) and re.search(r"GPU|CUDA|cuda", output):
        return "needs a GPU"
    return None


# --- processes ---------------------------------------------------------------------------------

def marked_pids(marker):
    """Live processes (not zombies) whose environment carries `marker`."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def memory_bytes(pids):
    """Proportional set size of `pids` together (shared memory counted once)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def kill_group(proc):
    """SIGTERM, then SIGKILL, the example's process group (it was started in a new session)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def rayx_cli():
    bin_dir = os.environ.get("RAYX_BIN_DIR")
    if bin_dir and os.access(os.path.join(bin_dir, "rayx"), os.X_OK):
        return os.path.join(bin_dir, "rayx")
    return shutil.which("rayx")


def stop_rayx_clusters(base):
    """`rayx stop` for the rayx clusters whose sessions live under `base` (the private
    clusters rayx.init() started there, and any `rayx start` the example ran with it)."""
    cli = rayx_cli()
    if cli is None:
        return []
    stopped = []
    for root, dirs, files in os.walk(base):
        if "session.conf" in files:
            temp_dir = os.path.dirname(root)
            if temp_dir not in stopped:
                subprocess.run([cli, "stop", "--temp-dir", temp_dir, "--grace-period", "5"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
                stopped.append(temp_dir)
            dirs[:] = []
    return stopped


def cleanup(marker, backend, base, settle_s=10.0):
    """Waits up to `settle_s` for the example's processes to exit by themselves, then stops
    what is left. Returns how many processes were left."""
    deadline = time.monotonic() + settle_s
    while marked_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = marked_pids(marker)
    if not left:
        return 0
    if backend == "rayx":
        stop_rayx_clusters(base)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = marked_pids(marker)
        if not pids:
            break
        signal_all(pids, sig)
        deadline = time.monotonic() + 5
        while marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
    return len(left)


# --- running one example -----------------------------------------------------------------------

def last_error_line(text):
    """The exception line of the last traceback in `text`, else its last non-empty line."""
    lines = text.splitlines()
    found = None
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            for later in lines[i + 1:]:
                if later and not later[0].isspace():
                    found = later.strip()
                    break
    if found:
        return found
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return ""


def example_env(backend, base, marker, python):
    env = dict(os.environ)
    # The interpreter's bin directory first, as in an activated venv: an example that runs
    # `ray start` gets the `ray` command of the Ray it imports.
    env["PATH"] = os.path.dirname(os.path.abspath(python)) + os.pathsep + env.get("PATH", "")
    for var in ("RAY_ADDRESS", "RAYX_ADDRESS", "RAYX_TOKEN", "RAYX_TEMP_DIR", "PYTHONSTARTUP"):
        env.pop(var, None)
    env[MARKER_VAR] = marker
    env["PYTHONUNBUFFERED"] = "1"
    env["TMPDIR"] = base
    if backend == "ray":
        env["RAY_TMPDIR"] = base
        env.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reports to Ray's servers
        env.setdefault("RAY_AUTH_MODE", "disabled")  # no token written to ~/.ray
    else:
        rayx_temp = os.path.join(base, "rayx")
        os.makedirs(rayx_temp, exist_ok=True)
        env["RAYX_TEMP_DIR"] = rayx_temp
        bin_dir = env.get("RAYX_BIN_DIR")
        if bin_dir:
            env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def run_example(path, backend, python, timeout, max_memory, judge_machine=True):
    """Runs one example; `judge_machine`: whether a failure may be put down to this machine
    (a missing package, no GPU) and excluded; off when Ray's verdict on it is known."""
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    result = {"name": name, "status": None, "reason": "", "seconds": 0.0, "returncode": None,
              "error_line": "", "tail": "", "leftover_processes": 0}
    reason = static_exclusion(name, source)
    if reason:
        result.update(status="excluded", reason=reason)
        return result
    if backend == "rayx":
        try:
            code = rewrite_imports(source)
        except SyntaxError:
            code = source  # fails the same way on both backends
    else:
        code = source

    base = tempfile.mkdtemp(prefix="rdx-", dir="/tmp")  # short: Ray's socket paths live here
    cwd = os.path.join(base, "cwd")
    os.makedirs(cwd)
    script = os.path.join(cwd, name)
    with open(script, "w", encoding="utf-8") as f:
        f.write(code)
    marker = uuid.uuid4().hex
    log_path = os.path.join(base, "output.log")
    start = time.monotonic()
    timed_out = memory_killed = False
    with open(log_path, "wb") as log:
        env = example_env(backend, base, marker, python)
        proc = subprocess.Popen([python, name], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        next_memory_check = 0.0
        while proc.poll() is None:
            elapsed = time.monotonic() - start
            if elapsed > timeout:
                timed_out = True
                break
            if elapsed >= next_memory_check:
                next_memory_check = elapsed + 1.0
                if memory_bytes(marked_pids(marker)) > max_memory:
                    memory_killed = True
                    break
            time.sleep(0.1)
        before_kill = ""
        if proc.poll() is None:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                before_kill = f.read()  # what it printed, without its reaction to the kill
            kill_group(proc)
    result["seconds"] = round(time.monotonic() - start, 1)
    result["returncode"] = proc.returncode
    result["leftover_processes"] = cleanup(marker, backend, base)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        output = f.read()
    result["tail"] = "\n".join(output.splitlines()[-TAIL_LINES:])
    if timed_out:
        result.update(status="timeout", error_line=f"timed out after {timeout:g} s "
                      f"(last output: {last_error_line(before_kill)[:200]})")
    elif memory_killed:
        result.update(status="fail", error_line=f"stopped: its processes used more than "
                      f"{max_memory / 2**30:g} GiB")
    elif proc.returncode == 0:
        result["status"] = "pass"
    else:
        result.update(status="fail", error_line=last_error_line(output))
    if result["status"] != "pass" and judge_machine:
        reason = dynamic_exclusion(source, output)
        if reason:
            result.update(status="excluded", reason=reason)
    shutil.rmtree(base, ignore_errors=True)
    return result


# --- the table ---------------------------------------------------------------------------------

def print_table(results, backend, ray_results):
    width = max([len(r["name"]) for r in results] + [7])
    compare = backend == "rayx" and ray_results is not None
    header = f"{'example':<{width}}  {backend:<8}" + ("  ray     " if compare else "") \
        + "  secs    error / reason"
    print(header)
    print("-" * len(header))
    for r in results:
        detail = r["reason"] if r["status"] == "excluded" else r["error_line"]
        ray_col = ""
        if compare:
            ray_col = f"  {ray_results.get(r['name'], {}).get('status', '?'):<8}"
        print(f"{r['name']:<{width}}  {r['status']:<8}{ray_col}  {r['seconds']:>6.1f}  "
              f"{detail[:110]}")


def summarize(results, backend, ray_results):
    counted = [r for r in results if r["status"] != "excluded"]
    passed = sum(r["status"] == "pass" for r in counted)
    summary = {"total": len(results), "excluded": len(results) - len(counted),
               "counted": len(counted), f"{backend}_passes": passed}
    if backend == "rayx" and ray_results is not None:
        ray_passes = sum(ray_results.get(r["name"], {}).get("status") == "pass" for r in counted)
        summary["ray_passes"] = ray_passes
        line = f"rayx passes {passed} of {len(counted)} (Ray passes {ray_passes})"
    elif backend == "rayx":
        line = f"rayx passes {passed} of {len(counted)} (Ray passes ?: no --ray-results)"
    else:
        line = f"Ray passes {passed} of {len(counted)}"
    return summary, line


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", required=True,
                   help="directory of the examples (ray's doc/source/ray-core/doc_code)")
    p.add_argument("--backend", choices=("ray", "rayx"), default="rayx")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per example")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these examples")
    p.add_argument("--json", metavar="OUT", help="write the results here")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter that runs the examples (for Ray: the venv's python)")
    p.add_argument("--ray-results", metavar="JSON",
                   help="(rayx) a --backend ray --json file: its exclusions and verdicts")
    p.add_argument("--max-memory-gb", type=float, default=10.0,
                   help="stop an example whose processes use more than this")
    args = p.parse_args(argv)

    names = sorted(f for f in os.listdir(args.examples) if f.endswith(".py"))
    if args.only:
        wanted = {n if n.endswith(".py") else n + ".py" for n in args.only}
        missing = wanted - set(names)
        if missing:
            p.error(f"not in {args.examples}: {', '.join(sorted(missing))}")
        names = [n for n in names if n in wanted]
    ray_results = None
    if args.ray_results:
        with open(args.ray_results) as f:
            ray_results = {r["name"]: r for r in json.load(f)["results"]}

    results = []
    for name in names:
        prior = (ray_results or {}).get(name)
        if args.backend == "rayx" and prior and prior["status"] == "excluded":
            r = {"name": name, "status": "excluded", "reason": prior["reason"], "seconds": 0.0,
                 "returncode": None, "error_line": "", "tail": "", "leftover_processes": 0}
        else:
            r = run_example(os.path.join(args.examples, name), args.backend, args.python,
                            args.timeout, args.max_memory_gb * 2**30,
                            judge_machine=prior is None)
        if ray_results is not None:
            r["ray_status"] = (ray_results.get(name) or {}).get("status")
        results.append(r)
        left = f", {r['leftover_processes']} processes left" if r["leftover_processes"] else ""
        print(f"[{len(results)}/{len(names)}] {name}: {r['status']} ({r['seconds']} s{left})",
              file=sys.stderr, flush=True)

    print_table(results, args.backend, ray_results)
    summary, line = summarize(results, args.backend, ray_results)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "python": args.python, "timeout": args.timeout,
                       "summary": summary, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
