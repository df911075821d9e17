"""The head's web port on the suite's 3-node loopback cluster: who it admits
(the dashboard credential, a session cookie, nobody else), bounds on what a
client sends, Prometheus (Debian's server) scraping it, and the dashboard
itself in headless Chromium with a running job and a Train run."""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

import pytest

from conftest import driver_env, run_cli, token_env, wait_until

# A person can look at this screenshot after the run: ctest sets the build
# dir's test-artifacts/.
ARTIFACT_DIR = os.environ.get("RAYX_ARTIFACT_DIR",
                              os.path.join(tempfile.gettempdir(), "rayx-test-artifacts"))


def dashboard(cluster):
    """(host, port, credential) of the suite cluster's web port."""
    env = token_env(cluster.token)
    url = run_cli("dashboard", "--url", temp_dir=cluster.temp_dir, env=env).stdout.strip()
    credential = run_cli("dashboard", "--credential", temp_dir=cluster.temp_dir,
                         env=env).stdout.strip()
    parsed = urllib.parse.urlparse(url)
    return parsed.hostname, parsed.port, credential


def request(host, port, method, path, headers=None, body=None):
    """(status, headers, body text) of one request on its own connection."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def metric(text, name, labels):
    """The value of sample `name{labels}` in Prometheus text, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    prefix = f"{name}{{{want}}} " if want else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_web_port_admits_only_the_credential(cluster):
    host, port, credential = dashboard(cluster)
    assert host == "127.0.0.1"
    # Nothing but the login page and its files without the credential.
    for path in ("/metrics", "/api/state", "/api/jobs/00/output", "/index.html"):
        status, headers, _ = request(host, port, "GET", path)
        assert status in (401, 303), (path, status)
    status, headers, _ = request(host, port, "GET", "/")
    assert status == 303 and headers["Location"] == "/login"
    status, _, page = request(host, port, "GET", "/login")
    assert status == 200 and "Credential" in page and cluster.token not in page
    wrong = "0" * len(credential)
    assert request(host, port, "GET", "/metrics",
                   {"Authorization": f"Bearer {wrong}"})[0] == 401
    # The credential, as Prometheus sends it.
    status, headers, text = request(host, port, "GET", "/metrics",
                                    {"Authorization": f"Bearer {credential}"})
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert metric(text, "rayx_nodes", {"state": "alive"}) == 3
    assert metric(text, "rayx_resources", {"resource": "GPU"}) == 2
    # A login gives a session cookie; logging out ends it.
    assert request(host, port, "POST", "/api/login", body=wrong)[0] == 401
    status, headers, _ = request(host, port, "POST", "/api/login",
                                 {"Content-Type": "application/x-www-form-urlencoded"},
                                 body="credential=" + credential)
    assert status == 204
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    status, _, text = request(host, port, "GET", "/api/state", {"Cookie": cookie})
    state = json.loads(text)
    assert status == 200
    assert sorted(n["address"] for n in state["nodes"] if n["alive"]) == [
        "127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert state["enums"]["placement_group_state"][1] == "CREATED"
    assert request(host, port, "POST", "/api/logout", {"Cookie": cookie})[0] == 204
    assert request(host, port, "GET", "/api/state", {"Cookie": cookie})[0] == 401
    assert request(host, port, "GET", "/api/state", {"Cookie": "rayx_session=" + "a" * 64})[0] == 401
    # Read-only.
    assert request(host, port, "PUT", "/api/state", {"Cookie": cookie})[0] == 405
    assert request(host, port, "DELETE", "/metrics",
                   {"Authorization": f"Bearer {credential}"})[0] == 405
    # `rayx status --format json` and `rayx list --format json` read the same fields.
    env = token_env(cluster.token)
    status_json = json.loads(run_cli("status", "--format", "json", temp_dir=cluster.temp_dir,
                                     env=env).stdout)
    assert status_json["cluster_id"] == state["status"]["cluster_id"]
    assert status_json["dashboard_url"] == f"http://{host}:{port}"
    nodes_json = json.loads(run_cli("list", "nodes", "--format", "json",
                                    temp_dir=cluster.temp_dir, env=env).stdout)
    assert {n["node_id"] for n in nodes_json} == {n["node_id"] for n in state["nodes"]}


def test_web_port_bounds_what_a_client_sends(cluster):
    host, port, credential = dashboard(cluster)
    auth = {"Authorization": f"Bearer {credential}"}
    # Headers over 8 KiB, a body over 4 KiB: refused, the connection closed.
    assert request(host, port, "GET", "/metrics", {**auth, "X-Pad": "x" * 9000})[0] == 431
    assert request(host, port, "POST", "/api/login", body="x" * 5000)[0] == 413
    # Not HTTP at all: a 400, and the port goes on serving.
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"\x00\x01\x02 garbage \xff\xfe\r\n\r\n")
        answer = s.recv(200)
    assert answer.startswith(b"HTTP/1.1 400"), answer
    # A client that opens a connection and says nothing is let go, and others
    # are served meanwhile.
    idle = socket.create_connection((host, port), timeout=10)
    try:
        assert request(host, port, "GET", "/metrics", auth)[0] == 200
    finally:
        idle.close()
    # Bound to the head's address, not every interface.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.2", port), timeout=2).close()


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(PROMETHEUS is None, reason="Debian's prometheus is not installed "
                    "(scripts/install-deps.sh installs it)")
