#!/usr/bin/env bash
# One full call on the GPU machine (carry [".gl", ".bin"]; .bin/ made by
# scripts/device-build.sh): the CUDA and wgpu tests first (they are the least
# proven there), then every Vulkan test binary ROUNDS times, the demo runs with
# their exports, and the benchmark. Every step has its own time limit, so one
# hang costs only its own step. Everything lands in $OUT; summary.txt says
# what each step exited with.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .bin/bins.tar.xz ] && tar xJf .bin/bins.tar.xz -C .bin
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S=$OUT/summary.txt
step() { # step NAME LIMIT COMMAND...: runs COMMAND with output in $OUT/NAME.txt
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s%N)
  timeout -s KILL "$limit" "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
  printf '%-28s exit %3s  %6s ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" \
    "$(grep -E '^test result' "$OUT/$name.txt" | tail -1)" | tee -a "$S"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for s in ${STEPS:-cuda wgpu vulkan demo bench}; do case $s in
cuda)
  step cuda-tests 120 .bin/test-cuda-cuda --test-threads=1 --nocapture
  step cuda-activity-tests 120 .bin/test-cuda-activity --test-threads=1 --nocapture
  step cuda-hardware-tests 120 .bin/test-cuda-hardware --test-threads=1 --nocapture
  step cuda-hardware-example 60 .bin/test-cuda-hardware_counters --reps 5
  step cuda-bench 120 .bin/gpu-counters bench --backend cuda --samples 4000 --reps 5 --drift-seconds 3 --resolve-samples 100000
  step cuda-example 60 .bin/test-cuda-profile_kernels "$OUT/cuda-example-trace.json"
  step cuda-devices 30 .bin/gpu-counters devices --backend all
  step cuda-run-compute 60 .bin/gpu-counters run compute --backend cuda --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json --perfetto "$OUT/cuda-compute.pftrace" --trace "$OUT/cuda-compute.json"
  ;;
wgpu)
  step wgpu-tests 120 .bin/test-wgpu-lavapipe --test-threads=1
  step wgpu-example 60 .bin/test-wgpu-profile_passes "$OUT/wgpu-example-trace.json"
  step wgpu-run-compute 60 .bin/gpu-counters run compute --backend wgpu --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json
  step wgpu-run-render 60 .bin/gpu-counters run render --backend wgpu --frames 3 --triangles 37 --width 256 --height 128 --json
  ;;
vulkan)
  # One test at a time: see .cargo/config.toml (the validation layer's
  # unlocked per-device map).
  for r in $(seq 1 "${ROUNDS:-1}"); do
    for t in $(ls .bin/test-* | grep -v -E 'cuda|wgpu|pass_timestamps|resolve_speed|profiler-scopes$|render_svg_png|perfetto|tracy|fake_cost'); do
      step "r$r-$(basename "$t")" "${LIMIT:-90}" "$t" --test-threads=1
    done
  done
  ;;
demo)
  export GPU_COUNTERS_VALIDATION=1
  step vk-run-mixed 60 .bin/gpu-counters run mixed --frames 5 --svg "$OUT/h200-timeline.svg" --perfetto "$OUT/vk-mixed.pftrace" --trace "$OUT/vk-mixed.json"
  step vk-run-compute 60 .bin/gpu-counters run compute --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json
  step vk-run-render 60 .bin/gpu-counters run render --frames 3 --triangles 37 --width 256 --height 128 --json
  step cuda-run-compute-table 60 .bin/gpu-counters run compute --backend cuda --frames 3
  unset GPU_COUNTERS_VALIDATION
  ;;
bench)
  for b in $(seq 1 "${BENCHES:-1}"); do
    step "bench-$b" "${BENCH_LIMIT:-240}" .bin/gpu-counters bench --json --samples 4096 --reps "${REPS:-5}" --drift-seconds "${DRIFT:-5}"
  done
  ;;
esac; done
# A call brings back at most 8 files: everything goes back as one archive.
(cd "$OUT" && tar czf all.tar.gz --exclude all.tar.gz * && find . -mindepth 1 -not -name all.tar.gz -delete)
