#!/usr/bin/env bash
# The eleventh session's H200 calls (docs/h200-2026-12-03/marked/ and
# marked2/, with HOST_COST_PROCESSES=3 and a third build, host_cost-mid,
# when .bin has it): host_cost
# of `4f12e10` (host_cost-base) and of the marked ends (host_cost: a pass
# attachment's end and a pass's one relaxed write noted as written when
# made, their commands alone at the pass's end; the first pass of a block
# claimed under one lock) taking turns, four processes each (every
# primitive against raw ash, rounds printed for scripts/host_cost_rounds.py),
# then the Vulkan and profiler test binaries of the new build, one test at
# a time. .bin/ holds only bins.tar.xz (stripped binaries, from
# scripts/device-build-session11.sh); carry [".gl", ".bin"].
cd "$(dirname "$0")/.."
. scripts/device-env.sh
start=$(date +%s)
builds="host_cost-base $( [ -x .bin/host_cost-mid ] && echo host_cost-mid ) host_cost"
for i in $(seq 1 "${HOST_COST_PROCESSES:-4}"); do
  for b in $builds; do
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
if [ -x .bin/gpu-counters ]; then
  # The demo's passes (attachments among them) under the validation layer.
  GPU_COUNTERS_VALIDATION=1 timeout 60 .bin/gpu-counters run mixed --frames 5 > "$R/run-mixed.txt" 2>&1; echo "run mixed exit $?"; tail -n 12 "$R/run-mixed.txt"
  GPU_COUNTERS_VALIDATION=1 timeout 60 .bin/gpu-counters run compute --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json > "$R/run-compute.json" 2> "$R/run-compute.err"; echo "run compute exit $?"
fi
for b in $builds; do echo "== $b"; python3 scripts/host_cost_rounds.py "$R"/hc-$b-[0-9].txt | grep -v '^$' | tail -20; python3 scripts/host_cost_rounds.py --whole "$R"/hc-$b-[0-9].txt | tail -3; done
echo "total: $(( $(date +%s) - start )) s, tests fail=$fail"
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
