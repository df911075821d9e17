#!/usr/bin/env python3
"""torch.distributed (gloo) allreduce: 4-byte latency and 64 MiB bandwidth.

Measures what bench/collective_benchmark.cc measures for rayx, the same way:
N rank processes on loopback; the median of many 4-byte float32 allreduces
in microseconds, and the median algorithm bandwidth (bytes / time) of 64 MiB
float32 allreduces in GB/s, both timed on rank 0. Prints the same table rows.

Usage: python3 bench/torch_allreduce.py [ranks ...] [--small N] [--big N]
(default ranks: 2 4). Spawns the ranks itself (env:// rendezvous), no torchrun.
"""
import argparse
import multiprocessing as mp
import os
import socket
import time


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _median(values):
    """The upper median, as collective_benchmark.cc takes it."""
    return sorted(values)[len(values) // 2]


def _rank_main(rank, world, port, small, big, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      RANK=str(rank), WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")

    def run(tensor, iterations):
        seconds = []
        dist.barrier()
        for _ in range(iterations):
            start = time.perf_counter()
            dist.all_reduce(tensor)
            seconds.append(time.perf_counter() - start)
        return seconds

    one = torch.ones(1, dtype=torch.float32)
    run(one, 100)  # warm up
    latency_us = _median(run(one, small)) * 1e6
    nbytes = 64 * 1024 * 1024
    big_tensor = torch.ones(nbytes // 4, dtype=torch.float32)
    run(big_tensor, 1)  # warm up
    gbps = nbytes / _median(run(big_tensor, big)) / 1e9
    if rank == 0:
        queue.put((latency_us, gbps))
    dist.destroy_process_group()


def measure(world, small, big):
    """Returns (4 B latency in us, 64 MiB GB/s) for `world` rank processes."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, small, big, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    result = None
    while result is None:
        try:
            result = queue.get(timeout=1)
        except Exception:  # queue.Empty: fail fast when a rank died
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise SystemExit("a torch rank failed")
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"torch rank exited with {p.exitcode}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ranks", nargs="*", type=int, default=[2, 4])
    parser.add_argument("--small", type=int, default=2000, help="4 B iterations")
    parser.add_argument("--big", type=int, default=10, help="64 MiB iterations")
    args = parser.parse_args()
    print(f"{'metric':<28} {'ranks':>6} {'value':>12}", flush=True)
    for n in args.ranks:
        latency_us, gbps = measure(n, args.small, args.big)
        print(f"{'allreduce_4B_latency_us':<28} {n:>6} {latency_us:>12.1f}")
        print(f"{'allreduce_64MiB_GBps':<28} {n:>6} {gbps:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
