#!/usr/bin/env bash
# The sixth session's first H200 call (docs/h200-2026-12-02/): the profiler,
# CUDA and wgpu test binaries at the recorder-held scope state, then the
# profiler against raw ash at its own placement, interleaved in one process,
# for the build before (host_cost_old, aa8a093) and after, three processes
# each taking turns, and perf of one profiler process of each build. Build
# .bin/bins.tar.xz here first (host_cost, host_cost_old and the test
# binaries), carry [".gl", ".bin"] and run this script there.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd .bin && tar xJf bins.tar.xz && cd ..
R=$OUT/r; mkdir -p $R; nvidia-smi -L > $R/gpu.txt 2>&1
t() { local name=$1 limit=$2; shift 2; local s=$(date +%s%N); timeout -s KILL $limit "$@" > $R/$name.txt 2>&1; echo "$name exit $? $(( ($(date +%s%N)-s)/1000000 )) ms $(grep -E '^test result' $R/$name.txt | tail -1)" >> $R/times.txt; }
for b in fake gpu_counters_profiler multi_fake multi_vulkan profiler recorder_scopes sink tracy export; do t test-profiler-$b 90 .bin/test-profiler-$b --test-threads=1; done
t test-cuda-cuda 120 .bin/test-cuda-cuda --test-threads=1
t test-cuda-activity 120 .bin/test-cuda-activity --test-threads=1
t test-wgpu-lavapipe 120 .bin/test-wgpu-lavapipe --test-threads=1
for i in 1 2 3; do
  t hc-old-$i 60 .bin/host_cost_old raw-scopes,profiler 4096 60
  t hc-new-$i 60 .bin/host_cost raw-scopes,profiler 4096 60
done
for b in host_cost_old host_cost; do
  perf record -F 20000 -o $R/perf-$b.data .bin/$b profiler 4096 1500 > $R/perf-run-$b.txt 2>&1
  perf report -i $R/perf-$b.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^$" | head -70 > $R/perf-self-$b.txt
  rm -f $R/perf-$b.data
done
tar czf $OUT/all.tar.gz -C $OUT r; cat $R/times.txt; for f in $R/hc-*.txt; do echo "== $f"; tail -n 3 $f; done; head -25 $R/perf-self-host_cost.txt | cut -c1-150
