#!/usr/bin/env bash
# Hardware counters on the GPU machine: gpu-counters-cuda's hardware tests,
# the hardware_counters example, and the same kernel under Nsight Compute.
#
# Here (a Rust toolchain, no GPU needed):
#   scripts/device-hardware.sh pack DIR      # DIR: a folder the device call carries
# builds the CUDA test binaries, the example and the CLI (debug), strips and
# packs them into DIR/bins.tar.xz, and copies this script to DIR/run.sh.
# There (one call; carry DIR):
#   cd DIR && ./run.sh                       # or STEPS="example ncu" ./run.sh
# Everything lands in $OUT/all.tar.gz; $OUT/summary.txt says what each step
# exited with. The comparison: `example` prints ours (sm__cycles_elapsed.max,
# gpu__time_duration.sum of each measured launch and their median), `ncu`
# Nsight Compute's of the same kernel, 5 launches after 3 warm-ups each.
set -uo pipefail
if [ "${1:-}" = pack ]; then
  set -e
  dir=$(realpath "$2"); mkdir -p "$dir"
  cd "$(dirname "$0")/.."
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  cargo test -p gpu-counters-cuda --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
names = {"hardware": "test-hardware", "cuda": "test-cuda", "gpu_counters_cuda": "test-cuda-lib"}
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in names:
        print(m["executable"], names[m["target"]["name"]])' |
    while read -r exe name; do cp "$exe" "$tmp/$name"; done
  cargo build -q -p gpu-counters-cuda --example hardware_counters
  cargo build -q -p gpu-counters-cli
  cp "$CARGO_TARGET_DIR/debug/examples/hardware_counters" "$CARGO_TARGET_DIR/debug/gpu-counters" "$tmp/"
  strip "$tmp"/*
  tar cJf "$dir/bins.tar.xz" -C "$tmp" .
  cp "$0" "$dir/run.sh"
  ls -la "$dir"
  exit 0
fi
cd "$(dirname "$0")"
tar xJf bins.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda-13.0/bin
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S=$OUT/summary.txt
step() { # step NAME LIMIT COMMAND...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s%N)
  timeout -s KILL "$limit" "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
  printf '%-22s exit %3s %7s ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" \
    "$(grep -E '^test result' "$OUT/$name.txt" | tail -1)" | tee -a "$S"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
for s in ${STEPS:-example ncu hardware cuda devices lib}; do case $s in
example) step example 60 env ${TRACE:+GPU_COUNTERS_TRACE_CUPTI=1} ./hardware_counters --reps 5 ${LIST:+--list $LIST} ;;
ncu) step ncu 60 ncu --clock-control none --kernel-name spin --launch-skip 3 \
       --metrics sm__cycles_elapsed.max,gpu__time_duration.sum --print-units base --csv \
       ./hardware_counters --ncu --reps 5 ;;
hardware) step hardware 60 env ${TRACE:+GPU_COUNTERS_TRACE_CUPTI=1} ./test-hardware --test-threads=1 --nocapture ;;
cuda) step cuda 40 ./test-cuda --test-threads=1 --nocapture ;;
devices) step devices 20 ./gpu-counters devices --backend cuda
         step devices-json 20 ./gpu-counters devices --backend cuda --json ;;
lib) step lib 20 ./test-cuda-lib --nocapture ;;
experiment) step experiment 60 env GPU_COUNTERS_TRACE_CUPTI=1 ./test-cuda-lib --ignored --nocapture experiment_restart_after_decode ;;
esac; done
(cd "$OUT" && tar czf all.tar.gz --exclude all.tar.gz ./* && find . -mindepth 1 -not -name all.tar.gz -not -name summary.txt -delete)
