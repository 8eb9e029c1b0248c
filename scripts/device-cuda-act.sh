#!/usr/bin/env bash
# One H200 call for issue 10's zero-intrusion, calibration and bench work.
# Here: build (debug test binaries, release CLI), copy into a carried folder
# with this script and the probe, then on the device machine:
#   cd <folder> && bash device-cuda-act.sh
# Every step has its own time limit; everything lands in $OUT as one
# archive (a call brings back at most 8 files).
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
O=${OUT:-/tmp/out}; mkdir -p "$O"
[ -f bins.tar.xz ] && tar xJf bins.tar.xz
step() { # step NAME LIMIT COMMAND...
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s%N)
  timeout -s KILL "$limit" "$@" > "$O/$name.txt" 2>&1; local rc=$?
  printf '%-16s exit %3s %7s ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" \
    "$(grep -E '^test result' "$O/$name.txt" | tail -1)" | tee -a "$O/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
for s in ${STEPS:-tests bench}; do case $s in
tests)
  step t-activity 60 ./t-activity --test-threads=1 --nocapture
  step t-cuda 40 ./t-cuda --test-threads=1 --nocapture
  step t-bench 40 ./t-bench cuda_backend --test-threads=1 --nocapture
  ;;
bench)
  step bench-tiny 60 ./gpu-counters bench --backend cuda --samples 4000 --reps 5 --drift-seconds 3 --resolve-samples 100000
  step bench-5us 30 ./gpu-counters bench --backend cuda --samples 4000 --reps 3 --kernel-ns 5000 --drift-seconds 0 --resolve-samples 1000
  step bench-20us 50 ./gpu-counters bench --backend cuda --samples 4000 --reps 3 --kernel-ns 20000 --drift-seconds 0 --resolve-samples 1000
  ;;
probe)
  step probe 60 ./probe monotonic
  ;;
esac; done
(cd "$O" && tar czf all.tar.gz --exclude all.tar.gz ./* && find . -mindepth 1 -not -name all.tar.gz -not -name summary.txt -delete)
