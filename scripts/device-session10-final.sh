#!/usr/bin/env bash
# The tenth session's last H200 call (docs/h200-2026-12-03/final/): every
# test binary, the examples and demos, three benches
# (`gpu-counters bench --json --samples 4096 --reps 7 --drift-seconds 5`),
# then host_cost of the session's first library (host_cost-base: a4a8a9d
# with this session's host_cost.rs) and of its last (host_cost) taking
# turns, four processes each: the profiler against raw-scopes, and every
# primitive against raw ash with its rounds printed (for
# scripts/host_cost_rounds.py). Build with scripts/device-build.sh after
# copying both host_cost binaries into .bin/; carry [".gl", ".bin"].
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-"cuda wgpu vulkan demo bench"} BENCHES=${BENCHES:-3} REPS=${REPS:-7} BENCH_LIMIT=${BENCH_LIMIT:-140} \
  bash scripts/device-all.sh
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
R=$OUT/r; mkdir -p "$R"
V=raw-pass,passes,attachments,raw-precise,relaxed-pass,heap-precise,encoder-sample,scope-pairs
for i in 1 2 3 4; do
  for b in host_cost-base host_cost; do
    timeout 90 .bin/$b raw-scopes,profiler 4096 60 > "$R/prof-$b-$i.txt" 2>&1
    HOST_COST_ROUNDS=1 timeout 90 .bin/$b "$V" 4096 40 > "$R/hc-$b-$i.txt" 2>&1
  done
done
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
tar xzf "$OUT/all.tar.gz" -O summary.txt
mkdir -p /tmp/r && tar xzf "$OUT/r.tar.gz" -C /tmp
for f in /tmp/r/prof-*.txt; do echo "$(basename $f) $(tail -n 1 $f)"; done
for b in host_cost-base host_cost; do echo "== $b"; python3 scripts/host_cost_rounds.py /tmp/r/hc-$b-[0-9].txt | tail -6; python3 scripts/host_cost_rounds.py --whole /tmp/r/hc-$b-[0-9].txt | tail -3; done
