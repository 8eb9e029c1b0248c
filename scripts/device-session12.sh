#!/usr/bin/env bash
# The twelfth session's H200 calls (docs/h200-2026-12-03/session12/ and
# session12-perf/): the session's first library (`515afb6`,
# host_cost-base) and the converter's hot paths (host_cost) taking turns,
# four processes each: the profiler against a hand-rolled raw ash profiler
# (raw-scopes), then every primitive against raw ash (three each, rounds
# printed for scripts/host_cost_rounds.py); conversion_cost of both on that
# CPU; a perf profile of the profiler loop when .bin-perf is carried; then
# the Vulkan, profiler and core test binaries one test at a time, and the
# demo's passes under the validation layer. From
# scripts/device-build-session12.sh; carry [".gl", ".bin"] (and
# ".bin-perf"). STEPS (default "compare conversion perf tests") picks parts;
# "diag" runs the per-phase timer builds when there are any; "small" (the
# fourteenth session) runs the profiler against raw-scopes in frames of 64
# scopes, where `end_frame` weighs most, four processes per build.
cd "$(dirname "$0")/.."
STEPS=${STEPS:-compare conversion perf tests}
has() { [[ " $STEPS " == *" $1 "* ]]; }
. scripts/device-env.sh
start=$(date +%s)
if has compare; then
  for i in 1 2 3 4; do
    for b in host_cost-base host_cost; do
      timeout 60 .bin/$b raw-scopes,profiler 4096 60 > "$R/prof-$b-$i.txt" 2>&1
    done
  done
  for i in 1 2 3; do
    for b in host_cost-base host_cost; do
      HOST_COST_ROUNDS=1 timeout 60 .bin/$b "$V" 4096 40 > "$R/hc-$b-$i.txt" 2>&1
    done
  done
  echo "host_cost: $(( $(date +%s) - start )) s"
fi
if has small; then
  for i in 1 2 3 4; do
    for b in host_cost-base host_cost; do
      timeout 60 .bin/$b raw-scopes,profiler 64 2000 > "$R/small-$b-$i.txt" 2>&1
    done
  done
  for f in "$R"/small-*.txt; do echo "== $(basename "$f")"; tail -n 4 "$f"; done
fi
if has conversion; then
  for i in 1 2 3; do
    for b in conversion_cost-base conversion_cost; do echo "$b $(.bin/$b)"; done
  done | tee "$R/conversion.txt"
fi
if has perf && [ -f .bin-perf/perf.tar.xz ]; then
  mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
  P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
  for b in ${PERF_BUILDS:-host_cost}; do
    P record -g -F 20000 -o /tmp/perf-$b.data .bin/$b profiler 4096 600 > "$R/perf-run-$b.txt" 2>&1
    P report -i /tmp/perf-$b.data --no-children --comm $b --sort dso,sym --stdio -g none 2>/dev/null \
      | grep -v '^$' | grep -v '^#' | head -80 > "$R/perf-self-$b.txt"
    P report -i /tmp/perf-$b.data --children --comm $b --sort sym --stdio -g none 2>/dev/null \
      | grep -v '^$' | grep -v '^#' | head -80 > "$R/perf-children-$b.txt"
    echo "== perf $b"; head -45 "$R/perf-self-$b.txt" | cut -c1-150; head -45 "$R/perf-children-$b.txt" | cut -c1-150
  done
fi
if has diag; then
  # Per-phase timers (host_cost-diag-*, see device-build-session12.sh).
  for i in 1 2 3; do
    for b in .bin/host_cost-diag-*; do
      [ -x "$b" ] || continue
      timeout 90 "$b" raw-scopes,profiler 4096 60 > "$R/$(basename "$b")-$i.txt" 2>&1
    done
  done
  for f in "$R"/host_cost-diag-*; do echo "== $(basename "$f")"; grep -E '^diag|ratio' "$f"; done
fi
fail=0
if has tests; then
  for t in .bin/test-*; do
    timeout 60 "$t" --test-threads=1 > "$R/$(basename "$t").txt" 2>&1; rc=$?
    echo "$(basename "$t") rc=$rc $(grep -E '^test result' "$R/$(basename "$t").txt" | tail -1)"
    [ $rc -eq 0 ] || fail=1
  done
  GPU_COUNTERS_VALIDATION=1 timeout 60 .bin/gpu-counters run mixed --frames 5 > "$R/run-mixed.txt" 2>&1
  echo "run mixed exit $?"; tail -n 4 "$R/run-mixed.txt"
fi
if has compare; then
  for f in "$R"/prof-*.txt; do echo "== $(basename "$f")"; tail -n 4 "$f"; done
  for b in host_cost-base host_cost; do
    echo "== $b"; python3 scripts/host_cost_rounds.py "$R"/hc-$b-[0-9].txt | grep -v '^$' | tail -8
  done
fi
echo "total: $(( $(date +%s) - start )) s, tests fail=$fail"
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
