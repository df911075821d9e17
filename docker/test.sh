#!/usr/bin/env bash
# Builds the image and uses it as docker/README.md says, on this machine's
# loopback addresses (host network): a head and a node container, `rayx status`,
# a `rayx launch` across both, Python tasks spread over both, `docker stop`; then
# a platform-style job: two containers running `rayx start --from-env` with
# RANK/WORLD_SIZE/MASTER_ADDR, node 0 running real torch DDP through
# `rayx launch`, both exiting 0. Needs a running Docker engine; the image build
# takes a while, so this is not part of scripts/test.sh.
#
#   ./docker/test.sh            # RAYX_IMAGE=name to test an image built already
set -euo pipefail
cd "$(dirname "$0")/.."

image=${RAYX_IMAGE:-}
if [ -z "$image" ]; then
  image=rayx-test
  docker build --network host -f docker/Dockerfile -t "$image" .
fi
names=(rayx-test-head rayx-test-node rayx-test-p0 rayx-test-p1)
cleanup() { docker rm -f "${names[@]}" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup

fail() { echo "docker/test.sh: FAILED: $*" >&2; exit 1; }
expect() {  # expect WHAT TEXT NEEDLE
  grep -qF -- "$3" <<<"$2" || fail "$1: '$3' not in:"$'\n'"$2"
  echo "ok: $1"
}
token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
port=${RAYX_TEST_PORT:-6391}

# A head and a node, as on two machines.
docker run -d --name rayx-test-head --network host -e RAYX_TOKEN="$token" "$image" \
  start --head --block --port "$port" --node-ip-address 127.0.0.1 --num-cpus 2 >/dev/null
docker run -d --name rayx-test-node --network host -e RAYX_TOKEN="$token" "$image" \
  start --address "127.0.0.1:$port" --block --node-ip-address 127.0.0.2 --num-cpus 2 >/dev/null
status=""
for _ in $(seq 150); do
  status=$(docker exec rayx-test-head rayx status 2>&1 || true)
  grep -q "127.0.0.2" <<<"$status" && break
  sleep 0.2
done
expect "rayx status lists the node container" "$status" "127.0.0.2"

out=$(docker exec rayx-test-head rayx launch --nnodes 2 -- sh -c 'echo rank=$RANK node=$RAYX_NODE_IP')
expect "launch rank on the head container" "$out" "node=127.0.0.1"
expect "launch rank on the node container" "$out" "node=127.0.0.2"

out=$(docker exec rayx-test-head python3 -c '
import os, time, rayx
rayx.init()
@rayx.remote
def where(x):
    time.sleep(0.5)
    return x * x, os.environ["RAYX_NODE_IP"]
print(sorted(rayx.get([where.options(scheduling_strategy="SPREAD").remote(i) for i in range(4)])))
')
expect "Python tasks on the node container" "$out" "127.0.0.2"
expect "Python task results" "$out" "(9, "

docker stop rayx-test-node rayx-test-head >/dev/null
codes=$(docker inspect -f '{{.State.ExitCode}}' rayx-test-node rayx-test-head | tr '\n' ' ')
expect "docker stop ends both containers cleanly" "$codes" "0 0 "

# The platform's way: the same command in every container, RANK etc. set per node.
env=(-e RAYX_TOKEN="$token" -e WORLD_SIZE=2 -e MASTER_ADDR=127.0.0.1 -e MASTER_PORT="$((port + 1))"
     -v "$PWD/tests/integration/launch:/scripts:ro")
cmd=(rayx launch --nnodes 2 --nproc-per-node 2 --cpus-per-proc 0.5 -- python3 /scripts/ddp_train.py)
docker run -d --name rayx-test-p1 --network host "${env[@]}" -e RANK=1 "$image" \
  start --from-env --num-cpus 1 --node-ip-address 127.0.0.3 -- "${cmd[@]}" >/dev/null
docker run -d --name rayx-test-p0 --network host "${env[@]}" -e RANK=0 "$image" \
  start --from-env --num-cpus 1 --node-ip-address 127.0.0.1 -- "${cmd[@]}" >/dev/null
codes=$(timeout 300 docker wait rayx-test-p0 rayx-test-p1 | tr '\n' ' ')
logs=$(docker logs rayx-test-p0 2>&1)
expect "both platform containers exit 0" "$codes" "0 0 "
expect "DDP allreduce over 4 ranks in 2 containers" "$logs" "allreduce rank=3 sum=10"
expect "DDP ranks agree on the weights" "$logs" "same_weights=True"
expect "node 0 stopped the cluster" "$logs" "stopped the cluster: every node agent left"
echo "docker/test.sh: all checks passed"
