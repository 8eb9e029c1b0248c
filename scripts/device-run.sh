#!/usr/bin/env bash
# Runs on the GPU machine, in the checkout (from any directory), with .gl/ and .bin/ carried
# (see scripts/device-build.sh): unpacks the Vulkan loader and validation
# layer, then runs the GPU tests, the command's demo and, with BENCH=1, the
# benchmark. Everything lands in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .bin/bins.tar.xz ] && tar xJf .bin/bins.tar.xz -C .bin
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv
.bin/gpu-counters devices
.bin/gpu-counters devices --json > "$OUT/devices.json"
fail=0
for t in .bin/test-*; do
  echo "== $t" | tee -a "$OUT/tests.log"
  "$t" --test-threads=1 > /tmp/test.out 2>&1; rc=$?
  cat /tmp/test.out >> "$OUT/tests.log"
  grep -E "test result|panicked|FAILED" /tmp/test.out
  [ $rc = 0 ] || fail=1
done
echo "tests: $([ $fail = 0 ] && echo all passed || echo FAILURES)" | tee -a "$OUT/tests.log"
GPU_COUNTERS_VALIDATION=1 .bin/gpu-counters run mixed --frames 5 --svg "$OUT/h200-timeline.svg" 2>&1 | tee "$OUT/run-mixed.txt"
GPU_COUNTERS_VALIDATION=1 .bin/gpu-counters run compute --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json > "$OUT/run-compute.json"; echo "run compute exit $?"
GPU_COUNTERS_VALIDATION=1 .bin/gpu-counters run render --frames 3 --triangles 37 --width 256 --height 128 --json > "$OUT/run-render.json"; echo "run render exit $?"
if [ "${BENCH:-0}" = 1 ]; then
  .bin/gpu-counters bench --json --samples 4096 --reps 5 --drift-seconds "${DRIFT:-60}" > "$OUT/bench.json" 2> "$OUT/bench.txt"; echo "bench exit $?"
  [ "${BENCH_TABLE:-0}" = 1 ] && .bin/gpu-counters bench --samples 4096 --reps 5 --drift-seconds 5 2>&1 | tee -a "$OUT/bench.txt" | tail -40
fi
