"""A node's object store has a capacity (`rayx start --object-store-memory`):
Python Puts and task results past it are spilled to the node's disk and read
back intact, except objects a process is reading; past the spill limit ray.put
raises ObjectStoreFullError with the figures, and what was stored before is
still there."""

import os
import subprocess
import sys

from conftest import CLI, own_cluster, wait_until

MIB = 1 << 20

DRIVER = r'''
import hashlib, os, subprocess, sys
import numpy as np
import rayx as ray
from rayx.exceptions import ObjectStoreFullError

ray.init()
MIB = 1 << 20

def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()

def spilled(ref):
    end = "-" + ref.hex()
    return any(f.endswith(end) for root, _, files in os.walk(os.environ["RAYX_TEMP_DIR"])
               if os.path.basename(root).startswith("rayx-spill-") for f in files)

# The oldest object, read in place by the driver while 8 more are put.
held_ref = ray.put(np.arange(2 * MIB, dtype=np.int64))
held = ray.get(held_ref)

# 8 x 16 MiB into a 64 MiB store.
refs, digests = [], []
for i in range(8):
    a = np.arange(2 * MIB, dtype=np.int64) * (i + 3)
    digests.append(digest(a))
    refs.append(ray.put(a))
    del a
# Spilling passed over the object the driver reads (spilling it would free
# nothing), and takes it once the driver lets go.
assert not spilled(held_ref), "an object the driver was reading was spilled"
assert sum(spilled(r) for r in refs) >= 4, [spilled(r) for r in refs]
assert (held == np.arange(2 * MIB, dtype=np.int64)).all()
del held
refs_after = [ray.put(np.zeros(2 * MIB, dtype=np.int64))]
assert spilled(held_ref), "an object nobody reads any more stayed in memory"
assert (ray.get(held_ref) == np.arange(2 * MIB, dtype=np.int64)).all()
print("HELD NOT SPILLED", flush=True)

@ray.remote(resources={"far": 1})
def make(i):
    return np.full(2 * MIB, i, dtype=np.int64)  # 16 MiB, stored on the far node

results = [make.remote(i) for i in range(6)]
for r, d in zip(refs, digests):
    assert digest(ray.get(r)) == d
for i, r in enumerate(results):
    v = ray.get(r)
    assert v.shape == (2 * MIB,) and (v == i).all(), i
print("READ BACK", flush=True)
listed = subprocess.run([sys.argv[1], "list", "objects"], capture_output=True, text=True)
print("LISTED", listed.stdout.replace("\n", " | "), flush=True)

# The spill limit (128 MiB) is reached: a Put fails, and says why.
try:
    for i in range(32):
        refs.append(ray.put(np.full(2 * MIB, i, dtype=np.int64)))
    print("NEVER FULL", flush=True)
except ObjectStoreFullError as e:
    print("FULL", str(e).replace("\n", " "), flush=True)
for r, d in zip(refs[:8], digests):
    assert digest(ray.get(r)) == d
print("INTACT", flush=True)
'''


def test_a_full_store_spills_to_disk_and_a_full_spill_refuses_with_the_figures(tmp_path):
    args = ("--object-store-memory", str(64 * MIB), "--object-spill-limit", str(128 * MIB))
    with own_cluster(tmp_path, head_cpus=1, far_ip="127.0.0.8", node_args=args) as cluster:
        env = dict(cluster.env, RAYX_TEMP_DIR=cluster.temp_dir)
        r = subprocess.run([sys.executable, "-c", DRIVER, CLI], capture_output=True,
                           text=True, timeout=180, env=env)
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert "HELD NOT SPILLED" in out and "READ BACK" in out and "INTACT" in out, out
        listed = next(line for line in out.splitlines() if line.startswith("LISTED"))
        # Both nodes show their 64 MiB capacity and what they spilled.
        assert listed.count("64.00 MiB") >= 2, listed
        assert "SPILLED" in listed, listed
        full = next((line for line in out.splitlines() if line.startswith("FULL")), "")
        assert full, out
        assert "no room for 16.00 MiB" in full, full
        assert "of its limit 128.00 MiB (--object-spill-limit)" in full, full
        assert "--object-store-memory" in full, full
        # Nothing spilled outlives the driver's job on either node's disk.
        spill_dirs = [os.path.join(root, d) for root, dirs, _ in os.walk(cluster.temp_dir)
                      for d in dirs if d.startswith("rayx-spill-")]
        assert len(spill_dirs) == 2, spill_dirs
        wait_until(lambda: all(not os.listdir(d) for d in spill_dirs), 15,
                   "the job's spilled objects to be removed when it ended")
