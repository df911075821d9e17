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
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 300)
if [ "${FUZZ_SECONDS:-5}" != 0 ]; then
  FUZZ_SECONDS="${FUZZ_SECONDS:-5}" FUZZ_OPT="${FUZZ_OPT:--O0}" ./scripts/fuzz.sh
fi
