"""Hosts that are separate network stacks: three network namespaces joined by a
bridge in a fourth, with addresses of the documentation range 198.51.100.0/24
that exist only inside them (no traffic leaves the machine). The head runs in
one and agents in the other two, each with a temporary directory of its own,
as on three machines; nothing is told which address to use. Checked: the
address each daemon advertises (its namespace's interface, not loopback),
`rayx status` from another host, a Python job whose object is pulled from
another host and whose task output crosses hosts, a Gloo collective group of
rayx's across two hosts, `rayx job submit` with a working directory that a
third host fetches, a torch DDP program (gloo)
through `rayx launch` across two hosts with no variable set by the test (the
machine's hostname resolves to 127.0.0.1, so torch needs the GLOO_SOCKET_IFNAME
the agents give), `rayx launch` from a fourth machine that cannot reach one of the
hosts (the ranks run, and launch says whose output it could not read), and a
TorchTrainer run across hosts whose rank's host has its
link cut mid-run: declared dead, the run restarts on the others; nothing is
left running."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import CLI, cluster_processes, read_session, wait_until

SUBNET = "198.51.100"
HOSTS = ("head", "a", "b")  # each runs rayx
MACHINES = HOSTS + ("client",)  # "client" only runs the CLI


class Hosts:
    """The namespaces, bridge and veth pairs; removed by close()."""

    def __init__(self):
        self.prefix = f"rx{os.getpid() % 100000}"
        self.switch = self.prefix + "sw"
        self.made = []
        self.temp = {h: tempfile.mkdtemp(prefix=f"rayx-host-{h}-") for h in HOSTS}

    def ns(self, host):
        return self.prefix + host

    def address(self, host):
        return f"{SUBNET}.{MACHINES.index(host) + 1}"

    def create(self):
        def ip(*args):
            subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)

        for name in (self.switch, *(self.ns(h) for h in MACHINES)):
            ip("netns", "add", name)
            self.made.append(name)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for i, host in enumerate(MACHINES):
            inside, outside = f"{self.prefix}v{i}a", f"{self.prefix}v{i}b"
            ip("link", "add", inside, "type", "veth", "peer", "name", outside)
            ip("link", "set", inside, "netns", self.ns(host))
            ip("link", "set", outside, "netns", self.switch)
            ip("-n", self.ns(host), "link", "set", inside, "name", "eth0")
            ip("-n", self.switch, "link", "set", outside, "master", "br0", "up")
            ip("-n", self.ns(host), "link", "set", "lo", "up")
            ip("-n", self.ns(host), "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            ip("-n", self.ns(host), "link", "set", "eth0", "up")
        # The client reaches the head and host a, not host b.
        ip("-n", self.ns("client"), "route", "add", "unreachable", f"{self.address('b')}/32")

    def run(self, host, argv, env=None, timeout=120, check=False):
        return subprocess.run(["ip", "netns", "exec", self.ns(host), *argv], env=env,
                              capture_output=True, text=True, timeout=timeout, check=check)

    def cut(self, host):
        subprocess.run(["ip", "-n", self.ns(host), "link", "set", "eth0", "down"], check=True,
                       timeout=30)

    def close(self):
        for host in HOSTS:  # what each host's rayx started
            subprocess.run(["ip", "netns", "exec", self.ns(host), CLI, "stop", "--temp-dir",
                            self.temp[host]], capture_output=True, timeout=120)
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        for d in self.temp.values():
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def hosts():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    h = Hosts()
    try:
        h.create()
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        h.close()
        why = e.stderr.strip() if getattr(e, "stderr", None) else str(e)
        pytest.skip(f"cannot make network namespaces here: {why}")
    try:
        yield h
    finally:
        h.close()


DRIVER = r'''
import os, sys
import rayx
rayx.init()
values = list(range(200_000))  # stored: pulled by the other host

@rayx.remote(resources={"host_a": 1})
def total(xs):
    print("summing on", os.environ["RAYX_NODE_IP"], flush=True)
    return os.environ["RAYX_NODE_IP"], sum(xs)

node, s = rayx.get(total.remote(rayx.put(values)), timeout=120)
print("RESULT", node, s, flush=True)

if len(sys.argv) > 1:  # a Gloo group of rayx's own across the two agents' hosts
    import numpy as np
    import rayx.util.collective as col

    @rayx.remote
    class Member:
        def step(self, value):
            x = np.full(4, value, np.float32)
            col.allreduce(x, group_name="hosts")
            return os.environ["RAYX_NODE_IP"], float(x[0])

    members = [Member.options(resources={h: 1}).remote() for h in ("host_a", "host_b")]
    col.create_collective_group(members, 2, [0, 1], backend="gloo", group_name="hosts")
    print("COLLECTIVE", sorted(rayx.get([m.step.remote(v) for m, v in zip(members, (1.0, 2.0))],
                                        timeout=120)), flush=True)
rayx.shutdown()
'''

TRAIN = r'''
import os, sys, time
import rayx, rayx.train
from rayx.train import FailureConfig, RunConfig, ScalingConfig
from rayx.train.torch import TorchTrainer, prepare_model
gate = sys.argv[1]
rayx.init()


def loop(config):
    import torch
    import torch.distributed as dist
    rank = rayx.train.get_context().get_world_rank()
    node = os.environ["RAYX_NODE_IP"]
    prepare_model(torch.nn.Linear(2, 1))
    world = torch.ones(1)
    dist.all_reduce(world)  # across the ranks' hosts
    after_cut = os.path.exists(gate + ".cut")
    for epoch in range(2):
        rayx.train.report({"epoch": epoch, "node": node, "world": int(world.item()),
                           "after_cut": after_cut})
        if epoch == 0 and not after_cut:
            with open(f"{gate}.rank{rank}.tmp", "w") as f:
                f.write(node)
            os.rename(f"{gate}.rank{rank}.tmp", f"{gate}.rank{rank}")
            deadline = time.monotonic() + 120  # the test cuts a rank's host
            while not os.path.exists(gate + ".cut") and time.monotonic() < deadline:
                time.sleep(0.05)


result = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                      run_config=RunConfig(name="hosts-run", report_timeout_s=60),
                      failure_config=FailureConfig(max_failures=1)).fit()
print("TRAINED", result.num_restarts, result.metrics["node"], result.metrics["world"],
      result.metrics["after_cut"], flush=True)
rayx.shutdown()
'''

DDP = r'''
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("ALLREDUCE", dist.get_rank(), int(t.item()), os.environ["MASTER_ADDR"], flush=True)
dist.destroy_process_group()
'''


def test_a_cluster_across_network_namespaces(hosts, tmp_path):
    env = dict(os.environ)
    for var in ("RAYX_ADDRESS", "RAYX_TOKEN", "RAYX_TEMP_DIR", "GLOO_SOCKET_IFNAME",
                "NCCL_SOCKET_IFNAME", "MASTER_ADDR"):
        env.pop(var, None)
    started = hosts.run("head", [CLI, "start", "--head", "--port", "6380", "--num-cpus", "1",
                                 "--num-gpus", "0", "--heartbeat-period-ms", "250",
                                 "--node-timeout-ms", "1500", "--temp-dir", hosts.temp["head"]],
                        env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    session = read_session(hosts.temp["head"])
    address = session["address"]
    assert address == f"{hosts.address('head')}:6380", address
    env["RAYX_TOKEN"] = session["token"]
    for host in ("a", "b"):
        joined = hosts.run(host, [CLI, "start", "--address", address, "--num-cpus", "2",
                                  "--num-gpus", "0", "--resources", json.dumps({f"host_{host}": 1}),
                                  "--temp-dir", hosts.temp[host]], env=env)
        assert joined.returncode == 0, joined.stdout + joined.stderr

    # Each advertises its own namespace's address; `rayx status` from host b.
    def nodes():
        text = hosts.run("b", [CLI, "status", "--address", address], env=env).stdout
        alive, dead, section = set(), set(), None
        for line in text.splitlines():
            if line.startswith(("Alive:", "Dead:")):
                section = alive if line.startswith("Alive:") else dead
            elif line.startswith(" node_") and section is not None:
                section.add(line.split()[1])
            elif line and not line.startswith(" "):
                section = None
        return alive, dead
    wait_until(lambda: len(nodes()[0]) == 3, 30, "three nodes in rayx status")
    assert nodes()[0] == {hosts.address(h) for h in HOSTS}

    # A Python job from host b: its object is pulled by host a, whose task's
    # output comes back to the driver through the head.
    env_b = dict(env, RAYX_ADDRESS=address, RAYX_TEMP_DIR=hosts.temp["b"])
    job = hosts.run("b", [sys.executable, "-c", DRIVER, "collective"], env=env_b, timeout=180)
    assert job.returncode == 0, job.stdout + job.stderr
    assert f"RESULT {hosts.address('a')} {sum(range(200_000))}" in job.stdout, job.stdout
    assert f"ip={hosts.address('a')}) summing on {hosts.address('a')}" in job.stdout, job.stdout
    assert (f"COLLECTIVE [('{hosts.address('a')}', 3.0), ('{hosts.address('b')}', 3.0)]"
            in job.stdout), job.stdout

    # `rayx job submit` from host b with a working directory: its entrypoint
    # runs on the head's host, its task on host a imports the directory's module.
    work = tmp_path / "work"
    work.mkdir()
    (work / "helper.py").write_text("def triple(x):\n    return 3 * x\n")
    (work / "main.py").write_text(textwrap.dedent("""
        import os
        import rayx
        rayx.init()

        @rayx.remote(resources={"host_a": 1})
        def apply(x):
            import helper
            return os.environ["RAYX_NODE_IP"], helper.triple(x)

        print("ENTRYPOINT", os.environ.get("RAYX_NODE_IP"), "TASK", *rayx.get(apply.remote(14)))
    """))
    submitted = hosts.run("b", [CLI, "job", "submit", "--address", address, "--working-dir",
                                str(work), "--env", f"PYTHONPATH={os.environ['PYTHONPATH']}",
                                "--", sys.executable, "main.py"], env=env, timeout=180)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert (f"ENTRYPOINT {hosts.address('head')} TASK {hosts.address('a')} 42"
            in submitted.stdout), submitted.stdout

    # torch DDP over gloo on hosts a and b, launched from the head's host.
    (tmp_path / "ddp.py").write_text(textwrap.dedent(DDP))
    os.chmod(tmp_path, 0o755)
    launched = hosts.run("head", [CLI, "launch", "--address", address, "--nnodes", "2",
                                  "--nproc-per-node", "1", "--cpus-per-proc", "1", "--",
                                  sys.executable,
                                  str(tmp_path / "ddp.py")], env=env, timeout=180)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    reduced = [line for line in launched.stdout.splitlines() if "ALLREDUCE" in line]
    assert len(reduced) == 2, launched.stdout
    assert all(" 3 " in line for line in reduced), reduced  # 1 + 2 on both ranks
    master = reduced[0].split()[-1]
    assert master in {hosts.address(h) for h in HOSTS}, reduced  # never loopback

    # `rayx launch` from a machine that reaches the head and host a but not
    # host b: the ranks succeed, and launch says whose output it could not read.
    launched = hosts.run("client", [CLI, "launch", "--address", address, "--nnodes", "3",
                                    "--nproc-per-node", "1", "--master-port", "29400", "--",
                                    sys.executable, "-c",
                                    "import os; print('hello from rank', os.environ['RANK'])"],
                         env=env, timeout=180)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    hellos = [line for line in launched.stdout.splitlines() if "hello from rank" in line]
    assert len(hellos) == 2 and all(hosts.address("b") not in h for h in hellos), launched.stdout
    lost = [line for line in launched.stderr.splitlines() if "could not be read" in line]
    assert len(lost) == 1 and f"(node {hosts.address('b')})" in lost[0], launched.stderr
    assert "on " + hosts.address("b") in lost[0], lost[0]

    # A Train run driven from the head's host; the link of a host holding a
    # rank is cut mid-run: the head declares it dead and the run restarts on
    # the other hosts.
    gate = str(tmp_path / "gate")
    env_head = dict(env, RAYX_ADDRESS=address, RAYX_TEMP_DIR=hosts.temp["head"])
    trainer = subprocess.Popen(["ip", "netns", "exec", hosts.ns("head"), sys.executable, "-c",
                                TRAIN, gate], env=env_head, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        ranks = wait_until(lambda: [open(f"{gate}.rank{r}").read() for r in (0, 1)
                                    if os.path.exists(f"{gate}.rank{r}")] or None
                           if trainer.poll() is None else ["ended"], 120,
                           "the first epoch's report")
        assert trainer.poll() is None, trainer.communicate()
        victim = next(h for h in ("a", "b") if hosts.address(h) in ranks)
        hosts.cut(victim)
        open(gate + ".cut", "w").close()
        out, err = trainer.communicate(timeout=180)
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()
    assert trainer.returncode == 0, out + err
    trained = next((line.split() for line in out.splitlines() if line.startswith("TRAINED")),
                   None)
    assert trained, out + err
    restarts, node, world, after_cut = trained[1:]
    assert (restarts, world, after_cut) == ("1", "2", "True"), trained
    assert node != hosts.address(victim), trained
    survivor = "b" if victim == "a" else "a"
    wait_until(lambda: nodes()[1] == {hosts.address(victim)}, 30,
               "the head to declare the cut host dead")
    assert nodes()[0] == {hosts.address("head"), hosts.address(survivor)}

    hosts.close()
    wait_until(lambda: not cluster_processes(address), 30,
               "every process of the cluster (workers too) to exit")
