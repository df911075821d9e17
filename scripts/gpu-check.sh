#!/usr/bin/env bash
# Runs every GPU path of rayx on a machine with NVIDIA GPUs, CUDA 13, NCCL,
# Python and PyTorch, from the bundle that scripts/gpu-bundle.sh packed into
# ./.gpu here (the GPU machine needs none of rayx's Debian libraries):
#   1. the NCCL backend's tests (collective_nccl_test: a one-rank group's
#      allreduce, broadcast, allgather and reduce-scatter, refused peers, abort,
#      a rank that never joins, the device a rank is told)
#   2. NVML detection and CUDA_VISIBLE_DEVICES (node_resources_test, and
#      tests/python/test_gpu.py on a real cluster), GPU actors, NCCL on CUDA
#      tensors, TorchTrainer with use_gpu, the C++ trainer with --use-gpu
#   3. `rayx microbenchmark --only nccl`: rayx's NCCL allreduce against raw NCCL
# It first builds the Python extension for that machine's Python (g++, its
# pybind11). Logs and a summary go to $OUT (default /tmp/rayx-gpu-check); it
# exits non-zero if any step failed. Everything ends within GPU_CHECK_SECONDS
# (default 420). $OUT holds at most 8 files (what the device tool brings back);
# a failed Python step's log ends with the tails of the test clusters' logs.
# A rerun on the same machine without carrying .gpu again keeps the extension
# built by the first run (rebuilt when its sources or librayx are newer), and
# GPU_CHECK_STEPS="python_gpu_tests nccl_microbenchmark" (say) runs only those.
#
#   ./scripts/build.sh && ./scripts/gpu-bundle.sh          # here
#   scripts/gpu-check.sh                                    # there, .gpu carried along
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${OUT:-/tmp/rayx-gpu-check}
mkdir -p "$out"
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-420}))
only=${GPU_CHECK_STEPS:-}
summary=$out/summary.txt
: >"$summary"
failed=0
py=${PYTHON:-python3}

note() { echo "$*" | tee -a "$summary"; }
# step NAME CAP_SECONDS COMMAND...: runs COMMAND with its output in $out/NAME.log,
# for at most CAP_SECONDS and never past the deadline.
step() {
  local name=$1 cap=$2
  shift 2
  if [ -n "$only" ] && [[ " $only " != *" $name "* ]]; then return; fi
  local left=$((deadline - SECONDS))
  if ((left < 20)); then
    note "SKIP $name: no time left"
    failed=1
    return
  fi
  ((cap < left)) || cap=$left
  local start=$SECONDS
  echo "== $name (at most ${cap}s)"
  timeout -k 5 "$cap" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  if ((rc == 0)); then
    note "PASS $name ($((SECONDS - start))s)"
  else
    note "FAIL $name: exit $rc$( ((rc == 124 || rc == 137)) && echo " (timed out after ${cap}s)") ($((SECONDS - start))s)"
    failed=1
  fi
}

[ -x .gpu/bin/rayx ] || { note "FAIL: .gpu is missing: run scripts/gpu-bundle.sh and carry .gpu"; exit 1; }
# Clusters the Python tests start (their daemons leave the process group) are
# stopped on the way out, by their recorded pids, whatever happened.
stop_test_clusters() {
  local d
  for d in /tmp/rayx-gpu-*/; do
    [ -d "$d" ] && .gpu/bin/rayx stop --grace-period 2 --temp-dir "$d" >/dev/null 2>&1
  done
}
trap stop_test_clusters EXIT

{
  date -u
  nvidia-smi -L || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  (nvcc --version | tail -n 2) 2>/dev/null || true
  "$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())' || true
  "$py" -c 'import os, sysconfig; h = os.path.join(sysconfig.get_paths()["include"], "Python.h"); print(h, "exists" if os.path.exists(h) else "MISSING")' || true
  "$py" -m pybind11 --version || echo "pybind11 MISSING"
  (${CXX:-g++} --version | head -n 1) || echo "g++ MISSING"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  ldconfig -p | grep -E 'libnvidia-ml|libcuda\.so|libnccl' || echo "ldconfig: no libnvidia-ml/libcuda/libnccl"
} 2>&1 | tee "$out/machine.txt"

