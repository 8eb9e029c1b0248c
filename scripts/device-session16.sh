#!/usr/bin/env bash
# The sixteenth session's H200 calls (docs/h200-2026-12-03/session16/): the
# session's build (host_cost) and the session's first library
# (host_cost-base, from `BASE=550cec5 PERF=1 bash
# scripts/device-build-session12.sh`) taking turns, PROCS processes each
# (default 10) of `host_cost raw-scopes,profiler 4096 60`. BUILDS names
# other builds in .bin to take turns instead. STEPS: "prof" (the default)
# that; "hc" the primitives, HC_PROCS processes each (default 3); "perf"
# (with .bin-perf carried) a perf profile of each build's profiler loop;
# "stat" (the seventeenth session) `perf stat` of it twice per build (the
# H200's VM gives no hardware events: they read `<not supported>`), then a
# shorter profile with the recording loop's annotation; "wgpu" (the
# nineteenth session) wgpu_host_cost-base and wgpu_host_cost taking turns,
# WGPU_PROCS processes each (default 8) of every wgpu row, 4096 passes, 20
# rounds; "wperf" (the twentieth session's, with .bin-perf carried) a perf
# profile of this build's wgpu_host_cost raw-writes, gcw-writes and
# gcw-profiled, WPERF_ROUNDS rounds each (default 30); "bench" BENCHES runs
# (default 3) of the issue's bench command
# (WGPU_REPS adds `--wgpu-reps`, the twentieth session's; by the
# nineteenth session's 7 µs a wgpu sample, a wgpu round of 4096 passes
# is about 2 s there, an estimate not yet timed, so raise BENCH_TIMEOUT,
# default 120 s, with it); "threads" (the twenty-second session's)
# threaded_cost-base and threaded_cost taking turns, TC_PROCS processes
# each (default 4) of `threaded_cost raw-scopes,profiler,scope-pairs,
# scope-pairs-own 4096 30 T` for each T in TC_THREADS (default "2 4 8").
# Since the twenty-fourth session, HOST_REPS adds `--host-reps` to the
# bench (its samples-alone rows; WGPU_HOST_REPS, the twenty-fifth
# session's, adds `--wgpu-host-reps` for the wgpu ones), BENCH_REPS sets
# `--reps` (default 7),
# and "cuda" runs CUDA_BENCHES (default 3) of `bench --backend cuda --json
# --samples 4096 --reps 7 --drift-seconds 2` (CUPTI from CUDA 13.0).
# Carry [".gl", ".bin"] (and ".bin-perf"). Summaries:
# scripts/host_cost_prof.py, scripts/host_cost_rounds.py [--wgpu],
# scripts/bench_runs_h200.py.
cd "$(dirname "$0")/.."
STEPS=${STEPS:-prof}
# The builds taking turns (binaries in .bin), the session's first library first.
BUILDS=${BUILDS:-host_cost-base host_cost}
has() { [[ " $STEPS " == *" $1 "* ]]; }
. scripts/device-env.sh
start=$(date +%s)
if has prof; then
  for i in $(seq 1 "${PROCS:-10}"); do
    for b in $BUILDS; do
      timeout 60 .bin/$b raw-scopes,profiler 4096 60 > "$R/prof-$b-$i.txt" 2>&1
    done
  done
  python3 scripts/host_cost_prof.py "$R"
  echo "prof: $(( $(date +%s) - start )) s"
fi
if has hc; then
  for i in $(seq 1 "${HC_PROCS:-3}"); do
    for b in $BUILDS; do
      HOST_COST_ROUNDS=1 timeout 60 .bin/$b "$V" 4096 40 > "$R/hc-$b-$i.txt" 2>&1
    done
  done
  for b in $BUILDS; do
    echo "== $b"; python3 scripts/host_cost_rounds.py "$R"/hc-$b-[0-9]*.txt | grep -v '^$' | tail -5
  done
fi
if has threads; then
  for t in ${TC_THREADS:-2 4 8}; do
    for i in $(seq 1 "${TC_PROCS:-4}"); do
      for b in threaded_cost-base threaded_cost; do
        timeout 120 .bin/$b raw-scopes,profiler,scope-pairs,scope-pairs-own 4096 30 "$t" \
          > "$R/threads-$t-$b-$i.txt" 2>&1
      done
    done
    for b in threaded_cost-base threaded_cost; do
      echo "== $t threads, $b"; grep -h "ratio" "$R"/threads-$t-$b-[0-9]*.txt | sort
    done
  done
  echo "threads: $(( $(date +%s) - start )) s"
