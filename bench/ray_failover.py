#!/usr/bin/env python3
"""Ray's side of bench/failover_benchmark.cc: the same two failover figures on a loopback
Ray cluster (a head and 8 worker nodes with one fake GPU each, GCS fault tolerance backed by
a Redis started here), optionally alternating round by round with rayx's benchmark.

    apt-get install -y redis-server
    python3 -m venv --system-site-packages .venv-ray && .venv-ray/bin/pip install ray grpcio
    .venv-ray/bin/python bench/ray_failover.py [--rounds 5] [--health default|matched]
        [--rayx-bench build/bin/rayx_failover_benchmark]

  head:  SIGKILL the head's gcs_server, start it again at once with the same command line,
         environment and log files, and time until a task that needs a new worker lease (a
         CPU shape no lease has had, and a fresh runtime_env, so a new worker process) has run;
         the same task without a failure is timed too, and, since a task's lease does not go
         through the GCS, a second restart is timed until a new actor (created by the GCS)
         answers;
  actor: SIGKILL the raylet under a restartable (max_restarts=-1) one-GPU actor and time
         until the actor answers again from another node. The kill waits until the GCS has
         been up, and knew of every node, for its health checks' initial delay (5 s) plus 1 s.

Every round starts a fresh cluster (Redis, head, nodes) and stops all of it afterwards, so
with --rayx-bench each round first runs `rayx_failover_benchmark 1` (its own cluster, gone
when it exits) and then Ray's round, and neither cluster runs during the other's round.
--health default keeps Ray's health checks (3 s period, 5 failures); matched sets them to
rayx's defaults (a check every 250 ms, dead after 6 failures: 1.5 s).

The script makes itself a child subreaper, so every process that Ray's `ray start` leaves
behind stays its descendant: it kills exactly those pids (SIGKILL, never by name) when a round
ends, on error, on Ctrl-C or SIGTERM. Every wait has a deadline. Linux only; loopback only
(the head at 127.0.2.1, node i at 127.0.2.(i+2), Redis at 127.0.0.1).
"""
import argparse
import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# Ray 2.60 turns token authentication on: every node and this driver get one token, through
# the environment, set before Ray is imported (it reads its config at import).
os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
import ray  # noqa: E402

RAY_CLI = os.path.join(os.path.dirname(sys.executable), "ray")
HEAD_IP = "127.0.2.1"
PR_SET_CHILD_SUBREAPER = 36

# Ray's defaults (ray._raylet.Config, Ray 2.60): period 3000 ms, failure threshold 5,
# timeout 10000 ms, initial delay 5000 ms. "matched" is rayx's 250 ms heartbeat and 1.5 s
# node timeout.
HEALTH_INITIAL_DELAY_S = 5.0  # the GCS checks a node first this long after it (re)learns of it
HEALTH = {
    "default": {},
    "matched": {"RAY_health_check_period_ms": "250",
                "RAY_health_check_failure_threshold": "6",
                "RAY_health_check_timeout_ms": "500"},
}


@ray.remote
def add(a, b):
    return a + b


@ray.remote(num_gpus=1, max_restarts=-1, max_task_retries=-1)
class Pinned:
    def where(self):
        return ray.util.get_node_ip_address()


@ray.remote(num_cpus=1)
class Fresh:
    def ping(self):
        return 1


