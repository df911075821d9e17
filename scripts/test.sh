#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (unit and integration); then
# builds the library, daemons and CLI the way users do (Release, default flags, no
# -Werror) into ./build-release, so CI proves that build works too.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 300)

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B build-release "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DRAYX_BUILD_TESTS=OFF
cmake --build build-release -j "$(nproc)"
