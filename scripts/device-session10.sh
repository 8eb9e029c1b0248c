#!/usr/bin/env bash
# The tenth session's first H200 call: what a store, a load and an atomic
# cost between the driver's timestamp commands (host_cost's probe-*
# variants against raw-pass, round by round), where the profiler and the
# per-pass primitives stand at the session's start (host_cost-base), and
# perf profiles of them. Carry [".gl", ".bin", ".bin-perf"]; .bin/ holds
# host_cost-base (and host_cost, when a second build is compared).
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p $R
lscpu > $R/lscpu.txt 2>&1; nproc >> $R/lscpu.txt
B=${BINS:-host_cost-base}
PROBES=${PROBES:-raw-pass,probe-stores-4,probe-stores-8,probe-stores-16,probe-stores-32,probe-hot-16,probe-loads-16,probe-atomic-1,probe-atomic-4}
if [ -n "$PROBES" ] && [ "$PROBES" != none ]; then
  for i in 1 2 3; do HOST_COST_ROUNDS=1 timeout 120 .bin/host_cost-base "$PROBES" 4096 30 > $R/probe-$i.txt 2>&1; done
fi
V=raw-pass,passes,attachments,raw-precise,relaxed-pass,heap-precise,encoder-sample,scope-pairs
for i in ${HC_RUNS:-1 2 3}; do
  for b in $B; do
    timeout 90 .bin/$b raw-scopes,profiler 4096 60 > $R/prof-$b-$i.txt 2>&1
    HOST_COST_ROUNDS=1 timeout 90 .bin/$b "$V" 4096 40 > $R/hc-$b-$i.txt 2>&1
  done
done
if [ -f .bin-perf/perf.tar.xz ] && [ -n "${PERF:-profiler attachments relaxed-pass raw-pass}" ]; then
  mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
  P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
  PB=${PERF_BIN:-host_cost-base}
  for v in ${PERF:-profiler attachments relaxed-pass raw-pass}; do
    P record -F 20000 -o /tmp/perf-$v.data .bin/$PB $v 4096 ${PERF_ROUNDS:-600} > $R/perf-run-$v.txt 2>&1
    P report -i /tmp/perf-$v.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -60 > $R/perf-self-$v.txt
    P report -i /tmp/perf-$v.data --no-children --sort dso --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -12 > $R/perf-dso-$v.txt
    n=0
    for sym in $(P report -i /tmp/perf-$v.data --no-children --sort sym --stdio --dsos $PB 2>/dev/null | grep -v "^#" | grep "%" | head -6 | awk '{print $3}'); do
      n=$((n+1)); { echo "$sym"; P annotate -i /tmp/perf-$v.data --stdio --dsos $PB "$sym" 2>/dev/null | grep -E "^\s+[0-9]+\.[0-9]+ " | sort -rn | head -30; } > "$R/perf-ann-$v-$n.txt"
    done
  done
fi
tar czf $OUT/r.tar.gz -C $OUT r
for f in $R/probe-*.txt; do echo "== $f"; grep -v '^round' $f | tail -9; done
for f in $R/prof-*.txt; do echo "$(basename $f) $(tail -n 1 $f)"; done
command -v python3 >/dev/null && for b in $B; do echo "== $b"; python3 scripts/host_cost_rounds.py $R/hc-$b-[0-9].txt | tail -6; done
for v in ${PERF:-profiler attachments relaxed-pass raw-pass}; do echo "== perf $v"; tail -n 3 $R/perf-run-$v.txt | head -1; head -25 $R/perf-self-$v.txt 2>/dev/null | cut -c1-160; done
