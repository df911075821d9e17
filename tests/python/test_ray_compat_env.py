"""Ray's asyncio integration (awaiting ObjectRefs, ref.future()) and
runtime_env (env_vars, working_dir, py_modules, excludes) on rayx, on the
3-node loopback cluster."""

import asyncio
import concurrent.futures
import os
import textwrap
import time

import pytest

import gates
from conftest import run_driver


# --- awaiting ObjectRefs ----------------------------------------------------------------

def test_await_gather_and_wait_on_refs_without_blocking_the_loop(rayx_mod, tmp_path):
    ray = rayx_mod
    gate = tmp_path / "gate"

    @ray.remote
    def square(x):
        return x * x

    # Its own resource shape: a task pool of its own, so that on a loaded
    # machine (the pool saturated) no `square` call is pipelined behind the
    # call that never ends.
    @ray.remote(num_cpus=0.5)
    def gated(path):
        gates.wait_for_file(path)
        return "opened"

    @ray.remote
    def fails():
        raise KeyError("missing 9")

    async def main():
        assert await square.remote(7) == 49
        assert await asyncio.gather(*[square.remote(i) for i in range(50)]) == \
            [i * i for i in range(50)]
        # While a ref is awaited the loop runs other coroutines: this one
        # opens the gate the awaited task waits on.
        ticks = 0

        async def ticker():
            nonlocal ticks
            while ticks < 5:
                ticks += 1
                await asyncio.sleep(0.01)
            gate.touch()

        value, _ = await asyncio.wait_for(asyncio.gather(gated.remote(str(gate)), ticker()), 60)
        assert value == "opened" and ticks == 5
        done, pending = await asyncio.wait([asyncio.ensure_future(square.remote(3))], timeout=30)
        assert len(done) == 1 and not pending and done.pop().result() == 9
        # Refs themselves, as Ray's docs pass them (Python 3.11's asyncio.wait
        # takes futures only).
        slow_ref, fast_ref = gated.remote(str(tmp_path / "never")), square.remote(4)
        done, pending = await asyncio.wait([slow_ref, fast_ref], timeout=30,
                                           return_when=asyncio.FIRST_COMPLETED)
        assert done == {fast_ref} and pending == {slow_ref} and await fast_ref == 16
        (tmp_path / "never").touch()
        with pytest.raises(KeyError):
            await fails.remote()
        with pytest.raises(ray.exceptions.RayTaskError):
            await fails.remote()

    asyncio.run(main())


def test_ref_future_is_a_concurrent_future(rayx_mod, tmp_path):
    ray = rayx_mod

    @ray.remote
    def add(a, b):
        return a + b

    futures = [add.remote(i, 1).future() for i in range(20)]
    assert all(isinstance(f, concurrent.futures.Future) for f in futures)
    assert [f.result(timeout=60) for f in futures] == [i + 1 for i in range(20)]
    done, _ = concurrent.futures.wait([ray.put("p").future()], timeout=30)
    assert done.pop().result() == "p"

    @ray.remote
    def slow(path):
        gates.wait_for_file(path)

    ref = slow.remote(str(tmp_path / "never"))
    fut = ref.future()
    with pytest.raises(concurrent.futures.TimeoutError):
        fut.result(timeout=0.2)
    ray.cancel(ref)  # a pending future ends with the cancellation
    with pytest.raises(ray.exceptions.TaskCancelledError):
        fut.result(timeout=10)
    (tmp_path / "never").touch()


# --- runtime_env -----------------------------------------------------------------------------

