#!/usr/bin/env bash
# The tenth session's last H200 call (docs/h200-2026-12-03/inline/):
# host_cost of `69c0b91` (host_cost-head), of `c6e0523` (`end_encoding`
# inlined whole; host_cost-inl) and of `bb4d1e6` (a pass's one relaxed
# write packed; host_cost) taking turns, four processes each (every primitive against raw ash, rounds printed for
# scripts/host_cost_rounds.py), then two `gpu-counters bench --json
# --samples 4096 --reps 7 --drift-seconds 5` runs of the new build (the
# resolve and the copy timed side by side, with their times). .bin/ holds
# only bins.tar.xz with the four stripped binaries; carry [".gl", ".bin"].
cd "$(dirname "$0")/.."
tar xJf .bin/bins.tar.xz -C .bin
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p "$R"
V=raw-pass,passes,attachments,raw-precise,relaxed-pass,heap-precise,encoder-sample,scope-pairs
for i in 1 2 3 4; do
  for b in host_cost-head host_cost-inl host_cost; do
    HOST_COST_ROUNDS=1 timeout 90 .bin/$b "$V" 4096 40 > "$R/hc-$b-$i.txt" 2>&1
  done
done
for i in 1 2; do timeout 140 .bin/gpu-counters bench --json --samples 4096 --reps 7 --drift-seconds 5 > "$R/bench-$i.txt" 2>&1; done
for b in host_cost-head host_cost-inl host_cost; do echo "== $b"; python3 scripts/host_cost_rounds.py "$R"/hc-$b-[0-9].txt | grep -v '^$' | tail -20; python3 scripts/host_cost_rounds.py --whole "$R"/hc-$b-[0-9].txt | tail -3; done
for i in 1 2; do grep -A8 '"resolve": {' "$R/bench-$i.txt" | tr -d '\n '; echo; done
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