class Failed(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stat(pid):
    """(ppid, state, start time) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[0], int(fields[19])


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


class Processes:
    """Everything this script started, found as its descendants (it is a subreaper).

    A process is named by (pid, start time), so a pid reused by an unrelated process is never
    signalled. Only descendants of this process are ever killed.
    """

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        self.popens = {}  # pid -> Popen we started directly (reaped through Popen)

    def descendants(self):
        children = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = proc_stat(int(entry))
                if st:
                    children.setdefault(st[0], []).append((int(entry), st[2]))
        found, todo = [], [os.getpid()]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child[0])
        return found

    def alive(self, proc):
        st = proc_stat(proc[0])
        return st is not None and st[2] == proc[1] and st[1] != "Z"

    def reap(self, deadline):
        """Reaps our exited children; True when none of our descendants is left."""
        while True:
            left = self.descendants()
            for pid, _ in left:
                st = proc_stat(pid)
                if st and st[0] == os.getpid() and st[1] == "Z":
                    if pid in self.popens:
                        self.popens.pop(pid).wait(timeout=1)
                    else:
                        try:
                            os.waitpid(pid, os.WNOHANG)
                        except ChildProcessError:
                            pass
            if not self.descendants():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def kill(self, proc, timeout=10.0):
        """SIGKILLs one descendant and waits (reaping it) until it is gone."""
        if not self.alive(proc) or proc not in self.descendants():
            return
        os.kill(proc[0], signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            st = proc_stat(proc[0])
            if st is None or st[2] != proc[1]:
                return
            if st[1] == "Z" and st[0] == os.getpid():
                if proc[0] in self.popens:
                    self.popens.pop(proc[0]).wait(timeout=1)
                else:
                    os.waitpid(proc[0], 0)
                return
            if time.monotonic() > deadline:
                raise Failed(f"pid {proc[0]} survived SIGKILL for {timeout} s")
            time.sleep(0.002)

    def kill_all(self, timeout=30.0):
        """SIGKILLs every descendant (again, until none is left or the deadline passes)."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.descendants()
            for pid, start in left:
                st = proc_stat(pid)
                if st and st[2] == start and st[1] != "Z":
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            if self.reap(min(deadline, time.monotonic() + 1.0)):
                return []
            if time.monotonic() > deadline:
                return self.descendants()

    def popen(self, argv, **kwargs):
        p = subprocess.Popen(argv, **kwargs)
        self.popens[p.pid] = p
        return p

    def run(self, argv, what, env=None, timeout=120.0):
        """Runs a command that starts daemons; returns the processes it left behind."""
        before = set(self.descendants())
        try:
            r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failed(f"{what}: no answer within {timeout} s")
        if r.returncode != 0:
            raise Failed(f"{what} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
        return [p for p in self.descendants() if p not in before]


class Cluster:
    """Redis, a Ray head with GCS fault tolerance and N worker nodes, all on loopback."""

    def __init__(self, procs, nodes, health, workdir):
        self.procs = procs
        self.temp_dir = tempfile.mkdtemp(prefix="c", dir=workdir)
        redis_port = free_port()
        self.redis = procs.popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", "",
             "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no"],
            stdout=open(os.path.join(self.temp_dir, "redis.log"), "w"), stderr=subprocess.STDOUT)
        wait_for_port("127.0.0.1", redis_port, 10.0, "redis-server")
        self.port = free_port()
        self.address = f"{HEAD_IP}:{self.port}"
        env = dict(os.environ, RAY_REDIS_ADDRESS=f"127.0.0.1:{redis_port}", **HEALTH[health])
        # os.environ carries the cluster's auth token (see main), as on a real cluster.
        common = ["--disable-usage-stats", f"--temp-dir={self.temp_dir}",
                  "--object-store-memory=100000000",
                  f"--dashboard-agent-listen-port={free_port()}"]
        head = procs.run([RAY_CLI, "start", "--head", f"--node-ip-address={HEAD_IP}",
                          f"--port={self.port}", "--num-cpus=1", "--num-gpus=0",
                          "--include-dashboard=false", f"--dashboard-port={free_port()}",
                          f"--ray-client-server-port={free_port()}"] + common,
                         "ray start --head", env=env)
        self.gcs = only(head, "gcs_server")
        self.raylets = {}  # node ip -> (pid, start)
        node_env = {k: v for k, v in os.environ.items() if k != "RAY_REDIS_ADDRESS"}
        for i in range(nodes):
            ip = f"127.0.2.{i + 2}"
            started = procs.run([RAY_CLI, "start", f"--address={self.address}",
                                 f"--node-ip-address={ip}", "--num-cpus=2", "--num-gpus=1",
                                 f"--dashboard-agent-listen-port={free_port()}"] + common[:3],
                                f"ray start (node {ip})", env=node_env)
            self.raylets[ip] = only(started, "raylet")
        self.health_checked_from = time.monotonic() + HEALTH_INITIAL_DELAY_S
    def restart_gcs(self):
        """SIGKILLs the gcs_server and starts it again at once, as it was started."""
        pid = self.gcs[0]
        argv = cmdline(pid)
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        cwd = os.readlink(f"/proc/{pid}/cwd")
        outs = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (1, 2)]
        self.procs.kill(self.gcs)
        files = [open(o, "ab") if o.startswith("/") and os.path.isfile(o) else subprocess.DEVNULL
                 for o in outs]
        p = self.procs.popen(argv, env=env, cwd=cwd, stdout=files[0], stderr=files[1],
                             stdin=subprocess.DEVNULL, start_new_session=True)
        for f in files:
            if f is not subprocess.DEVNULL:
                f.close()
        self.gcs = (p.pid, proc_stat(p.pid)[2])
        self.health_checked_from = time.monotonic() + HEALTH_INITIAL_DELAY_S

    def stop(self):
        return self.procs.kill_all()


