#!/usr/bin/env bash
# Installs dependencies, builds, and runs the demo: a local cluster of a head and
# two node agents (one with 2 fake GPUs), shown by `rayx status`; the quickstart
# job (tasks, an actor, objects) runs on it, a torchrun-style command runs with
# `rayx launch`, the quickstart runs again as a submitted job; a data-parallel
# training run and a persistent inference group used by two jobs; a node is killed
# and detected dead; everything is stopped with `rayx stop`; last, a SLURM- or
# Kubernetes-style job: `rayx start --from-env` on three "nodes" at once.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh >/dev/null
rayx=./build/bin/rayx
tmp=$(mktemp -d)
cleanup() {
  for dir in "$tmp" "$tmp"/node*; do
    if [ -d "$dir" ]; then "$rayx" stop --temp-dir "$dir" >/dev/null 2>&1 || true; fi
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "rayx start --head (port 0 picks a free one; the demo keeps its own temp dir)"
out=$("$rayx" start --head --port 0 --node-ip-address 127.0.0.1 --num-cpus 2 \
      --resources '{"tpu": 4}' --temp-dir "$tmp")
echo "$out"
# The join line names TOKEN_FILE: a copy of the head's token file on the other
# machine. Here the other "machines" are this one, so the head's own file serves.
token_file=$(echo "$out" | sed -n 's/.*copy the token file \([^ ]*\) to it.*/\1/p')
join=$(echo "$out" | grep -- "rayx start --address" | sed 's/^ *//; s#TOKEN_FILE#'"$token_file"'#')

step "two more nodes join, as on two other machines"
"$rayx" ${join#rayx } --num-cpus 3 --num-gpus 2 --labels accelerator=H100 --temp-dir "$tmp" | head -1
"$rayx" ${join#rayx } --num-cpus 4 --temp-dir "$tmp" | head -1

step "rayx status"
"$rayx" status --temp-dir "$tmp"

step "a real job: examples/quickstart runs tasks and an actor on the cluster"
RAYX_TEMP_DIR="$tmp" ./build/bin/rayx-quickstart
echo "(the job's workers are gone and its resources free again:)"
"$rayx" status --temp-dir "$tmp" | sed -n '/Total Usage/,/tpu/p'

step "rayx launch: a torchrun-style command as 3 nodes x 1 process, with torchrun's environment"
"$rayx" launch --temp-dir "$tmp" --nnodes 3 --nproc-per-node 1 -- \
  sh -c 'echo "RANK=$RANK WORLD_SIZE=$WORLD_SIZE NODE_RANK=$NODE_RANK MASTER=$MASTER_ADDR:$MASTER_PORT"'

step "rayx job submit: the quickstart as a job the cluster runs and keeps"
jobdir="$tmp/quickstart-job"
mkdir -p "$jobdir/bin" "$jobdir/lib"
cp ./build/bin/rayx-quickstart "$jobdir/bin/"
cp -L ./build/lib/librayx.so.0 "$jobdir/lib/"
"$rayx" job submit --temp-dir "$tmp" --working-dir "$jobdir" --submission-id demo -- ./bin/rayx-quickstart
"$rayx" job list --temp-dir "$tmp"

step "Train: data-parallel training on 3 ranks over the nodes, checkpoints kept by the cluster"
RAYX_TEMP_DIR="$tmp" ./build/bin/rayx-train-linear --workers 3 --epochs 8

step "A persistent inference group: job 1 loads the model, job 2 finds it loaded"
RAYX_TEMP_DIR="$tmp" ./build/bin/rayx-inference-group
RAYX_TEMP_DIR="$tmp" ./build/bin/rayx-inference-group
RAYX_TEMP_DIR="$tmp" ./build/bin/rayx-inference-group --kill

step "Python: tasks, an actor and a zero-copy numpy object, submitted as a job"
"$rayx" job submit --temp-dir "$tmp" --working-dir ./examples/python --env PYTHONPATH="$PWD/build/python" -- /usr/bin/python3 quickstart.py

step "SIGKILL one node agent: the head declares it dead within 2 s"
victim=$(cat "$(ls -d "$tmp"/session_* | sort | tail -1)/pids/agent.pid" | cut -d' ' -f1)
kill -9 "$victim"
for _ in $(seq 1 40); do
  if "$rayx" status --temp-dir "$tmp" | grep -q "no heartbeat"; then break; fi
  sleep 0.1
done
"$rayx" status --temp-dir "$tmp" | sed -n '/Node status/,/^Resources/p'

step "rayx stop: stops exactly the processes rayx recorded"
"$rayx" stop --temp-dir "$tmp"

step "A SLURM/Kubernetes-style job: the same command on 3 nodes, node 0 runs it, all exit"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
platform=(env RAYX_TOKEN="demo-$port" WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port")
job=("$rayx" launch --nnodes 3 -- sh -c 'echo "rank $RANK of $WORLD_SIZE on node $RAYX_NODE_IP"')
for rank in 1 2; do
  "${platform[@]}" RANK=$rank "$rayx" start --from-env --num-cpus 1 --temp-dir "$tmp/node$rank" \
    --node-ip-address "127.0.0.$((rank + 1))" -- "${job[@]}" >"$tmp/node$rank.log" 2>&1 &
done
"${platform[@]}" RANK=0 "$rayx" start --from-env --num-cpus 1 --temp-dir "$tmp/node0" \
  --node-ip-address 127.0.0.1 -- "${job[@]}" |
  grep -v '^$' | grep -v '^Logs:'
wait
echo "(nodes 1 and 2 exited too: $(tail -1 "$tmp/node1.log"))"
echo
echo "Demo finished."
