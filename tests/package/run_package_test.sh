#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds tests/package against it
# with find_package(rayx), and runs it twice: with no cluster at all (rayx::Init
# starts a private one) and on a three-node cluster started with the installed
# `rayx start`. Afterwards no rayx process may be left.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
rayx="$work/prefix/bin/rayx"
cleanup() {
  "$rayx" stop --temp-dir "$work/tmp" --force >/dev/null 2>&1 || true
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
token=$(echo "$join" | awk '{print $6}')
"$rayx" start --address "$address" --token "$token" --num-cpus 1 --temp-dir "$work/tmp" >/dev/null
"$rayx" start --address "$address" --token "$token" --num-cpus 1 --temp-dir "$work/tmp" >/dev/null
result=$(RAYX_ADDRESS="$address" RAYX_TOKEN="$token" "$work/build/consumer")
echo "$result"
echo "$result" | grep -q "agents [23]" || { echo "tasks did not spread over the nodes"; exit 1; }
"$rayx" stop --temp-dir "$work/tmp"
echo "package test passed"
