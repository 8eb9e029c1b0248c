#!/usr/bin/env bash
# The sixth session's final H200 call (docs/h200-2026-12-02/): every test
# binary, the demos and three benches (scripts/device-all.sh with
# STEPS="cuda wgpu vulkan demo bench" BENCHES=3 REPS=7), then the profiler
# against raw ash at its own placement in one process, for the build before
# this session (host_cost_old, aa8a093) and after (host_cost), five
# processes each taking turns. Build with scripts/device-build.sh, copy
# host_cost and host_cost_old into .bin/, carry [".gl", ".bin"].
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS="cuda wgpu vulkan demo bench" BENCHES=3 REPS=7 bash scripts/device-all.sh
mkdir -p "$OUT/hc"
for i in 1 2 3 4 5; do
  for b in host_cost_old host_cost; do
    timeout 60 .bin/$b raw-scopes,profiler 4096 60 > "$OUT/hc/$b-$i.txt" 2>&1
  done
  timeout 30 .bin/host_cost raw-pass,scope-pairs 4096 60 > "$OUT/hc/pairs-$i.txt" 2>&1
  timeout 30 .bin/host_cost raw-precise,heap-precise 4096 60 > "$OUT/hc/heap-$i.txt" 2>&1
done
(cd "$OUT" && tar czf hc.tar.gz hc && rm -rf hc)
tar xzf "$OUT/all.tar.gz" -O summary.txt; for f in host_cost_old host_cost; do for i in 1 2 3 4 5; do tar xzf "$OUT/hc.tar.gz" -O hc/$f-$i.txt | tail -n 1; done; done
