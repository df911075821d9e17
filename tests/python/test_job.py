"""`rayx job submit -- python driver.py`: a Python driver that joins the
submitted job, with its working directory on sys.path in every worker."""

import json
import os
import subprocess
import sys
import textwrap

from conftest import CLI, driver_env, wait_until
from test_dashboard import dashboard, request


def test_submitted_python_job_runs_with_its_working_directory(cluster, tmp_path):
    (tmp_path / "helpers.py").write_text(textwrap.dedent("""
        def triple(x):
            return 3 * x
    """))
    (tmp_path / "driver.py").write_text(textwrap.dedent("""
        import os
        import rayx
        import helpers

        rayx.init()

        @rayx.remote
        def apply(x):
            import helpers  # found through the worker's working directory
            print("TASK LINE", x)
            return helpers.triple(x), sorted(k for k in os.environ if "TOKEN" in k)

        results = rayx.get([apply.remote(i) for i in range(4)])
        print("VALUES", [v for v, _ in results])
        # Neither the entrypoint nor its workers hold the cluster token: they
        # act for their job (RAYX_JOB_SECRET) only.
        print("TOKENS", sorted(k for k in os.environ if "TOKEN" in k), [t for _, t in results],
              "RAYX_JOB_SECRET" in os.environ)
        print("JOB", os.environ.get("RAYX_SUBMISSION_ID"),
              rayx.get_runtime_context().get_job_id())
        rayx.shutdown()
    """))
    pythonpath = os.environ["PYTHONPATH"]
    r = subprocess.run(
        [CLI, "job", "submit", "--working-dir", str(tmp_path), "--submission-id", "py-job-1",
         "--env", f"PYTHONPATH={pythonpath}", "--temp-dir", cluster.temp_dir, "--",
         sys.executable, "driver.py"],
        capture_output=True, text=True, timeout=120, env=driver_env(cluster))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "VALUES [0, 3, 6, 9]" in r.stdout
    assert "TOKENS [] [[], [], [], []] True" in r.stdout, r.stdout
    assert "JOB py-job-1" in r.stdout
    status = subprocess.run([CLI, "job", "status", "py-job-1", "--temp-dir", cluster.temp_dir],
                            capture_output=True, text=True, timeout=60, env=driver_env(cluster))
    assert "SUCCEEDED" in status.stdout, status.stdout + status.stderr
    # The entrypoint's own output printed once (never echoed back to it), its
    # tasks' lines once (the driver prints them).
    assert r.stdout.count("VALUES [") == 1 and r.stdout.count("TASK LINE 2") == 1, r.stdout
    # The dashboard shows both: the entrypoint's lines and its tasks'.
    job_id = r.stdout.split("JOB py-job-1 ")[1].split()[0]
    host, port, credential = dashboard(cluster)

    def output():
        status, _, body = request(host, port, "GET", f"/api/jobs/{job_id}/output",
                                  {"Authorization": f"Bearer {credential}"})
        return json.loads(body) if status == 200 else None

    def entrypoint_line():
        out = output()
        return out and any(line["line"] == "VALUES [0, 3, 6, 9]" for line in out["process_lines"])
    wait_until(entrypoint_line, 30, "the entrypoint's line on the dashboard")
    assert any(line["line"] == "TASK LINE 2" for line in output()["lines"])


def test_submitted_python_job_that_raises_fails(cluster, tmp_path):
    (tmp_path / "driver.py").write_text(textwrap.dedent("""
        import rayx
        rayx.init()

        @rayx.remote
        def bad():
            raise KeyError("missing-key-42")

        rayx.get(bad.remote())
    """))
    r = subprocess.run(
        [CLI, "job", "submit", "--working-dir", str(tmp_path), "--env",
         f"PYTHONPATH={os.environ['PYTHONPATH']}", "--temp-dir", cluster.temp_dir, "--",
         sys.executable, "driver.py"],
        capture_output=True, text=True, timeout=120, env=driver_env(cluster))
    assert r.returncode != 0
    assert "missing-key-42" in r.stdout + r.stderr


def test_a_large_working_directory_upload_reports_its_progress(cluster, tmp_path):
    # 6 MiB that do not compress: the upload takes two chunks and says so, a
    # line per quarter when stdout is not a terminal.
    (tmp_path / "weights.bin").write_bytes(os.urandom(6 << 20))
    r = subprocess.run(
        [CLI, "job", "submit", "--working-dir", str(tmp_path), "--temp-dir", cluster.temp_dir,
         "--", "sh", "-c", "wc -c < weights.bin"],
        capture_output=True, text=True, timeout=120, env=driver_env(cluster))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("Uploading the working directory")]
    assert lines[-1].startswith("Uploading the working directory: 100% ("), r.stdout
    assert len(lines) >= 2 and "\r" not in r.stdout, r.stdout
    assert str(6 << 20) in r.stdout  # the job saw the whole file
