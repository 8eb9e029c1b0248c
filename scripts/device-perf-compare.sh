#!/usr/bin/env bash
# Where two or more builds of host_cost differ on the profiler loop (the
# seventeenth session): for each build in BUILDS (binaries in .bin), `perf
# stat` of `host_cost profiler 4096 300` (cycles, instructions, branches and
# their misses, where the machine's PMU gives them), then `perf record`
# and the symbols' self shares. Carry [".gl", ".bin", ".bin-perf"].
cd "$(dirname "$0")/.."
. scripts/device-env.sh
BUILDS=${BUILDS:-host_cost-base host_cost}
mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
for i in 1 2; do
  for b in $BUILDS; do
    P stat -e cycles,instructions,branches,branch-misses,L1-dcache-loads,L1-dcache-load-misses,L1-icache-load-misses \
      -o "$R/stat-$b-$i.txt" .bin/$b profiler 4096 300 > "$R/stat-run-$b-$i.txt" 2>&1
    echo "== $b $i"; grep -E "cycles|instructions|branch|L1" "$R/stat-$b-$i.txt" | cut -c1-110
  done
done
for b in $BUILDS; do
  P record -F 20000 -o /tmp/perf-$b.data .bin/$b profiler 4096 300 > "$R/perf-run-$b.txt" 2>&1
  P report -i /tmp/perf-$b.data --no-children --comm $b --sort dso,sym --stdio 2>/dev/null \
    | grep -v '^$' | grep -v '^#' | head -60 > "$R/perf-self-$b.txt"
  P annotate -i /tmp/perf-$b.data --stdio -s 'host_cost::main::{{closure}}' 2>/dev/null \
    | grep -v '^\s*0.00' | head -400 > "$R/perf-ann-$b.txt"
  echo "== perf $b"; grep host_cost "$R/perf-self-$b.txt" | head -12 | cut -c1-150
done
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
