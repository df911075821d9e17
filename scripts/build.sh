#!/usr/bin/env bash
# Configures and builds rayx into ./build, the way its developers and CI build:
# -O2 with warnings as errors (RAYX_WERROR=ON), and without debug information,
# which costs a third of the compile time (a test file: 47 s with -g, 26 s
# without). RAYX_DEBUG_INFO=1 ./scripts/build.sh builds RelWithDebInfo (-O2 -g)
# for a debugger; switching reconfigures ./build and rebuilds it.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ "${RAYX_DEBUG_INFO:-0}" = 1 ]; then
  type=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  want="RelWithDebInfo"
else
  # No LTO either (pybind11 adds it to Release builds of the module; RelWithDebInfo has none).
  type=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
        -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF)
  want="Release"
fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" "${type[@]}" -DRAYX_WERROR=ON
elif ! grep -q '^RAYX_WERROR:BOOL=ON$' build/CMakeCache.txt ||
     ! grep -q "^CMAKE_BUILD_TYPE:STRING=$want\$" build/CMakeCache.txt; then
  cmake -S . -B build "${type[@]}" -DRAYX_WERROR=ON   # a build dir configured otherwise
fi
cmake --build build -j "$(nproc)"
