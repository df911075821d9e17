#!/usr/bin/env bash
# Installs dependencies, builds (the developers' build: warnings are errors) and
# runs every test (unit and integration, C++ and Python); then runs every fuzz
# target for a few seconds from its seed corpus (scripts/fuzz.sh; FUZZ_SECONDS
# sets the time, 0 skips; built at -O0, FUZZ_OPT, for a short build).
#
# The users' Release build (pip install ., scripts/demo.sh) compiles the same
# sources with the same compiler and without -Werror, so this build passing
# proves it compiles; it is not built a second time here, to keep CI short.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh

# The fuzz targets build while the tests run, at the lowest CPU priority: the
# integration tests mostly wait on their clusters (the CPUs are idle four
# fifths of the time), and nice 19 leaves the tests' processes the CPUs when
# they want them. Its output goes to build-fuzz/build.log; it is stopped (its own
# process group, by the pid recorded here) if this script ends first.
fuzz_seconds="${FUZZ_SECONDS:-5}"
export FUZZ_OPT="${FUZZ_OPT:--O0}"
fuzz_build=""
stop_fuzz_build() {
  if [ -n "$fuzz_build" ]; then kill -- "-$fuzz_build" 2>/dev/null || true; fi
}
trap stop_fuzz_build EXIT
if [ "$fuzz_seconds" != 0 ]; then
  mkdir -p build-fuzz
  setsid nice -n 19 ./scripts/fuzz.sh --build-only > build-fuzz/build.log 2>&1 &
  fuzz_build=$!
fi

(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 300)

if [ "$fuzz_seconds" != 0 ]; then
  if ! wait "$fuzz_build"; then
    fuzz_build=""
    echo "test.sh: the fuzz build failed; the end of build-fuzz/build.log:"
    tail -n 40 build-fuzz/build.log
    exit 1
  fi
  fuzz_build=""
  FUZZ_SECONDS="$fuzz_seconds" ./scripts/fuzz.sh
fi
