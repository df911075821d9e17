#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds tests/package against it
# with find_package(rayx), starts a cluster with the installed CLI and has the
# consumer query it.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cleanup() {
  "$work/prefix/bin/rayx" stop --temp-dir "$work/tmp" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer" | grep -q "rayx "
out=$("$work/prefix/bin/rayx" start --head --port 0 --node-ip-address 127.0.0.1 --num-cpus 1 \
      --temp-dir "$work/tmp")
join=$(echo "$out" | grep -- "rayx start --address")
address=$(echo "$join" | awk '{print $4}')
token=$(echo "$join" | awk '{print $6}')
result=$("$work/build/consumer" "$address" "$token")
echo "$result"
echo "$result" | grep -q "alive nodes: 1"
"$work/prefix/bin/rayx" stop --temp-dir "$work/tmp"
echo "package test passed"