def test_job_and_task_env_vars_and_no_worker_sharing(cluster):
    r = run_driver(cluster, textwrap.dedent("""
        import os
        import rayx as ray
        ray.init(runtime_env={"env_vars": {"JOB_VAR": "job", "SHARED": "from-job"}})

        @ray.remote
        def read():
            return (os.environ.get("JOB_VAR"), os.environ.get("SHARED"),
                    os.environ.get("TASK_VAR"), os.getpid())

        @ray.remote
        def nested():
            return ray.get(read.remote())

        @ray.remote
        class Reader:
            def read(self):
                return os.environ.get("JOB_VAR"), os.environ.get("ACTOR_VAR")

        own = read.options(runtime_env={"env_vars": {"TASK_VAR": "task", "SHARED": "task"}})
        plain_pids, own_pids = set(), set()
        for _ in range(5):  # interleaved: a worker is never reused across envs
            p, o = ray.get([read.remote(), own.remote()])
            assert p[:3] == ("job", "from-job", None), p
            assert o[:3] == ("job", "task", "task"), o
            plain_pids.add(p[3]); own_pids.add(o[3])
        assert not plain_pids & own_pids
        print("NESTED", ray.get(nested.remote())[:3])
        a = Reader.options(runtime_env={"env_vars": {"ACTOR_VAR": "actor"}}).remote()
        print("ACTOR", ray.get(a.read.remote()))
        print("DEFAULT_ACTOR", ray.get(Reader.remote().read.remote()))
        print("CONTEXT", ray.get_runtime_context().runtime_env["env_vars"]["JOB_VAR"])
        print("DONE")
    """), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NESTED ('job', 'from-job', None)" in r.stdout
    assert "ACTOR ('job', 'actor')" in r.stdout
    assert "DEFAULT_ACTOR ('job', None)" in r.stdout
    assert "CONTEXT job" in r.stdout and "DONE" in r.stdout


def test_working_dir_with_excludes_and_py_modules(rayx_mod, tmp_path):
    ray = rayx_mod
    wd = tmp_path / "project"
    (wd / "data").mkdir(parents=True)
    (wd / "big").mkdir()
    (wd / "helper_mod.py").write_text("def answer():\n    return 42\n")
    (wd / "data" / "input.txt").write_text("hello from the working dir")
    (wd / "data" / "run.log").write_text("left out by *.log")
    (wd / "big" / "blob.bin").write_bytes(b"x" * 1000)
    (wd / "secret.txt").write_text("left out by .gitignore")
    (wd / ".gitignore").write_text("secret.txt\n")
    pkg = tmp_path / "libs" / "compat_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("NAME = 'compat_pkg'\n")
    single = tmp_path / "libs" / "single_mod.py"
    single.write_text("VALUE = 7\n")

    @ray.remote
    def inspect():
        import helper_mod
        import compat_pkg
        import single_mod
        files = sorted(os.path.relpath(os.path.join(d, f), ".")
                       for d, _, fs in os.walk(".") for f in fs)
        with open("data/input.txt") as f:
            text = f.read()
        return helper_mod.answer(), compat_pkg.NAME, single_mod.VALUE, text, files

    env = {"working_dir": str(wd), "excludes": ["*.log", "/big/"],
           "py_modules": [str(pkg), str(single)]}
    answer, name, value, text, files = ray.get(inspect.options(runtime_env=env).remote(),
                                               timeout=120)
    assert (answer, name, value, text) == (42, "compat_pkg", 7, "hello from the working dir")
    assert "data/input.txt" in files and "helper_mod.py" in files
    assert not any(f.endswith(".log") or f.startswith("big") or f == "secret.txt"
                   for f in files), files

    @ray.remote
    class InDir:
        def cwd_files(self):
            import helper_mod
            return helper_mod.answer(), sorted(os.listdir("data"))

    a = InDir.options(runtime_env={"working_dir": str(wd), "excludes": ["*.log"]}).remote()
    assert ray.get(a.cwd_files.remote(), timeout=120) == (42, ["input.txt"])
    ray.kill(a)


def test_worker_process_setup_hook_runs_once_per_worker(cluster, tmp_path):
    (tmp_path / "hookmod.py").write_text(
        "import os\n\ndef setup():\n    os.environ['SET_BY_HOOK'] = 'hooked'\n")
    r = run_driver(cluster, textwrap.dedent("""
        import os
        import rayx as ray

        def setup():
            os.environ["HOOK_RUNS"] = str(int(os.environ.get("HOOK_RUNS", "0")) + 1)

        ray.init(runtime_env={"worker_process_setup_hook": setup})

        @ray.remote
        def read():
            return os.environ.get("HOOK_RUNS"), os.environ.get("SET_BY_HOOK")

        @ray.remote
        class A:
            def read(self):
                return os.environ.get("HOOK_RUNS")

        print("TASKS", set(ray.get([read.remote() for _ in range(10)])))
        print("ACTOR", ray.get(A.remote().read.remote()))
        # By name, from a module the same env ships: it runs after py_modules
        # are on sys.path, and replaces the job's hook (a field of the child's env).
        by_name = read.options(runtime_env={"py_modules": [MODULE],
                                            "worker_process_setup_hook": "hookmod.setup"})
        print("BY_NAME", ray.get(by_name.remote()))
    """).replace("MODULE", repr(str(tmp_path / "hookmod.py"))), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TASKS {('1', None)}" in r.stdout and "ACTOR 1" in r.stdout
    assert "BY_NAME (None, 'hooked')" in r.stdout


def test_unsupported_runtime_env_fields_fail_at_submission(rayx_mod, tmp_path):
    ray = rayx_mod

    @ray.remote
    def f():
        return 1

    for field, value in (("pip", ["requests"]), ("conda", {"dependencies": ["x"]}),
                         ("container", {"image": "x"}), ("image_uri", "x"), ("uv", ["x"])):
        with pytest.raises(ValueError, match="Python environment of its node"):
            f.options(runtime_env={field: value}).remote()
    with pytest.raises(ValueError, match="unknown field 'not_a_field'"):
        f.options(runtime_env={"not_a_field": 1}).remote()
    with pytest.raises(ValueError, match="not a directory"):
        f.options(runtime_env={"working_dir": str(tmp_path / "missing")}).remote()
    with pytest.raises(ValueError, match="RAYX_"):
        f.options(runtime_env={"env_vars": {"RAYX_NODE_IP": "x"}}).remote()
    # Empty package lists ask for nothing: accepted, as in Ray.
    assert ray.get(f.options(runtime_env={"pip": []}).remote()) == 1


def test_gitignore_style_excludes():
    from rayx._runtime_env import excluded_paths
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for rel in ("a.py", "a.log", "keep.log", "sub/b.log", "sub/deep/c.txt", "build/x.o",
                    "src/build/y.o", "docs/build/z.txt", "top.txt", "sub/top.txt"):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
        got = excluded_paths(root, ["*.log", "!keep.log", "/build/", "deep/", "/top.txt",
                                    "docs/**/z.txt"])
        assert sorted(got) == ["a.log", "build", "docs/build/z.txt", "sub/b.log", "sub/deep",
                               "top.txt"]
