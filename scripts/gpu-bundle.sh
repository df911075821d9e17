#!/usr/bin/env bash
# Packs what the GPU check (scripts/gpu-check.sh) needs on a GPU machine that has
# CUDA, NCCL, Python and PyTorch but none of rayx's Debian libraries, into ./.gpu
# (ignored by git; about 20 MB):
#   .gpu/bin      the CLI, daemons, benchmark, examples and GPU tests of ./build, stripped
#   .gpu/lib      librayx and every library it and they need beyond glibc, libstdc++,
#                 CUDA and NCCL (libzmq, libgloo, ...), each with RUNPATH $ORIGIN
#   .gpu/include  the dependency headers the Python extension includes (msgpack, zmq,
#                 boost, ...), so gpu-check.sh can build it for that machine's Python
#   .gpu/ext.flags the extension's compile definitions
# Run it after ./scripts/build.sh; then hand .gpu to the GPU machine with the
# working tree and run scripts/gpu-check.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/bin/rayx ] || { echo "gpu-bundle: build first (./scripts/build.sh)" >&2; exit 1; }
if ! command -v patchelf >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get install -y patchelf >/dev/null ||
    { $sudo apt-get update >/dev/null && $sudo apt-get install -y patchelf >/dev/null; }
fi
out=.gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/include"

bins=(build/bin/rayx build/bin/rayx-head build/bin/rayx-agent build/bin/rayx-microbenchmark
      build/bin/rayx-train-linear build/tests/collective_nccl_test build/tests/node_resources_test)
for b in "${bins[@]}"; do
  strip --strip-debug -o "$out/bin/$(basename "$b")" "$b"
done
strip --strip-debug -o "$out/lib/librayx.so.0" build/lib/librayx.so.0

# The libraries they need, found here: all but the C/C++ runtime (the GPU
# machine's own, newer ones serve) and CUDA/NCCL (that machine's own match its
# driver; gpu-check.sh puts them on LD_LIBRARY_PATH).
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libnccl|librayx)\.'
ldd "$out"/bin/* "$out/lib/librayx.so.0" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  sort -u | while read -r name path; do
    if [[ ! "$name" =~ $skip ]]; then cp -L "$path" "$out/lib/$name"; fi
  done
for lib in "$out"/lib/*; do
  chmod u+w "$lib"
  patchelf --set-rpath '$ORIGIN' "$lib"
done

# The headers the extension's sources include, beyond the C/C++ runtime, Python
# and pybind11 (the GPU machine has its own): listed by the compiler itself.
ninja_line() { grep -A6 "^build python_bindings/CMakeFiles/rayx_core_module.dir/src/core_module.cc.o:" build/build.ninja | grep "^  $1 = " | sed "s/^  $1 = //"; }
defines=$(ninja_line DEFINES | sed 's/-Drayx_core_module_EXPORTS//')
echo "$defines" >"$out/ext.flags"
includes=$(ninja_line INCLUDES)
# shellcheck disable=SC2086
g++ -std=c++20 $defines $includes -isystem /usr/include/mit-krb5 -M python_bindings/src/*.cc |
  tr ' \\' '\n\n' | grep '^/usr/' | sort -u | while read -r header; do
    header=$(realpath -s "$header")
    case "$header" in
      /usr/include/c++/* | */python3.* | /usr/include/pybind11/* | /usr/lib/gcc/*) continue ;;
    esac
    owner=$(dpkg -S "$header" 2>/dev/null | cut -d: -f1 | head -1)
    case "$owner" in libc6-dev | linux-libc-dev | libstdc++*) continue ;; esac
    rel=${header#/usr/include/}
    [ "$rel" != "$header" ] || { echo "gpu-bundle: unexpected header $header" >&2; exit 1; }
    mkdir -p "$out/include/$(dirname "$rel")"
    cp "$header" "$out/include/$rel"
  done
du -sh "$out" "$out"/bin "$out"/lib "$out"/include
