#!/usr/bin/env bash
# Installs every package rayx needs to build and test, from Debian's archive.
# Idempotent: packages already present are skipped, and apt is not touched when
# nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libzmq3-dev cppzmq-dev libsodium-dev libmsgpack-cxx-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev ccache
  libgloo-dev libsqlite3-dev                 # CPU collectives; the head's tables
  libxxhash-dev                              # checkpoint shards' hashes (XXH3)
  iproute2 procps
  python3 python3-torch python3-numpy  # real PyTorch for the rayx launch and Train tests
  python3-dev pybind11-dev python3-cloudpickle python3-pytest python3-venv  # the Python package
  prometheus chromium                  # the dashboard tests: a real scraper, a real browser
  python3-kubernetes python3-yaml      # examples/kubernetes checked against the API's models
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
