#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into ./build-fuzz, and runs each for a fixed time
# from its committed seed corpus. Fails on any crash, hang, leak or sanitizer
# report; the input that caused it is left in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh                 every target, FUZZ_SECONDS (default 20) each
#                                   (FUZZ_OPT=-O0: a quicker build, slower fuzzing)
#   scripts/fuzz.sh messages        only fuzz_messages
#   scripts/fuzz.sh --build-only    builds the targets and runs none
#   scripts/fuzz.sh --seeds         rewrites tests/fuzz/corpus/ with rayx's encoders
#
# New inputs the fuzzer finds go to build-fuzz/corpus/, never into the
# committed seeds; a crashing input belongs in tests/fuzz/corpus/<target>/
# once it is fixed (with a regression test in the unit tests).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-20}"

# clang 14 and its libFuzzer runtime, from Debian, when missing.
need=()
command -v clang++ >/dev/null || need+=(clang)
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
  need+=(libclang-rt-14-dev)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "fuzz: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# FUZZ_OPT: the targets' optimization. -O1 (the default) fuzzes fastest; CI's
# few seconds per target (scripts/test.sh) use -O0, which halves the build.
opt="${FUZZ_OPT:--O1}"
if [ ! -f build-fuzz/CMakeCache.txt ] || [ ! -f build-fuzz/fuzz_targets.txt ]; then
  cmake -S . -B build-fuzz "${generator[@]}" -DRAYX_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_COMPILER=clang++ "-DRAYX_FUZZ_OPT=$opt"
elif ! grep -q "^RAYX_FUZZ_OPT:STRING=$opt\$" build-fuzz/CMakeCache.txt; then
  cmake -S . -B build-fuzz "-DRAYX_FUZZ_OPT=$opt"
fi
start=$SECONDS

if [ "${1:-}" = "--seeds" ]; then
  cmake --build build-fuzz -j "$(nproc)" --target rayx_fuzz_seeds
  ./build-fuzz/tests/fuzz/rayx_fuzz_seeds tests/fuzz/corpus
  exit 0
fi
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
# Every target CMake could build (fuzz_python_values needs python3-dev and
# pybind11-dev), or those named.
mapfile -t targets < build-fuzz/fuzz_targets.txt
if [ $# -gt 0 ]; then targets=("$@"); fi

build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build build-fuzz -j "$(nproc)" --target "${build_targets[@]}"
echo "fuzz: built in $((SECONDS - start)) s"
if [ "$build_only" = 1 ]; then exit 0; fi

mkdir -p build-fuzz/artifacts
failed=()
for t in "${targets[@]}"; do
  work="build-fuzz/corpus/$t"
  mkdir -p "$work"
  log="build-fuzz/fuzz_$t.log"
  echo "fuzz: $t for ${seconds} s"
  # -malloc_limit_mb: one allocation over 256 MiB from inputs of at most 64 KiB
  # is a bound that does not hold. -timeout: one input over 10 s is a hang.
  if ! ./build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$t-" "$work" "tests/fuzz/corpus/$t" \
      >"$log" 2>&1; then
    failed+=("$t")
    echo "fuzz: $t FAILED; the end of $log:"
    tail -n 40 "$log"
    continue
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$log" |
    sed "s/^/fuzz: $t /"
done
echo "fuzz: done in $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (inputs in build-fuzz/artifacts/)"
  exit 1
fi
