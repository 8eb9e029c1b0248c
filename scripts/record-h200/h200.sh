#!/usr/bin/env bash
# Runs issue 43's GPU checks of `gpu-counters record` on the H200: a probe,
# a smoke run, the training loop recorded and under torch.profiler, a
# SIGINT'd run, GPU metrics (PM sampling) of a copy, an FMA and a matmul
# phase, per-kernel counters against ncu, the metric checks' exits, and the
# overhead runs (bare, record, record --gpu-metrics, torch.profiler).
# Writes under $OUT (default ./out) 8 files: log.txt, results.jsonl,
# train-summary.json, train.pftrace, torch-profiler.json.gz, sigint.pftrace,
# metrics.pftrace, counters.pftrace. Needs gpu-counters and
# libgpu_counters_inject.so beside it (release builds), python3 with
# PyTorch and CuPy, ncu. Then, on a machine with .venv-perfetto:
# scripts/record-h200/analyze.py OUT (pass/fail lines with the numbers).
#
#   OUT=/tmp/out RUNS=5 MRUNS=3 bash h200.sh
# RUNS runs each of bare, record and torch.profiler, MRUNS of record
# --gpu-metrics (at least 3 for a median). Not yet timed on the GPU: plan
# for about 5 minutes with RUNS=2.
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
T=$(mktemp -d)
L=$OUT/log.txt
J=$OUT/results.jsonl
R=${RUNS:-5}
MR=${MRUNS:-3}
G="$B/gpu-counters"
export PYTHONUNBUFFERED=1
log() { echo "== $*" | tee -a "$L"; }
# One JSON line into results.jsonl: check name, then key=value pairs whose
# values are JSON (numbers, strings quoted by the caller) or file contents.
jline() { python3 -c 'import json,sys; d={"check":sys.argv[1]}; [d.__setitem__(k, json.loads(v)) for k,v in (a.split("=",1) for a in sys.argv[2:])]; print(json.dumps(d))' "$@" >> "$J"; }
jstr() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'; }
jfile() { if [ -s "$1" ]; then cat "$1"; else echo null; fi; }
cd "$T"
: > "$J"
log probe
{ uname -a; cat /proc/version; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm --format=csv;
  grep -i -E "profil|RmProfiling" /proc/driver/nvidia/params 2>&1;
  ls -la /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti* /usr/local/cuda*/extras/CUPTI/lib64/libcupti* 2>&1 | head;
  ldconfig -p | grep -i cupti; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; python3 -c "import torch,os;print(os.path.dirname(torch.__file__))";
  timeout 60 python3 "$B/probe.py"; } >> "$L" 2>&1
log smoke
GPU_COUNTERS_INJECT_DEBUG=1 timeout 120 "$G" record -o "$T/smoke.pftrace" --json -- python3 "$B/probe.py" > "$T/smoke.json" 2>> "$L"; echo "exit $?" >> "$L"
jline smoke-summary "summary=$(jfile "$T/smoke.json")"
log counters-permitted
timeout 90 ncu --metrics smsp__inst_executed.sum,dram__bytes_read.sum --cache-control none --clock-control none python3 -c "import torch; x=torch.ones(1<<24,device='cuda'); y=x*2; torch.cuda.synchronize()" 2>&1 | tail -12 >> "$L"
log train-record
GPU_COUNTERS_INJECT_DEBUG=1 timeout 180 "$G" record -o "$OUT/train.pftrace" --json -- python3 "$B/train.py" --steps 20 --out "$T/rec.json" > "$OUT/train-summary.json" 2>> "$L"; echo "exit $?" >> "$L"
log train-profiler
timeout 180 python3 "$B/train.py" --steps 20 --profiler "$OUT/torch-profiler.json.gz" --out "$T/prof.json" >> "$L" 2>&1
log sigint
rm -f "$T/sig.txt"
# A background job of a script starts with SIGINT ignored: restore it.
python3 -c "import os,signal,sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])" \
  "$G" record -o "$OUT/sigint.pftrace" -- python3 "$B/train.py" --steps 2000 --signal-file "$T/sig.txt" >> "$L" 2>&1 &
RP=$!
for i in $(seq 1 600); do grep -q "^step 12$" "$T/sig.txt" 2>/dev/null && break; sleep 0.05; done
kill -INT $RP; wait $RP; echo "record exit after SIGINT: $?" >> "$L"

log list-gpu-metrics
timeout 60 "$G" record --list-gpu-metrics > "$T/list.txt" 2>> "$L"; echo "exit $?" >> "$L"
head -3 "$T/list.txt" >> "$L"; grep -c "" "$T/list.txt" >> "$L"
jline list-gpu-metrics "head=$(head -4 "$T/list.txt" | jstr)" "lines=$(grep -c "" "$T/list.txt")"
grep -E "dram__|sm__throughput|sm__cycles_active|inst_executed_realtime|tensor" "$T/list.txt" | head -40 >> "$L"

