#!/bin/bash
# Instructions per pass of each wgpu_host_cost variant's record and
# read-back phases, all variants in one process taking turns (one heap and
# one wgpu device, as in the bench), under callgrind.
#
#   cargo build --release -p gpu-counters-bench --example wgpu_host_cost
#   HOST_COST_EMPTY=1 bash scripts/wgpu_callgrind_phases.sh \
#       raw-passes,raw-writes,raw-writes-labelled,gcw-passes,gcw-writes,gcw-profiled 1024 8
#
# Arguments: VARIANTS N ROUNDS [OUT] (OUT: the callgrind file, /tmp/wgpu-phases.out
# by default). Prints, per variant, the inclusive instructions of its
# record_phase_* and resolve_phase_* functions over N * ROUNDS passes.
set -euo pipefail
variants=$1 n=$2 rounds=$3 out=${4:-/tmp/wgpu-phases.out}
bin=${BIN:-target/release/examples/wgpu_host_cost}
valgrind --tool=callgrind --cache-sim=no --collect-atstart=no \
    --toggle-collect='wgpu_host_cost::record_phase_*' \
    --toggle-collect='wgpu_host_cost::resolve_phase_*' \
    --callgrind-out-file="$out" "$bin" "$variants" "$n" "$rounds" >/dev/null 2>&1
callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null |
    python3 -c '
import re, sys
passes = int(sys.argv[1]) * int(sys.argv[2])
phases = {}
for line in sys.stdin:
    m = re.search(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\S*?wgpu_host_cost::(record|resolve)_phase_([a-z_]+) ", line)
    if m:
        phases.setdefault(m.group(3), {})[m.group(2)] = int(m.group(1).replace(",", "")) / passes
for name in sorted(phases):
    p = phases[name]
    rec, res = p.get("record", 0.0), p.get("resolve", 0.0)
    print(f"{name:22s} record {rec:9.1f} resolve {res:8.1f} total {rec + res:9.1f}")
' "$n" "$rounds"
