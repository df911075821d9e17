"""`rayx logs` on the suite's 3-node loopback cluster: every node's log files
listed from this machine, a running actor's log by its name, following a file
as it grows, and names that are not a log file's refused."""

import os
import signal
import subprocess
import threading

from conftest import CLI, run_cli, token_env, wait_until


def logs(cluster, *args, check=True):
    return run_cli("logs", *args, temp_dir=cluster.temp_dir, env=token_env(cluster.token),
                   check=check)


def test_lists_every_nodes_files_and_prints_an_actors_log(cluster, rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_cpus=0, resources={"special": 0.01})
    class Talker:
        def say(self, text):
            print(text, flush=True)
            return os.getpid()

    talker = Talker.options(name="talker-logs").remote()
    pid = rayx.get(talker.say.remote("first words"), timeout=60)
    try:
        listing = logs(cluster).stdout
        rows = [line.split() for line in listing.splitlines()[1:] if line.strip()]
        nodes = {r[0] for r in rows if len(r) >= 2}
        assert {"127.0.0.1", "127.0.0.2", "127.0.0.3"} <= nodes, listing
        assert any(r[0] == "127.0.0.1" and r[1] == "head.log" for r in rows), listing
        # The actor's log by its name, from its node (127.0.0.3, "special").
        wait_until(lambda: "first words" in logs(cluster, "--actor", "talker-logs").stdout, 30,
                   "the actor's line in its log")
        by_pid = logs(cluster, "--pid", str(pid)).stdout
        assert "first words" in by_pid
        worker_files = [r[1] for r in rows if r[0] == "127.0.0.3" and r[1].startswith("worker-")]
        assert worker_files, listing
        # A file only one node has needs no --node; one every node has does.
        for name in worker_files[:3]:
            logs(cluster, name)
        ambiguous = logs(cluster, "agent.log", check=False)
        assert ambiguous.returncode == 1 and "--node" in ambiguous.stderr
        # --tail: the actor is idle, so its log ends with the lines it printed.
        rayx.get(talker.say.remote("\n".join(f"line {i}" for i in range(5))), timeout=60)
        wait_until(lambda: "line 4" in logs(cluster, "--actor", "talker-logs").stdout, 30,
                   "the actor's five lines")
        assert logs(cluster, "--actor", "talker-logs", "--tail", "2").stdout == "line 3\nline 4\n"
        assert "first words" in logs(cluster, "--actor", "talker-logs", "--tail", "-1").stdout
    finally:
        rayx.kill(talker)


def test_follow_prints_what_the_log_gains(cluster, rayx_mod):
    rayx = rayx_mod

    @rayx.remote(num_cpus=0)
    class Talker:
        def say(self, text):
            print(text, flush=True)
            return True

    talker = Talker.options(name="talker-follow").remote()
    assert rayx.get(talker.say.remote("before following"), timeout=60)
    follower = subprocess.Popen([CLI, "logs", "--actor", "talker-follow", "--follow",
                                 "--temp-dir", cluster.temp_dir],
                                env=token_env(cluster.token), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    seen = []
    reader = threading.Thread(target=lambda: seen.extend(follower.stdout), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("before following" in line for line in seen), 30,
                   "the log's existing lines")
        assert rayx.get(talker.say.remote("while following"), timeout=60)
        wait_until(lambda: any("while following" in line for line in seen), 30,
                   "the line printed while following")
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=30)
        rayx.kill(talker)
    assert follower.returncode == 0, follower.stderr.read()


def test_only_log_file_names_are_read(cluster):
    for name in ("../session.conf", "..", "/etc/passwd", "no-such.log"):
        r = logs(cluster, "--node", "127.0.0.1", name, check=False)
        assert r.returncode != 0, name
        assert "not a log file's name" in r.stderr or "no log file" in r.stderr, r.stderr
    r = logs(cluster, "--actor", "nobody-has-this-name", check=False)
    assert r.returncode == 1 and "no running actor 'nobody-has-this-name'" in r.stderr
    r = logs(cluster, "a.log", "--pid", "1", check=False)
    assert r.returncode == 2