# NCCL and the CUDA runtime: the ones pip installed beside torch (torch and
# librayx then share them in a process), else the system's.
find_lib() {
  local name=$1 dir site found
  site=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for dir in $site; do
    [ -d "$dir/nvidia" ] || continue
    found=$(find "$dir/nvidia" -name "$name" -printf '%h\n' 2>/dev/null | head -n 1)
    [ -n "$found" ] && { echo "$found"; return; }
  done
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/lib/x86_64-linux-gnu; do
    [ -e "$dir/$name" ] && { echo "$dir"; return; }
  done
}
nccl_dir=$(find_lib libnccl.so.2)
cudart_dir=$(find_lib libcudart.so.13)
note "libnccl.so.2 from ${nccl_dir:-nowhere}; libcudart.so.13 from ${cudart_dir:-nowhere}"
export LD_LIBRARY_PATH="${nccl_dir}:${cudart_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(ldd .gpu/bin/* .gpu/lib/*.so* 2>/dev/null | grep "not found" | sort -u)
if [ -n "$missing" ]; then
  note "FAIL: libraries not found: $missing"
  exit 1
fi

# The Python package for this machine's Python: the sources, and the extension
# compiled here against the bundle's librayx and headers.
pkg=.gpu/python/rayx
built=$(ls "$pkg"/_core*.so 2>/dev/null | head -n 1)
if [ -n "$built" ] && [ -n "$(find python_bindings/src .gpu/lib/librayx.so.0 .gpu/include -newer "$built" -print -quit)" ]; then
  built=""  # its sources or librayx changed since: build it again
fi
[ -n "$built" ] && cp "$built" .gpu/_core.keep
rm -rf .gpu/python
mkdir -p .gpu/python
cp -r python_bindings/rayx "$pkg"
[ -n "$built" ] && mv .gpu/_core.keep "$built"
build_extension() {
  local suffix flags objs=() pids=() src
  suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))') || return 1
  flags="-std=c++20 -O2 -DNDEBUG -fPIC -fvisibility=hidden $(cat .gpu/ext.flags) -Icore -Icore/include -isystem .gpu/include $("$py" -m pybind11 --includes)" || return 1
  mkdir -p .gpu/obj
  for src in python_bindings/src/*.cc; do
    objs+=(".gpu/obj/$(basename "$src" .cc).o")
    # shellcheck disable=SC2086
    ${CXX:-g++} $flags -c "$src" -o "${objs[-1]}" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || return 1; done
  # Linked under another name first: a link cut short never passes for built.
  ${CXX:-g++} -shared -o "$pkg/_core$suffix.tmp" "${objs[@]}" .gpu/lib/librayx.so.0 \
    .gpu/lib/libzmq.so.5 -ldl -Wl,-rpath,'$ORIGIN/../../lib' &&
    mv "$pkg/_core$suffix.tmp" "$pkg/_core$suffix"
}
export -f build_extension
export pkg py
if [ -z "$built" ]; then
  step build_python_extension 240 bash -c build_extension
else
  note "KEEP the extension of an earlier run: $built"
fi
export PYTHONPATH="$root/.gpu/python" RAYX_BIN_DIR="$root/.gpu/bin" PYTHONUNBUFFERED=1
step import_rayx 30 "$py" -c 'import rayx, rayx._core; print("rayx from", rayx.__file__)'

step collective_nccl_test 150 .gpu/bin/collective_nccl_test --gtest_color=no
step node_resources_test 30 .gpu/bin/node_resources_test --gtest_color=no
step python_gpu_tests 300 "$py" -m pytest -v -p no:cacheprovider -rs tests/python/test_gpu.py
if grep -q "^FAIL python_gpu_tests" "$summary"; then
  for f in /tmp/rayx-gpu-*/session_*/logs/*; do
    [ -f "$f" ] && { echo "---- $f"; tail -n 40 "$f"; } >>"$out/python_gpu_tests.log"
  done
fi
NCCL_DEBUG=WARN step nccl_microbenchmark 240 .gpu/bin/rayx microbenchmark --only nccl --runs 3
echo "== summary"
cat "$summary"
exit $failed
