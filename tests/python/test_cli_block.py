"""`rayx start --block` (a container's or scheduler's foreground process):
SIGKILL it and what it started goes with it; `rayx stop` ends it."""

import os
import shutil
import signal
import subprocess
import tempfile

from conftest import CLI, pid_alive, wait_until


def _session_pids(temp_dir):
    pids = []
    for root, _, files in os.walk(temp_dir):
        pids += [int(open(os.path.join(root, f)).read().split()[0])
                 for f in files if f.endswith(".pid")]
    return pids


def _blocking_start():
    """`rayx start --head --block` in a temp dir of its own, once it blocks:
    (the process, its temp dir, the head's and agent's pids)."""
    temp_dir = tempfile.mkdtemp(prefix="rayx-block-")
    cli = subprocess.Popen([CLI, "start", "--head", "--block", "--port", "0",
                            "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                            "--temp-dir", temp_dir],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in cli.stdout:
        if "--block: running" in line:
            break
    pids = wait_until(lambda: len(_session_pids(temp_dir)) == 2 and _session_pids(temp_dir),
                      10, "the head and agent pid files")
    return cli, temp_dir, pids


def _cleanup(cli, temp_dir):
    if cli.poll() is None:
        cli.kill()
        cli.wait(timeout=10)
    subprocess.run([CLI, "stop", "--temp-dir", temp_dir], capture_output=True, timeout=60)
    shutil.rmtree(temp_dir, ignore_errors=True)


def test_sigkilled_block_takes_its_daemons_with_it():
    cli, temp_dir, pids = _blocking_start()
    try:
        assert all(pid_alive(p) for p in pids)
        cli.send_signal(signal.SIGKILL)
        cli.wait(timeout=10)
        wait_until(lambda: not any(pid_alive(p) for p in pids), 10,
                   "the head and agent to exit after their rayx start --block was SIGKILLed")
    finally:
        _cleanup(cli, temp_dir)


def test_rayx_stop_ends_a_blocking_start():
    # `rayx stop` removes the pid files before the daemons exit: the blocking
    # start knows its daemons by the pids it recorded, not by those files.
    cli, temp_dir, pids = _blocking_start()
    try:
        stop = subprocess.run([CLI, "stop", "--temp-dir", temp_dir], capture_output=True,
                              text=True, timeout=60)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert cli.wait(timeout=30) == 0, "rayx start --block did not end with its daemons"
        assert "left cleanly" in cli.stdout.read()
        assert not any(pid_alive(p) for p in pids)
    finally:
        _cleanup(cli, temp_dir)
