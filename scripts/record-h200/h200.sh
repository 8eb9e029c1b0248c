#!/usr/bin/env bash
# Runs issue 43's GPU checks of `gpu-counters record` on the H200: a probe,
# a smoke run, the training loop recorded and under torch.profiler, the
# overhead runs and a SIGINT'd run. Writes under $OUT (default ./out), at
# most 8 files: log.txt, smoke.json, smoke.pftrace, train-summary.json,
# train.pftrace, torch-profiler.json.gz, sigint.pftrace, overhead.jsonl.
# Needs gpu-counters and libgpu_counters_inject.so beside it (release
# builds), python3 with PyTorch, ncu. Then, on a machine with
# .venv-perfetto: scripts/record-h200/analyze.py OUT.
#
#   OUT=/tmp/out RUNS=5 bash h200.sh
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
T=$(mktemp -d)
L=$OUT/log.txt
R=${RUNS:-5}
export PYTHONUNBUFFERED=1
log() { echo "== $*" | tee -a "$L"; }
cd "$T"
log probe
{ uname -a; cat /proc/version; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm --format=csv;
  grep -i -E "profil|RmProfiling" /proc/driver/nvidia/params 2>&1;
  ls -la /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti* /usr/local/cuda*/extras/CUPTI/lib64/libcupti* 2>&1 | head;
  ldconfig -p | grep -i cupti; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; python3 -c "import torch,os;print(os.path.dirname(torch.__file__))";
  timeout 60 python3 "$B/probe.py"; } >> "$L" 2>&1
log smoke
GPU_COUNTERS_INJECT_DEBUG=1 timeout 120 "$B/gpu-counters" record -o "$OUT/smoke.pftrace" --json -- python3 "$B/probe.py" > "$OUT/smoke.json" 2>> "$L"; echo "exit $?" >> "$L"
log counters-permitted
timeout 90 ncu --metrics smsp__inst_executed.sum,dram__bytes_read.sum --cache-control none --clock-control none python3 -c "import torch; x=torch.ones(1<<24,device='cuda'); y=x*2; torch.cuda.synchronize()" 2>&1 | tail -12 >> "$L"
log train-record
GPU_COUNTERS_INJECT_DEBUG=1 timeout 180 "$B/gpu-counters" record -o "$OUT/train.pftrace" --json -- python3 "$B/train.py" --steps 20 --out "$T/rec.json" > "$OUT/train-summary.json" 2>> "$L"; echo "exit $?" >> "$L"
log train-profiler
timeout 180 python3 "$B/train.py" --steps 20 --profiler "$OUT/torch-profiler.json.gz" --out "$T/prof.json" >> "$L" 2>&1
log sigint
rm -f "$T/sig.txt"
# A background job of a script starts with SIGINT ignored: restore it.
python3 -c "import os,signal,sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])" \
  "$B/gpu-counters" record -o "$OUT/sigint.pftrace" -- python3 "$B/train.py" --steps 2000 --signal-file "$T/sig.txt" >> "$L" 2>&1 &
RP=$!
for i in $(seq 1 600); do grep -q "^step 12$" "$T/sig.txt" 2>/dev/null && break; sleep 0.05; done
kill -INT $RP; wait $RP; echo "record exit after SIGINT: $?" >> "$L"
log overhead
: > "$OUT/overhead.jsonl"
for r in $(seq 1 "$R"); do
  for mode in bare record profiler; do
    s=$(date +%s.%N)
    case $mode in
      bare) python3 "$B/train.py" --steps 30 --warmup 5 --out "$T/o.json" > /dev/null 2>> "$L" ;;
      record) "$B/gpu-counters" record -o "$T/o.pftrace" -- python3 "$B/train.py" --steps 30 --warmup 5 --out "$T/o.json" > /dev/null 2>> "$T/rec.log" ;;
      profiler) python3 "$B/train.py" --steps 30 --warmup 5 --profiler none --out "$T/o.json" > /dev/null 2>> "$L" ;;
    esac
    e=$(date +%s.%N)
    python3 -c "import json,sys; d=json.load(open('$T/o.json')); d.pop('step_s'); d.update(mode='$mode', run=$r, process_s=$e-$s); print(json.dumps(d))" >> "$OUT/overhead.jsonl"
    rm -f "$T/o.pftrace"
  done
done
tail -5 "$T/rec.log" >> "$L"
log done
