"""What tasks and actors print reaches the driver that owns them, line by line,
as Ray prints it: "(name pid=N, ip=A) line". Drivers run as separate
processes on the shared three-node cluster, their stdout in a file, so the
test reads what a user would see."""

import os
import re
import subprocess
import sys
import textwrap

from conftest import CLI, driver_env

PREFIX = re.compile(r"^\((?P<name>\S+ )?pid=(?P<pid>\d+), ip=(?P<ip>[\d.]+)\) (?P<line>.*)$")


def run_printing_driver(cluster, tmp_path, body, init_args="", timeout=120):
    """Runs `body` in a driver after rayx.init(init_args); returns (rc, the
    driver's stdout lines, its stderr). The driver prints DONE last."""
    out = tmp_path / "driver.out"
    code = "import os, sys, time\nimport rayx\n" + \
        f"rayx.init({init_args})\n" + textwrap.dedent(body) + \
        "\nprint('DONE', flush=True)\nrayx.shutdown()\n"
    with open(out, "w") as stdout:
        proc = subprocess.run([sys.executable, "-c", code], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=timeout,
                              env=driver_env(cluster))
    return proc.returncode, out.read_text().splitlines(), proc.stderr


def prefixed(lines):
    """(name, pid, ip, line) of each worker line the driver printed."""
    found = []
    for line in lines:
        m = PREFIX.match(line)
        if m:
            found.append(((m["name"] or "").strip(), int(m["pid"]), m["ip"], m["line"]))
    return found


def test_task_and_actor_output_reaches_the_driver_with_rays_prefix(cluster, tmp_path):
    rc, lines, err = run_printing_driver(cluster, tmp_path, """
        @rayx.remote
        def train_step(i):
            print(f"loss {i}")
            print(f"warning {i}", file=sys.stderr)
            return os.getpid(), os.environ.get("RAYX_NODE_IP")

        @rayx.remote(resources={"special": 1})
        class Counter:
            def add(self, n):
                print(f"added {n}")
                return os.getpid()

        where = rayx.get([train_step.remote(i) for i in range(3)])
        print("TASKS", ";".join(f"{p}@{ip}" for p, ip in where), flush=True)
        c = Counter.remote()
        print("ACTOR", rayx.get(c.add.remote(5)), flush=True)
    """)
    assert rc == 0, err
    got = prefixed(lines)
    tasks = dict(item.split("@") for item in
                 next(l for l in lines if l.startswith("TASKS ")).split(" ", 1)[1].split(";"))
    for i in range(3):
        lines_of_i = [g for g in got if g[3] in (f"loss {i}", f"warning {i}")]
        assert len(lines_of_i) == 2, (i, got)
        for name, pid, ip, _ in lines_of_i:
            assert name == "train_step"
            assert tasks[str(pid)] == ip, "the prefix names the worker's own pid and node"
    actor_pid = int(next(l for l in lines if l.startswith("ACTOR ")).split()[1])
    assert ("Counter", actor_pid, "127.0.0.3", "added 5") in got, got
    # The driver ends right after its last call: its shutdown asked every node
    # for the lines still unread, so the actor's came after the driver's own.
    assert lines.index("DONE") < lines.index(f"(Counter pid={actor_pid}, ip=127.0.0.3) added 5")


def test_one_workers_lines_stay_in_order(cluster, tmp_path):
    rc, lines, err = run_printing_driver(cluster, tmp_path, """
        @rayx.remote
        def count():
            for i in range(2000):
                print(f"n={i}")
        rayx.get(count.remote())
    """)
    assert rc == 0, err
    numbers = [int(g[3][2:]) for g in prefixed(lines) if g[3].startswith("n=")]
    assert numbers == list(range(2000))


def test_log_to_driver_false_keeps_the_output_in_the_worker_logs(cluster, tmp_path):
    rc, lines, err = run_printing_driver(cluster, tmp_path, """
        @rayx.remote
        def quiet():
            print("MUST NOT SHOW")
            return os.getpid()
        print("PID", rayx.get(quiet.remote()), flush=True)
    """, init_args="log_to_driver=False")
    assert rc == 0, err
    assert not any("MUST NOT SHOW" in l for l in lines), lines
    # Still in the worker's log on its node.
    pid = next(l for l in lines if l.startswith("PID ")).split()[1]
    logs = [os.path.join(root, f) for root, _, files in os.walk(cluster.temp_dir)
            for f in files if f.startswith("worker-") and f.endswith(".log")]
    assert any("MUST NOT SHOW" in open(p, errors="replace").read() for p in logs), \
        f"pid {pid}'s line is in no worker log"