def test_prometheus_counts_alive_nodes_and_used_gpus(cluster, rayx_mod, tmp_path):
    rayx = rayx_mod
    host, port, credential = dashboard(cluster)
    (tmp_path / "credential").write_text(credential)
    (tmp_path / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: rayx
    authorization: {{type: Bearer, credentials_file: {tmp_path / "credential"}}}
    static_configs: [{{targets: ['{host}:{port}']}}]
""")
    api_port = free_port()
    prometheus = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{api_port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))

    def query(expr):
        url = f"http://127.0.0.1:{api_port}/api/v1/query?query={urllib.parse.quote(expr)}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                result = json.load(r)["data"]["result"]
        except OSError:
            return None
        return float(result[0]["value"][1]) if result else None

    @rayx.remote(num_gpus=1)
    class GpuHolder:
        def ready(self):
            return True

    holders = []
    try:
        wait_until(lambda: query('rayx_nodes{state="alive"}') == 3, 60,
                   "Prometheus to scrape 3 alive nodes")
        assert query('rayx_resources_used{resource="GPU"}') == 0
        holders = [GpuHolder.remote() for _ in range(2)]
        assert rayx.get([h.ready.remote() for h in holders], timeout=60) == [True, True]
        wait_until(lambda: query('rayx_resources_used{resource="GPU"}') == 2, 30,
                   "Prometheus to see the actors' 2 GPUs used")
        assert query('sum(rayx_leases{kind="actor"})') >= 2
        assert query('rayx_node_resources_used{address="127.0.0.2",resource="GPU"}') == 2
        # Every scrape went through with the credential.
        assert query('up{job="rayx"}') == 1
    finally:
        for h in holders:
            rayx.kill(h)
        prometheus.send_signal(signal.SIGTERM)
        try:
            prometheus.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait()


class Rank:
    """A rank of a Gloo group made inside actors (rayx.util.collective)."""

    def join(self, world_size, rank, group):
        import rayx.util.collective as col
        col.init_collective_group(world_size, rank, group_name=group)
        return True

    def allreduce(self, group, times):
        import numpy as np
        import rayx.util.collective as col
        x = np.ones(4, dtype=np.float32)
        for _ in range(times):
            col.allreduce(x, group_name=group)
        col.barrier(group_name=group)
        return float(x[0])


def test_metrics_count_nested_tasks_collective_ops_and_list_the_groups(cluster, rayx_mod):
    """Workers count what they do in a page their agent sums into its
    heartbeats: tasks a task submits and collective operations reach
    /metrics; the group shows on /api/state and in `rayx list`."""
    rayx = rayx_mod
    host, port, credential = dashboard(cluster)
    auth = {"Authorization": "Bearer " + credential}
    hist = "rayx_collective_operation_duration_seconds"

    def value(name, labels):
        return metric(request(host, port, "GET", "/metrics", auth)[2], name, labels) or 0.0

    submitted = value("rayx_tasks_total", {"state": "submitted"})
    allreduces = value(hist + "_count", {"op": "allreduce"})
    barriers = value(hist + "_count", {"op": "barrier"})

    @rayx.remote
    def leaf(i):
        return i

    @rayx.remote
    def fan_out(n):
        return sum(rayx.get([leaf.remote(i) for i in range(n)]))

    assert rayx.get(fan_out.remote(5), timeout=60) == 10
    # One task from the driver, five from the worker that ran it.
    wait_until(lambda: value("rayx_tasks_total", {"state": "submitted"}) >= submitted + 6, 30,
               "the worker's nested tasks to be counted")

    group = "metrics-allreduce"
    ranks = [rayx.remote(Rank).remote() for _ in range(2)]
    try:
        assert rayx.get([r.join.remote(2, i, group) for i, r in enumerate(ranks)],
                        timeout=60) == [True, True]
        assert rayx.get([r.allreduce.remote(group, 7) for r in ranks], timeout=60) == [128.0] * 2
        # Agents read the workers' counters about once a second: one reading
        # may hold a rank's allreduces but not yet its barrier.
        wait_until(lambda: value(hist + "_count", {"op": "allreduce"}) >= allreduces + 14 and
                   value(hist + "_count", {"op": "barrier"}) >= barriers + 2, 30,
                   "both ranks' 7 allreduces and their barriers to be counted")
        text = request(host, port, "GET", "/metrics", auth)[2]
        assert metric(text, hist + "_count", {"op": "barrier"}) >= barriers + 2
        # A histogram: the unbounded bucket holds every operation, the
        # bounded ones no more, and the time is positive.
        count = metric(text, hist + "_count", {"op": "allreduce"})
        assert metric(text, hist + "_bucket", {"op": "allreduce", "le": "+Inf"}) == count
        assert metric(text, hist + "_bucket", {"op": "allreduce", "le": "0.0001"}) <= count
        assert metric(text, hist + "_sum", {"op": "allreduce"}) > 0
        assert metric(text, "rayx_collective_groups", {}) >= 1

        state = json.loads(request(host, port, "GET", "/api/state", auth)[2])
        mine = [g for g in state["collective_groups"] if g["group"] == group]
        assert len(mine) == 1 and mine[0]["world_size"] == 2 and mine[0]["ended"] == ""
        assert sorted(m["rank"] for m in mine[0]["members"]) == [0, 1]
        leases = {lease["lease_id"] for lease in state["leases"]}
        assert {m["lease_id"] for m in mine[0]["members"]} <= leases
        listed = run_cli("list", "collective-groups", temp_dir=cluster.temp_dir,
                         env=token_env(cluster.token)).stdout
        assert group in listed and "RUNNING (2/2 joined)" in listed, listed

        # A rank dies: the group is listed as ended, naming the rank.
        rayx.kill(ranks[1])

        def failed():
            st = json.loads(request(host, port, "GET", "/api/state", auth)[2])
            return [g["ended"] for g in st["collective_groups"]
                    if g["group"] == group and g["ended"]]
        wait_until(lambda: failed(), 30, "the group to be listed as ended")
        assert failed()[0].startswith("rank 1: ")
    finally:
        for r in ranks:
            rayx.kill(r)


CHROMIUM = shutil.which("chromium")

# A driver with a running job: tasks that print, and a Train run (real torch,
# two ranks) that reports a falling loss and then waits for the test.
JOB = r"""
import os, shutil, sys, tempfile, time
import rayx, rayx.train
from rayx.train import CheckpointConfig, RunConfig, ScalingConfig
from rayx.train.torch import TorchTrainer

go = sys.argv[1]

def loop(config):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 2)
    y = x @ torch.tensor([[2.0], [-1.0]])
    for step in range(12):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        checkpoint = None
        if step == 11:  # over 4 MiB: its upload reports progress
            d = tempfile.mkdtemp()
            with open(os.path.join(d, "weights"), "wb") as f:
                f.write(os.urandom(5 << 20))
            checkpoint = rayx.train.Checkpoint.from_directory(d)
        rayx.train.report({"loss": float(loss), "step": step}, checkpoint=checkpoint)
        if checkpoint is not None:
            shutil.rmtree(d)  # the cluster has its copy
    deadline = time.monotonic() + 120
    while not os.path.exists(config["go"]) and time.monotonic() < deadline:
        time.sleep(0.05)

