#!/usr/bin/env bash
# The eighth session's H200 call (docs/h200-2026-12-02c/): every test binary
# and the demos (scripts/device-all.sh with STEPS="cuda wgpu vulkan demo"),
# then, the build before this session's encoder fast paths (the `-old`
# binaries) and after taking turns: three benches each
# (`gpu-counters bench --json --samples 4096 --reps 7 --drift-seconds 5`),
# and three `host_cost` processes each of every primitive against raw ash
# with its rounds printed (HOST_COST_ROUNDS=1, for
# scripts/host_cost_rounds.py). Build with scripts/device-build.sh, copy
# host_cost and the -old binaries (gpu-counters-old, host_cost-old) into
# .bin/ (strip --strip-debug), carry [".gl", ".bin"]. The second call:
# STEPS=vulkan HC="host_cost-old host_cost-mid host_cost" BENCH_BINS=gpu-counters
# (host_cost-mid: the first call's build, e5b2e72).
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-"cuda wgpu vulkan demo"} bash scripts/device-all.sh
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
X=$OUT/x; mkdir -p "$X"
V=${HC_VARIANTS:-raw-pass,passes,attachments,raw-precise,relaxed-pass,heap-precise,encoder-sample,scope-pairs}
HC=${HC:-host_cost-old host_cost}
for i in 1 2 3; do
  for b in $HC; do
    HOST_COST_ROUNDS=1 timeout 90 .bin/$b "$V" 4096 ${HC_ROUNDS:-40} > "$X/hc-$b-$i.txt" 2>&1
  done
  for b in ${BENCH_BINS:-gpu-counters-old gpu-counters}; do
    timeout 240 .bin/$b bench --json --samples 4096 --reps ${REPS:-7} --drift-seconds 5 > "$X/bench-$b-$i.txt" 2>&1
  done
done
if command -v python3 > /dev/null; then
  for b in $HC; do echo "== $b"; python3 scripts/host_cost_rounds.py "$X"/hc-$b-[0-9].txt | tail -6; done
fi
(cd "$OUT" && tar czf x.tar.gz x && rm -rf x)
tar xzf "$OUT/all.tar.gz" -O summary.txt
