#!/usr/bin/env bash
# Runs on the GPU machine, from the checkout root, with .gl/ and .bin/ carried
# (see scripts/device-build.sh): unpacks the Vulkan loader and validation
# layer, then runs every GPU test binary ROUNDS times in a row (default 5)
# with THREADS test threads (default 1: see .cargo/config.toml), counting passes and failures per
# round, and the command's demo once. A binary still running after LIMIT
# seconds (default 120) is killed and its unfinished tests are named.
# Everything lands in $OUT.
set -uo pipefail
[ -f .bin/bins.tar.xz ] && tar xJf .bin/bins.tar.xz -C .bin
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
# CUPTI (the CUDA backend's statistics) is not on the loader's path there.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# No Python `perfetto` package there: the Perfetto export's decoding tests
# skip, saying so.
export GPU_COUNTERS_SKIP_PYTHON=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-5}; THREADS=${THREADS:-1}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
tests=$(ls .bin/test-* | grep -v -E 'pass_timestamps|resolve_speed|scopes|render_svg_png')
for r in $(seq 1 "$ROUNDS"); do
  passed=0; failed=0
  for t in $tests; do
    timeout -s KILL "${LIMIT:-120}" "$t" --test-threads="$THREADS" > /tmp/t.out 2>&1; rc=$?
    cat /tmp/t.out >> "$OUT/round-$r.log"
    if [ $rc = 137 ]; then
      # Killed at the limit: name the tests that never reported, and whether
      # the harness had finished (a hang at process exit) or not.
      echo "round $r: $t killed after ${LIMIT:-120} s; harness finished: $(grep -q 'test result' /tmp/t.out && echo yes || echo no)" | tee -a "$OUT/failures.txt"
      for name in $("$t" --list 2>/dev/null | sed -n 's/: test$//p'); do
        grep -q "^test $name \.\.\." /tmp/t.out || echo "  unfinished: $name" | tee -a "$OUT/failures.txt"
      done
    fi
    p=$(grep -oE '[0-9]+ passed' /tmp/t.out | awk '{s+=$1} END {print s+0}')
    f=$(grep -oE '[0-9]+ failed' /tmp/t.out | awk '{s+=$1} END {print s+0}')
    [ $rc = 0 ] || { [ "$f" = 0 ] && f=1; echo "round $r: $t exited $rc" | tee -a "$OUT/failures.txt"; grep -E 'panicked|FAILED' /tmp/t.out | head -5 | tee -a "$OUT/failures.txt"; }
    passed=$((passed + p)); failed=$((failed + f))
  done
  echo "round $r: $passed passed, $failed failed" | tee -a "$OUT/rounds.txt"
done
GPU_COUNTERS_VALIDATION=1 .bin/gpu-counters run mixed --frames 5 --svg "$OUT/h200-timeline.svg" > "$OUT/run-mixed.txt" 2>&1; echo "run mixed exit $?"
GPU_COUNTERS_VALIDATION=1 .bin/gpu-counters run compute --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json > "$OUT/run-compute.json"; echo "run compute exit $?"
GPU_COUNTERS_VALIDATION=1 .bin/gpu-counters run render --frames 3 --triangles 37 --width 256 --height 128 --json > "$OUT/run-render.json"; echo "run render exit $?"