fi
if has wgpu; then
  for i in $(seq 1 "${WGPU_PROCS:-8}"); do
    for b in wgpu_host_cost-base wgpu_host_cost; do
      HOST_COST_ROUNDS=1 timeout 60 .bin/$b raw-passes,raw-writes,raw-writes-labelled,gcw-passes,gcw-writes,gcw-profiled,wgpu-profiler \
        4096 20 > "$R/wgpu-$b-$i.txt" 2>&1
    done
  done
  for b in wgpu_host_cost-base wgpu_host_cost; do
    echo "== $b"; python3 scripts/host_cost_rounds.py --wgpu "$R"/wgpu-$b-[0-9]*.txt | grep -v "^$" | tail -10
  done
  echo "wgpu: $(( $(date +%s) - start )) s"
fi
if has bench; then
  for i in $(seq 1 "${BENCHES:-3}"); do
    timeout "${BENCH_TIMEOUT:-120}" .bin/gpu-counters bench --json --samples 4096 --reps "${BENCH_REPS:-7}" \
      ${WGPU_REPS:+--wgpu-reps $WGPU_REPS} ${HOST_REPS:+--host-reps $HOST_REPS} \
      ${WGPU_HOST_REPS:+--wgpu-host-reps $WGPU_HOST_REPS} --drift-seconds 5 \
      > "$R/bench-$i.json" 2> "$R/bench-$i.err"
    echo "bench $i: exit $?, $(( $(date +%s) - start )) s since the step began"
  done
  python3 scripts/bench_runs_h200.py "$R"/bench-[0-9]*.json | tail -8
  echo "bench: $(( $(date +%s) - start )) s"
fi
if has cuda; then
  export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  for i in $(seq 1 "${CUDA_BENCHES:-3}"); do
    timeout "${CUDA_TIMEOUT:-120}" .bin/gpu-counters bench --backend cuda --json --samples 4096 --reps 7 \
      --drift-seconds 2 > "$R/cuda-$i.json" 2> "$R/cuda-$i.err"
    echo "cuda $i: exit $?"
  done
  python3 scripts/bench_runs_h200.py "$R"/cuda-[0-9]*.json | tail -12
  echo "cuda: $(( $(date +%s) - start )) s"
fi
if has perf && [ -f .bin-perf/perf.tar.xz ]; then
  mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
  P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
  for b in $BUILDS; do
    P record -g -F 20000 -o /tmp/perf-$b.data .bin/$b profiler 4096 600 > "$R/perf-run-$b.txt" 2>&1
    P report -i /tmp/perf-$b.data --no-children --comm $b --sort dso,sym --stdio -g none 2>/dev/null \
      | grep -v '^$' | grep -v '^#' | head -80 > "$R/perf-self-$b.txt"
    P report -i /tmp/perf-$b.data --no-children --comm $b --sort dso --stdio -g none 2>/dev/null \
      | grep -v '^$' | grep -v '^#' | head -20 > "$R/perf-dso-$b.txt"
    echo "== perf $b"; cat "$R/perf-dso-$b.txt"; grep host_cost "$R/perf-self-$b.txt" | head -15 | cut -c1-150
  done
fi
if has wperf && [ -f .bin-perf/perf.tar.xz ]; then
  # The twentieth session's: where a profiled wgpu pass's host time goes
  # beyond the pass writes' (this build's wgpu_host_cost, one variant per
  # profile, self time of the recording thread by symbol).
  mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
  P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
  for v in raw-writes gcw-writes gcw-profiled; do
    P record -F 20000 -o "/tmp/perf-w-$v.data" .bin/wgpu_host_cost "$v" 4096 "${WPERF_ROUNDS:-30}" \
      > "$R/wperf-run-$v.txt" 2>&1
    P report -i "/tmp/perf-w-$v.data" --no-children --comm wgpu_host_cost --sort dso,sym --stdio 2>/dev/null \
      | grep -v '^$' | grep -v '^#' | head -100 > "$R/wperf-self-$v.txt"
    echo "== wperf $v"; head -25 "$R/wperf-self-$v.txt" | cut -c1-150
  done
fi
if has stat && [ -f .bin-perf/perf.tar.xz ]; then
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
fi
echo "total: $(( $(date +%s) - start )) s"
(cd "$OUT" && tar czf r.tar.gz r && rm -rf r)