@rayx.remote
def shout(i):
    print(f"dashboard line {i}")
    return i

rayx.init()
print("JOB", rayx.get_runtime_context().get_job_id(), flush=True)
assert rayx.get([shout.remote(i) for i in range(3)]) == [0, 1, 2]
# The head's package store (num_replicas=0): its upload says how far it got.
TorchTrainer(loop, train_loop_config={"go": go},
             scaling_config=ScalingConfig(num_workers=2),
             run_config=RunConfig(checkpoint_config=CheckpointConfig(num_replicas=0))).fit()
print("DONE", flush=True)
"""


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                    "(scripts/install-deps.sh installs it)")
def test_dashboard_in_chromium_shows_nodes_job_output_and_loss(cluster, tmp_path):
    host, port, credential = dashboard(cluster)
    go = tmp_path / "go"
    job = subprocess.Popen([sys.executable, "-u", "-c", JOB, str(go)], env=driver_env(cluster),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        job_id = job.stdout.readline().split()[1]
        auth = {"Authorization": f"Bearer {credential}"}

        def run_record():
            state = json.loads(request(host, port, "GET", "/api/state", auth)[2])
            for record in state["train_runs"]:
                if record["job"] == job_id and record["reports"] >= 12:
                    return record
            return None

        record = wait_until(run_record, 120, "the Train run's 12 reports")
        losses = [h["loss"] for h in record["history"]]
        assert losses[-1] < losses[0]
        metrics = request(host, port, "GET", "/metrics", auth)[2]
        labels = {"job": job_id, "run": record["run"]}
        assert metric(metrics, "rayx_train_reports_total", labels) == 12
        assert metric(metrics, "rayx_train_metric", {**labels, "metric": "loss"}) == losses[-1]
        assert metric(metrics, "rayx_train_checkpoints_total", labels) == 1
        stored = metric(metrics, "rayx_train_checkpoint_bytes_total", labels)
        assert stored > 5 << 20 and metric(metrics, "rayx_train_last_checkpoint_bytes",
                                            labels) == stored
        # The drivers' heartbeats carry what they submitted: at least the job's
        # three tasks and the run's calls, finished.
        wait_until(lambda: metric(request(host, port, "GET", "/metrics", auth)[2],
                                  "rayx_tasks_total", {"state": "finished"}) >= 5, 10,
                   "the job's finished tasks in rayx_tasks_total")
        wait_until(lambda: "dashboard line 2" in request(
            host, port, "GET", f"/api/jobs/{job_id}/output", auth)[2], 30,
            "the tasks' output in the head's tail")

        def chromium(*args):
            profile = tmp_path / f"profile{len(os.listdir(tmp_path))}"
            r = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                 "--virtual-time-budget=8000", *args,
                 f"http://{host}:{port}/login#credential={credential}&job={job_id}"],
                capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            return r.stdout

        dom = chromium("--dump-dom")
        assert 'data-loaded="yes"' in dom, dom[:2000]
        for address in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
            assert f"<td>{address}</td>" in dom
        assert f"<td>{job_id}</td>" in dom
        assert "(shout pid=" in dom and "dashboard line 2" in dom
        assert 'class="metric-plot" data-metric="loss" data-points="12"' in dom
        assert "<polyline" in dom
        # The run's ranks are a collective group (their reports' barrier).
        assert "RUNNING (2/2 joined)" in dom
        # The page never shows the token.
        assert cluster.token not in dom

        os.makedirs(ARTIFACT_DIR, exist_ok=True)
        shot = os.path.join(ARTIFACT_DIR, "dashboard.png")
        if os.path.exists(shot):
            os.remove(shot)
        chromium(f"--screenshot={shot}", "--window-size=1400,2000", "--hide-scrollbars")
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert os.path.getsize(shot) > 20000
        print(f"dashboard screenshot: {shot}")
    finally:
        go.write_text("go")
        try:
            out, _ = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            out, _ = job.communicate()
    assert job.returncode == 0 and "DONE" in out, out[-3000:]
    # Rank 0's checkpoint upload said how far it got, in lines (not a
    # terminal), which reached the driver with the rank's output.
    assert "Uploading run " in out and "'s checkpoint: 100% (" in out, out[-3000:]
