#!/usr/bin/env python3
"""What authentication and encryption cost: the microbenchmark's call, transfer
and allreduce metrics on a cluster whose data sockets are authenticated (PLAIN,
the default) and on one that encrypts them (CURVE, `rayx start --head
--encrypt`), alternating A, B, A, B in one run, plus sync actor calls during a
flood of connections with a wrong credential.

    python3 bench/security_overhead.py --bin build/bin [--rounds 2] [--runs 5]
        [--before-bin DIR]

With --before-bin (the bin folder of a build from before authentication, e.g.
a worktree of the commit before it), a third cluster of that build runs in
each round too ("before": no authentication, token in message bodies), for the
metrics that build has.

Each cluster has two nodes on loopback (127.0.0.1, and 127.0.0.2 offering the
`bench_remote` resource, so a 100 MiB transfer crosses an object server). The
table gives medians over all rounds and the ratio encrypted / authenticated.
Clusters are started in a private temp dir and stopped with `rayx stop`.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

METRICS = ["1_1_actor_calls_sync", "1_1_actor_calls_async", "single_client_tasks_sync",
           "single_client_tasks_async", "transfer_100MiB_remote_GBps",
           "allreduce_64MiB_GBps_2ranks", "actor_calls_sync_auth_flood"]


def run(cmd, env=None, timeout=900):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def start_cluster(rayx, temp_dir, mode):
    head = [rayx, "start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1",
            "--num-cpus", "4", "--temp-dir", temp_dir]
    if mode == "encrypted":
        head.append("--encrypt")
    out = run(head)
    address = re.search(r"rayx start --address (\S+)", out).group(1)
    if mode == "before":  # that build printed the token in its join line
        token = re.search(r"--token (\S+)", out).group(1)
    else:
        token_file = re.search(r"copy the token file (\S+) ", out).group(1)
        token = open(token_file).read().strip()
    env = {**os.environ, "RAYX_TOKEN": token}
    worker = [rayx, "start", "--address", address, "--node-ip-address", "127.0.0.2",
              "--num-cpus", "2", "--resources", '{"bench_remote": 1}', "--temp-dir", temp_dir]
    if mode == "before":
        worker += ["--token", token]
    run(worker, env=env)
    return address, env


def medians(output):
    """metric -> (median, baseline median or None) from the microbenchmark's log."""
    found = {}
    for line in output.splitlines():
        m = re.match(r"\s+running (\S+)\s+.*median ([\d.,]+)", line)
        if m:
            found[m.group(1)] = [float(m.group(2).replace(",", "")), None]
    runs = re.search(r"per-run values.*", output, re.S)
    return found, output


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin", help="the folder with rayx and rayx-microbenchmark")
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds (default 2)")
    ap.add_argument("--runs", type=int, default=5, help="runs per metric per round (default 5)")
    ap.add_argument("--duration-ms", type=int, default=1000)
    ap.add_argument("--before-bin", help="bin folder of a build from before authentication")
    args = ap.parse_args()
    modes = ["authenticated", "encrypted"] + (["before"] if args.before_bin else [])
    results = {m: {} for m in modes}
    baselines = {m: {} for m in modes}
    for round_no in range(args.rounds):
        for mode in modes:
            folder = args.before_bin if mode == "before" else args.bin
            rayx = os.path.join(folder, "rayx")
            bench = os.path.join(folder, "rayx-microbenchmark")
            temp_dir = tempfile.mkdtemp(prefix="rayx-secbench-")
            try:
                address, env = start_cluster(rayx, temp_dir, mode)
                for metric in METRICS:
                    try:
                        out = run([bench, "--address", address, "--only", metric, "--runs",
                                   str(args.runs), "--duration-ms", str(args.duration_ms)],
                                  env=env)
                    except RuntimeError:
                        if mode == "before":  # a metric that build does not have
                            continue
                        raise
                    per_run = re.search(
                        r"^\s+" + re.escape(metric) + r"\s+(.+)$", out.split("per-run values")[-1],
                        re.M)
                    if per_run is None:  # a metric that build does not have
                        continue
                    values = [float(v.replace(",", "")) for v in per_run.group(1).split()]
                    results[mode].setdefault(metric, []).extend(values)
                    base = re.search(re.escape(metric) + r".*?no flood ([\d.,]+)", out)
                    if base:
                        baselines[mode].setdefault(metric, []).append(
                            float(base.group(1).replace(",", "")))
                    print(f"round {round_no + 1} {mode:13s} {metric:32s} "
                          f"median {statistics.median(values):,.3f}", flush=True)
            finally:
                subprocess.run([rayx, "stop", "--temp-dir", temp_dir], capture_output=True)
    before = "before" in modes
    print("\n| metric | " + ("before (median) | " if before else "") +
          "authenticated (median) | encrypted (median) | " +
          ("authenticated / before | " if before else "") + "encrypted / authenticated |")
    print("|---|---|---|---|" + ("---|---|" if before else ""))
    for metric in METRICS:
        a = statistics.median(results["authenticated"][metric])
        e = statistics.median(results["encrypted"][metric])
        if before:
            b = results["before"].get(metric)
            bm = statistics.median(b) if b else None
            print(f"| {metric} | " + (f"{bm:,.3f}" if bm else "-") + f" | {a:,.3f} | {e:,.3f} | " +
                  (f"{a / bm:.2f}x" if bm else "-") + f" | {e / a:.2f}x |")
        else:
            print(f"| {metric} | {a:,.3f} | {e:,.3f} | {e / a:.2f}x |")
    for mode in ("authenticated", "encrypted"):
        flood = "actor_calls_sync_auth_flood"
        if baselines[mode].get(flood):
            with_flood = statistics.median(results[mode][flood])
            without = statistics.median(baselines[mode][flood])
            print(f"\nsync actor calls during a bad-credential flood ({mode}): "
                  f"{with_flood:,.0f}/s vs {without:,.0f}/s without: "
                  f"{with_flood / without:.2f}x (target >= 0.90)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
