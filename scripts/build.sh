#!/usr/bin/env bash
# Configures and builds rayx into ./build (Release with debug info), the way its
# developers and CI build: warnings are errors (RAYX_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAYX_WERROR=ON
elif ! grep -q '^RAYX_WERROR:BOOL=ON$' build/CMakeCache.txt; then
  cmake -S . -B build -DRAYX_WERROR=ON   # a build dir configured without it
fi
cmake --build build -j "$(nproc)"