def test_a_flood_is_cut_with_a_note_and_never_blocks_the_worker(cluster, tmp_path):
    rc, lines, err = run_printing_driver(cluster, tmp_path, """
        @rayx.remote
        def flood():
            t = time.monotonic()
            for i in range(200_000):
                print("x" * 100, i)
            return time.monotonic() - t
        print("SECONDS", rayx.get(flood.remote(), timeout=60), flush=True)
    """)
    assert rc == 0, err
    got = prefixed(lines)
    notes = [g for g in got if "bytes of this worker's output skipped" in g[3]]
    assert notes, "20 MB of output in a few seconds was not cut"
    assert "worker-" in notes[0][3] and ".log" in notes[0][3], notes[0]
    shown = sum(1 for g in got if g[3].startswith("x" * 100))
    assert 0 < shown < 200_000


def test_the_last_lines_of_a_worker_that_dies_arrive(cluster, tmp_path):
    rc, lines, err = run_printing_driver(cluster, tmp_path, """
        @rayx.remote(max_retries=0)
        def dies():
            print("last words", flush=True)
            os._exit(3)
        try:
            rayx.get(dies.remote())
        except Exception as e:
            print("FAILED", type(e).__name__, flush=True)
    """)
    assert rc == 0, err
    assert any(g[0] == "dies" and g[3] == "last words" for g in prefixed(lines)), lines
    assert any(l.startswith("FAILED ") for l in lines)


def test_a_submitted_jobs_logs_show_its_workers_output(cluster, tmp_path):
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import rayx
        rayx.init()

        @rayx.remote
        def shout(i):
            print(f"from the job's task {i}")

        rayx.get([shout.remote(i) for i in range(2)])
    """))
    env = driver_env(cluster)
    submitted = subprocess.run(
        [CLI, "job", "submit", "--working-dir", str(tmp_path), "--submission-id", "py-job-output",
         "--env", f"PYTHONPATH={os.environ['PYTHONPATH']}", "--temp-dir", cluster.temp_dir, "--",
         sys.executable, "job.py"],
        capture_output=True, text=True, timeout=180, env=env)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    logs = subprocess.run([CLI, "job", "logs", "py-job-output", "--temp-dir", cluster.temp_dir],
                          capture_output=True, text=True, timeout=60, env=env)
    for shown in (submitted.stdout, logs.stdout):
        for i in range(2):
            assert re.search(rf"\(shout pid=\d+, ip=[\d.]+\) from the job's task {i}", shown), \
                shown


KILL_DRIVER = r'''
import os, sys, time
import rayx
rayx.init()
gate = sys.argv[1]

@rayx.remote(resources={"far": 1}, max_retries=0)
def far_task():
    print("before the kill", flush=True)
    while not os.path.exists(gate + ".never"):
        time.sleep(0.05)  # the workload: runs until its node dies

ref = far_task.remote()
try:
    rayx.get(ref, timeout=60)
except Exception as e:
    print("FAILED", type(e).__name__, flush=True)
while not os.path.exists(gate + ".head-killed"):
    time.sleep(0.05)
t = time.monotonic()
rayx.shutdown()
print("SHUTDOWN", round(time.monotonic() - t, 1), flush=True)
'''


def test_output_while_its_agent_and_then_the_head_are_killed(tmp_path):
    """A task's line arrives while the task runs; its node's agent is killed:
    the call fails and nothing hangs; with the head killed too, the driver's
    shutdown (its last flush asks the head) still ends within its deadlines,
    and nothing of the cluster is left running (own_cluster checks)."""
    import signal
    from conftest import own_cluster, pid_alive, wait_until

    with own_cluster(tmp_path, head_cpus=1, far_ip="127.0.0.8") as cluster:
        agent = cluster.agent_pid("127.0.0.8")
        head = cluster.head_pid()
        gate = str(tmp_path / "gate")
        driver, lines = cluster.driver(KILL_DRIVER, gate)
        line = lines.next()
        m = PREFIX.match(line)
        assert m and m["name"].strip() == "far_task" and m["ip"] == "127.0.0.8" and \
            m["line"] == "before the kill", line
        os.kill(agent, signal.SIGKILL)
        wait_until(lambda: not pid_alive(agent), 10, "the agent to exit")
        assert lines.next() == "FAILED WorkerCrashedError"
        os.kill(head, signal.SIGKILL)
        wait_until(lambda: not pid_alive(head), 10, "the head to exit")
        open(gate + ".head-killed", "w").close()
        shutdown = lines.next(timeout=60)
        assert shutdown.startswith("SHUTDOWN "), shutdown
        assert float(shutdown.split()[1]) < 20, shutdown
        assert driver.wait(timeout=30) == 0