log metric-checks
# Before the program starts: an unknown metric, a multi-pass set without
# --replay kernel, an unknown PM metric; each must exit 2 naming it.
for c in "--counters bogus__no_such_metric.sum" \
         "--counters smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed" \
         "--gpu-metric bogus__no_such_metric.sum"; do
  timeout 60 "$G" record --summary-only $c -- true > /dev/null 2> "$T/e.txt"; code=$?
  cat "$T/e.txt" >> "$L"
  jline metric-check "args=$(echo "$c" | jstr)" "code=$code" "stderr=$(jstr < "$T/e.txt")"
done

log gpu-metrics
GPU_COUNTERS_INJECT_DEBUG=1 timeout 120 "$G" record -o "$OUT/metrics.pftrace" --json --gpu-metrics -- python3 "$B/checks.py" pm > "$T/pm-summary.json" 2> "$T/pm.err"; echo "exit $?" >> "$L"
cat "$T/pm.err" >> "$L"
jline pm-summary "summary=$(jfile "$T/pm-summary.json")"
grep '"check"' "$T/pm.err" >> "$J"

log counters
CSET=smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
REPLAY=""
timeout 60 "$G" record --summary-only --counters $CSET -- true > /dev/null 2> "$T/e.txt" || { grep -q "passes" "$T/e.txt" && REPLAY="--replay kernel"; }
cat "$T/e.txt" >> "$L"
GPU_COUNTERS_INJECT_DEBUG=1 timeout 120 "$G" record -o "$OUT/counters.pftrace" --json --counters $CSET $REPLAY -- python3 "$B/checks.py" counters > "$T/c-summary.json" 2> "$T/c.err"; echo "exit $?" >> "$L"
cat "$T/c.err" >> "$L"
jline counters-summary "replay=$(echo "$REPLAY" | jstr)" "summary=$(jfile "$T/c-summary.json")"
grep '"check"' "$T/c.err" >> "$J"
# Kernel replay of a set of several passes: every kernel still measured.
timeout 120 "$G" record --summary-only --json --counters sm__throughput.avg.pct_of_peak_sustained_elapsed,$CSET --replay kernel -- python3 "$B/checks.py" counters > "$T/r-summary.json" 2>> "$L"; echo "exit $?" >> "$L"
jline replay-summary "summary=$(jfile "$T/r-summary.json")"
log ncu
timeout 150 ncu --csv --print-units base --cache-control none --clock-control none -k "regex:copy_kernel|fma_kernel|MulFunctor" --metrics $CSET python3 "$B/checks.py" counters > "$T/ncu.csv" 2>> "$L"; echo "exit $?" >> "$L"
python3 - "$T/ncu.csv" >> "$J" <<'EOF'
import csv, json, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
for r in csv.DictReader(rows):
    v = r.get("Metric Value", "").replace(",", "")
    try:
        v = float(v)
    except ValueError:
        v = None
    print(json.dumps({"check": "ncu", "id": r.get("ID"), "kernel": r.get("Kernel Name"),
                      "metric": r.get("Metric Name"), "unit": r.get("Metric Unit"), "value": v}))
EOF
grep -c '"check": "ncu"' "$J" >> "$L"

log overhead
for r in $(seq 1 $(( R > MR ? R : MR ))); do
  for mode in bare record metrics profiler; do
    # RUNS runs of each mode, MRUNS of record --gpu-metrics.
    if [ "$mode" = metrics ]; then [ "$r" -le "$MR" ] || continue; else [ "$r" -le "$R" ] || continue; fi
    s=$(date +%s.%N)
    case $mode in
      bare) python3 "$B/train.py" --steps 30 --warmup 5 --out "$T/o.json" > /dev/null 2>> "$L" ;;
      record) "$G" record -o "$T/o.pftrace" -- python3 "$B/train.py" --steps 30 --warmup 5 --out "$T/o.json" > /dev/null 2>> "$T/rec.log" ;;
      metrics) "$G" record -o "$T/o.pftrace" --gpu-metrics -- python3 "$B/train.py" --steps 30 --warmup 5 --out "$T/o.json" > /dev/null 2>> "$T/rec.log" ;;
      profiler) python3 "$B/train.py" --steps 30 --warmup 5 --profiler none --out "$T/o.json" > /dev/null 2>> "$L" ;;
    esac
    e=$(date +%s.%N)
    python3 -c "import json,sys; d=json.load(open('$T/o.json')); d.pop('step_s'); d.update(check='overhead', mode='$mode', run=$r, process_s=$e-$s); print(json.dumps(d))" >> "$J"
    rm -f "$T/o.pftrace" "$T/o.json"
  done
done
tail -5 "$T/rec.log" >> "$L"
log done
