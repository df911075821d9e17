#!/usr/bin/env python3
"""Python microbenchmark with Ray's metric names, for Ray and for rayx's Python API:
the same program runs on both (rayx is imported as `ray`), back to back.

    python3 -m venv --system-site-packages .venv-ray && .venv-ray/bin/pip install ray grpcio
    .venv-ray/bin/python bench/ray_compare.py [--runs 5] [--num-cpus 2]        # Ray
    PYTHONPATH=build/python /usr/bin/python3 bench/ray_compare.py --backend rayx  # rayx

Each metric is the median (with min and max) over --runs runs of about --duration seconds;
`import_seconds` is the median of --runs fresh interpreters importing the package. The C++
API's figures come from `rayx microbenchmark` (same metric names).
"""
import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

BACKEND = "rayx" if "--backend" in sys.argv and sys.argv[sys.argv.index("--backend") + 1] == "rayx" \
    else "ray"
if BACKEND == "rayx":
    import rayx as ray
else:
    import ray


@ray.remote
def square(x):
    return x * x


@ray.remote
class Counter:
    def __init__(self):
        self.total = 0

    def add(self, x):
        self.total += x
        return self.total


def rate(fn, duration):
    """Calls fn() (which does `n` operations and returns n) until `duration` passes."""
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < duration:
        done += fn()
    return done / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--only", default="", help="run only metrics whose name contains this")
    parser.add_argument("--backend", choices=["ray", "rayx"], default="ray")
    args = parser.parse_args()
    imports = []
    for _ in range(args.runs):
        code = f"import time; t = time.perf_counter(); import {BACKEND}; print(time.perf_counter() - t)"
        imports.append(float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                            text=True, check=True).stdout))
    if BACKEND == "rayx":
        ray.init(num_cpus=args.num_cpus)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)

    def tasks_sync():
        assert ray.get(square.remote(3)) == 9
        return 1

    def tasks_async():
        refs = [square.remote(i) for i in range(1000)]
        assert ray.get(refs)[-1] == 999 * 999
        return 1000

    counter = Counter.remote()
    ray.get(counter.add.remote(0))

    def actor_sync():
        ray.get(counter.add.remote(1))
        return 1

    def actor_async():
        ray.get([counter.add.remote(1) for _ in range(1000)])
        return 1000

    small = ray.put(1)

    def put_calls():
        for _ in range(1000):
            ray.put(1)
        return 1000

    def get_calls():
        for _ in range(1000):
            ray.get(small)
        return 1000

    big = np.zeros(100 * 1024 * 1024, dtype=np.uint8)

    def put_gigabytes():
        ray.put(big)
        return big.nbytes / 1e9

    placement_group = ray.util.placement_group  # the same names in Ray and rayx
    remove_placement_group = ray.util.remove_placement_group

    def pg_create_removal():
        # As rayx's: 100 groups of one small bundle, created, waited for, removed.
        groups = [placement_group([{"CPU": 0.01}], strategy="PACK") for _ in range(100)]
        ray.get([g.ready() for g in groups])
        for g in groups:
            remove_placement_group(g)
        return 100

    @ray.remote(num_cpus=0)
    class Small:
        def ping(self):
            return 1

    def actor_creation():
        # As rayx's: 16 actors created and answering their first call, then killed.
        actors = [Small.remote() for _ in range(16)]
        assert sum(ray.get([a.ping.remote() for a in actors])) == 16
        for a in actors:
            ray.kill(a)
        return 16

    metrics = {
        "single_client_tasks_sync": tasks_sync,
        "single_client_tasks_async": tasks_async,
        "1_1_actor_calls_sync": actor_sync,
        "1_1_actor_calls_async": actor_async,
        "single_client_put_calls": put_calls,
        "single_client_get_calls": get_calls,
        "single_client_put_gigabytes": put_gigabytes,
        "placement_group_create/removal": pg_create_removal,
        "actor_creation": actor_creation,
    }
    print(f"{BACKEND} {ray.__version__}, {args.num_cpus} CPUs, {args.runs} runs of ~{args.duration}s")
    print(f"{'metric':32} {'median':>12} {'min':>12} {'max':>12}")
    print(f"{'import_seconds':32} {statistics.median(imports):12.4f} {min(imports):12.4f} "
          f"{max(imports):12.4f}")
    for name, fn in metrics.items():
        if args.only not in name:
            continue
        fn()  # warm up
        rates = [rate(fn, args.duration) for _ in range(args.runs)]
        print(f"{name:32} {statistics.median(rates):12.1f} {min(rates):12.1f} {max(rates):12.1f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