def only(processes, name):
    matches = [p for p in processes if cmdline(p[0])[:1] and
               os.path.basename(cmdline(p[0])[0]) == name]
    if len(matches) != 1:
        raise Failed(f"expected one {name} among the started processes, found {len(matches)}")
    return matches[0]


def wait_for_port(host, port, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise Failed(f"{what} did not listen on {host}:{port} within {timeout} s")


def get_until(make_ref, accept, deadline, what):
    """ray.get(make_ref()) until accept(value); submits again after an error. Returns the
    value and the errors seen."""
    errors = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failed(f"{what}: no answer before the deadline; errors: {errors[-3:]}")
        try:
            value = ray.get(make_ref(), timeout=left)
            if accept(value):
                return value, errors
        except ray.exceptions.GetTimeoutError:
            continue
        except ray.exceptions.RayError as e:
            errors.append(type(e).__name__)
            time.sleep(0.01)


def ray_round(procs, r, nodes, health, workdir, timeout):
    cluster = Cluster(procs, nodes, health, workdir)
    try:
        ray.init(address=cluster.address, _node_ip_address=HEAD_IP, log_to_driver=False,
                 logging_level="ERROR")
        deadline = time.monotonic() + timeout
        while sum(n["Alive"] for n in ray.nodes()) < nodes + 1:
            if time.monotonic() > deadline:
                raise Failed("the nodes did not all join")
            time.sleep(0.1)

        def fresh_task(k, tag):  # a CPU shape and a runtime_env no worker has had yet
            return add.options(num_cpus=1 + 0.01 * k,
                               runtime_env={"env_vars": {"RAYFAIL_TAG": f"{tag}-{r}-{k}"}})
        # The same kind of task without a failure first (warm, then timed): what a new
        # worker costs by itself.
        get_until(lambda: fresh_task(1, "warm").remote(1, 1), lambda v: v == 2,
                  time.monotonic() + timeout, "warm-up task")
        t = time.monotonic()
        get_until(lambda: fresh_task(2, "base").remote(1, 1), lambda v: v == 2,
                  t + timeout, "baseline task")
        base_ms = (time.monotonic() - t) * 1000

        # Head: the gcs_server SIGKILLed and started again at once; a task needing a new lease.
        t = time.monotonic()
        cluster.restart_gcs()
        _, head_errors = get_until(lambda: fresh_task(3, "fail").remote(r, 1),
                                   lambda v: v == r + 1, t + timeout, "task after GCS restart")
        head_ms = (time.monotonic() - t) * 1000

        # The same with an actor creation, which (unlike a task's lease) goes through the GCS.
        def fresh_actor():
            a = Fresh.remote()
            try:
                return ray.get(a.ping.remote(), timeout=timeout)
            finally:
                ray.kill(a)
        t = time.monotonic()
        fresh_actor()
        base_actor_ms = (time.monotonic() - t) * 1000
        t = time.monotonic()
        cluster.restart_gcs()
        fresh_actor()
        head_actor_ms = (time.monotonic() - t) * 1000
        if sum(n["Alive"] for n in ray.nodes()) != nodes + 1:
            raise Failed("a node was lost over the GCS restarts")

        # Actor: the raylet under it SIGKILLed; it answers again from another node.
        actor = Pinned.remote()
        ip, _ = get_until(lambda: actor.where.remote(), lambda v: True,
                          time.monotonic() + timeout, "actor's first answer")
        if ip not in cluster.raylets:
            raise Failed(f"the actor runs at {ip}, not on a worker node")
        # A GCS that has just (re)started or seen a node join checks that node only after the
        # initial delay; wait it out (plus 1 s) so the figure is the health checks' own time.
        time.sleep(max(0.0, cluster.health_checked_from + 1.0 - time.monotonic()))
        t = time.monotonic()
        procs.kill(cluster.raylets[ip])
        again, actor_errors = get_until(lambda: actor.where.remote(), lambda v: v != ip,
                                        t + timeout, "actor after its node's death")
        actor_ms = (time.monotonic() - t) * 1000
        return {"base": base_ms, "head": head_ms, "actor": actor_ms,
                "base_actor": base_actor_ms, "head_actor": head_actor_ms, "from": ip, "to": again,
                "errors": head_errors + actor_errors}
    finally:
        ray.shutdown()
        left = cluster.stop()
        if left:
            raise Failed(f"processes left after SIGKILL: {left}")


def rayx_round(binary, timeout):
    r = subprocess.run([binary, "1"], capture_output=True, text=True, timeout=timeout)
    m = re.search(r"round 1: head SIGKILL -> new lease granted and run ([\d.]+) ms; "
                  r"actor's node SIGKILL -> answer from \S+ ([\d.]+) ms", r.stdout)
    if r.returncode != 0 or not m:
        raise Failed(f"{binary} 1 failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return {"head": float(m.group(1)), "actor": float(m.group(2))}


def fmt(values):
    return ", ".join(f"{v:.0f}" for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--health", choices=sorted(HEALTH), default="default")
    parser.add_argument("--rayx-bench", help="rayx_failover_benchmark to alternate with")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per wait")
    parser.add_argument("--workdir", default=tempfile.gettempdir(),
                        help="where the clusters' temp dirs (logs) go; keep the path short")
    parser.add_argument("--keep-logs", action="store_true", help="keep them afterwards")
    args = parser.parse_args()

    def stop(signum, _frame):
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    procs = Processes()
    run_dir = tempfile.mkdtemp(prefix="rf", dir=args.workdir)
    settings = HEALTH[args.health] or {"(Ray's defaults)": "period 3000 ms, threshold 5, "
                                                           "timeout 10000 ms"}
    print(f"Ray {ray.__version__} failover on loopback: head + {args.nodes} nodes (2 CPUs, "
          f"1 GPU each), GCS FT on Redis, health checks {args.health}: {settings}", flush=True)
    rays, rayxs = [], []
    try:
        for r in range(args.rounds):
            if args.rayx_bench:
                rayxs.append(rayx_round(args.rayx_bench, args.timeout * 2))
                print(f"  round {r + 1} rayx: head {rayxs[-1]['head']:.0f} ms; "
                      f"actor {rayxs[-1]['actor']:.0f} ms", flush=True)
            x = ray_round(procs, r, args.nodes, args.health, run_dir, args.timeout)
            rays.append(x)
            print(f"  round {r + 1} Ray:  head {x['head']:.0f} ms (same task, no failure "
                  f"{x['base']:.0f} ms), new actor {x['head_actor']:.0f} ms (no failure "
                  f"{x['base_actor']:.0f} ms); actor {x['actor']:.0f} ms ({x['from']} -> {x['to']})"
                  + (f"; errors retried: {x['errors']}" if x["errors"] else ""), flush=True)
    finally:
        left = procs.kill_all()
        if args.keep_logs:
            print(f"logs kept in {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
        if left:
            print(f"WARNING: still running after SIGKILL: {left}", file=sys.stderr)

    for key, what in (("head", "head SIGKILL -> task on a new lease run"),
                      ("actor", "actor node SIGKILL -> answering from another node")):
        ray_values = [x[key] for x in rays]
        line = f"{what}: Ray rounds {fmt(ray_values)} ms, median {statistics.median(ray_values):.0f}"
        if rayxs:
            rayx_values = [x[key] for x in rayxs]
            ratio = statistics.median(rayx_values) / statistics.median(ray_values)
            line += (f"; rayx rounds {fmt(rayx_values)} ms, median "
                     f"{statistics.median(rayx_values):.0f}; rayx/Ray {ratio:.3f}")
        print(line)
    base = [x["base"] for x in rays]
    print(f"Ray's same fresh-worker task without a failure: {fmt(base)} ms, median "
          f"{statistics.median(base):.0f}")
    for key, what in (("head_actor", "Ray head SIGKILL -> a new actor answers"),
                      ("base_actor", "Ray's new actor without a failure")):
        values = [x[key] for x in rays]
        print(f"{what}: {fmt(values)} ms, median {statistics.median(values):.0f}")


if __name__ == "__main__":
    main()
