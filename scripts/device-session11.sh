#!/usr/bin/env bash
# The eleventh session's H200 call (docs/h200-2026-12-03/marked/): host_cost
# of `4f12e10` (host_cost-base) and of the marked ends (host_cost: a pass
# attachment's end and a pass's one relaxed write noted as written when
# made, their commands alone at the pass's end; the first pass of a block
# claimed under one lock) taking turns, four processes each (every
# primitive against raw ash, rounds printed for scripts/host_cost_rounds.py),
# then the Vulkan and profiler test binaries of the new build, one test at
# a time. .bin/ holds only bins.tar.xz (stripped binaries, from
# scripts/device-build-session11.sh); carry [".gl", ".bin"].
cd "$(dirname "$0")/.."
tar xJf .bin/bins.tar.xz -C .bin
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p "$R"
V=raw-pass,passes,attachments,raw-precise,relaxed-pass,heap-precise,encoder-sample,scope-pairs
start=$(date +%s)
for i in 1 2 3 4; do
  for b in host_cost-base host_cost; do
    HOST_COST_ROUNDS=1 timeout 60 .bin/$b "$V" 4096 40 > "$R/hc-$b-$i.txt" 2>&1
  done
done
echo "host_cost: $(( $(date +%s) - start )) s"
fail=0
for t in $(ls .bin/test-* | grep -v -E 'pass_timestamps|resolve_speed|scopes|render_svg_png'); do
  timeout 60 "$t" --test-threads=1 > "$R/$(basename "$t").txt" 2>&1; rc=$?
  echo "$(basename "$t") rc=$rc $(grep -E '^test result' "$R/$(basename "$t").txt" | tail -1)"
  [ $rc -eq 0 ] || fail=1
done
for b in host_cost-base host_cost; do echo "== $b"; python3 scripts/host_cost_rounds.py "$R"/hc-$b-[0-9].txt | grep -v '^$' | tail -20; python3 scripts/host_cost_rounds.py --whole "$R"/hc-$b-[0-9].txt | tail -3; done
echo "total: $(( $(date +%s) - start )) s, tests fail=$fail"
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
