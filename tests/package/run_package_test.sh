#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds tests/package against it
# with find_package(rayx), and runs it twice: with no cluster at all (rayx::Init
# starts a private one) and on a three-node cluster started with the installed
# `rayx start`; then its Train program on a two-node cluster (a killed rank, an
# elastic run that grows when two nodes join, a detached group across two
# jobs). Afterwards no rayx process may be left.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
rayx="$work/prefix/bin/rayx"
cleanup() {
  if [ -n "${elastic_pid:-}" ]; then kill "$elastic_pid" 2>/dev/null || true; fi
  "$rayx" stop --temp-dir "$work/tmp" --force >/dev/null 2>&1 || true
  "$rayx" stop --temp-dir "$work/train" --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null

echo "== no cluster: rayx::Init starts a private one"
RAYX_TEMP_DIR="$work/none" "$work/build/consumer"

echo "== a three-node cluster started with rayx start"
out=$("$rayx" start --head --port 0 --node-ip-address 127.0.0.1 --num-cpus 1 --temp-dir "$work/tmp")
join=$(echo "$out" | grep -- "rayx start --address")
address=$(echo "$join" | awk '{print $4}')
# The join line names a token file (the token never goes on a command line).
token_file=$(echo "$out" | grep -o '[^ ]*/token ' | head -n 1 | tr -d ' ')
token=$(cat "$token_file")
"$rayx" start --address "$address" --token-file "$token_file" --num-cpus 1 --temp-dir "$work/tmp" >/dev/null
RAYX_TOKEN="$token" "$rayx" start --address "$address" --num-cpus 1 --temp-dir "$work/tmp" >/dev/null
result=$(RAYX_ADDRESS="$address" RAYX_TOKEN="$token" "$work/build/consumer")
echo "$result"
echo "$result" | grep -q "agents 3" || { echo "SPREAD actors did not land on the three nodes"; exit 1; }
"$rayx" stop --temp-dir "$work/tmp"

echo "== Train on a two-node cluster: a killed rank, growth from 2 to 4 ranks, a detached group"
out=$("$rayx" start --head --port 0 --node-ip-address 127.0.0.1 --num-cpus 1 --temp-dir "$work/train")
join=$(echo "$out" | grep -- "rayx start --address")
export RAYX_ADDRESS=$(echo "$join" | awk '{print $4}')
RAYX_TOKEN=$(cat "$(echo "$out" | grep -o '[^ ]*/token ' | head -n 1 | tr -d ' ')")
export RAYX_TOKEN
"$rayx" start --address "$RAYX_ADDRESS" --num-cpus 1 --temp-dir "$work/train" >/dev/null
"$work/build/train_consumer" train
"$work/build/train_consumer" elastic "$work/elastic-started" &
elastic_pid=$!
# Two nodes join once the run trains on the two that fit (60 s at most).
for _ in $(seq 600); do
  [ -f "$work/elastic-started" ] && break
  kill -0 "$elastic_pid" 2>/dev/null || break
  sleep 0.1
done
[ -f "$work/elastic-started" ] || { echo "the elastic run never entered its loop"; exit 1; }
"$rayx" start --address "$RAYX_ADDRESS" --num-cpus 1 --temp-dir "$work/train" >/dev/null
"$rayx" start --address "$RAYX_ADDRESS" --num-cpus 1 --temp-dir "$work/train" >/dev/null
wait "$elastic_pid"
elastic_pid=
"$work/build/train_consumer" serve-create
"$work/build/train_consumer" serve-use
"$rayx" stop --temp-dir "$work/train"
echo "package test passed"
