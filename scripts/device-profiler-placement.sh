#!/usr/bin/env bash
# The fifth session's H200 run (docs/h200-2026-12-01e/): the profiler test
# binaries, interleaved host_cost of the profiler against raw ash at its own
# placement (and of the primitives), and three runs of the bench. Build
# .bin/bins.tar.xz here first (the gpu-counters command, host_cost and the
# profiler test binaries), carry [".gl", ".bin"] and run this script there.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .bin && tar xJf bins.tar.xz && cd ..
R=$OUT/r; mkdir -p $R; nvidia-smi -L > $R/gpu.txt 2>&1
s=$(date +%s%N); for t in .bin/test-profiler-*; do echo "== $t"; timeout 60 $t 2>&1 | grep -E "^test result|FAILED|panicked" ; done > $R/tests.txt 2>&1; echo "tests $(( ($(date +%s%N)-s)/1000000 )) ms" >> $R/times.txt
for i in 1 2 3; do
 s=$(date +%s%N); timeout 45 .bin/host_cost raw-scopes,profiler,raw-scopes-top 4096 60 > $R/hc-profiler-$i.txt 2>&1; echo "hc-profiler-$i $? $(( ($(date +%s%N)-s)/1000000 )) ms" >> $R/times.txt
 timeout 30 .bin/host_cost raw-pass,scope-pairs 4096 60 > $R/hc-pairs-$i.txt 2>&1
 timeout 30 .bin/host_cost raw-precise,heap-precise 4096 60 > $R/hc-heap-$i.txt 2>&1
done
for b in 1 2 3; do s=$(date +%s%N); timeout 75 .bin/gpu-counters bench --json --samples 4096 --reps 7 --drift-seconds 5 > $R/bench-$b.json 2> $R/bench-$b.err; echo "bench-$b $? $(( ($(date +%s%N)-s)/1000000 )) ms" >> $R/times.txt; done
tar czf $OUT/all.tar.gz -C $OUT r; cat $R/times.txt; cat $R/tests.txt | tail -30; for f in $R/hc-*.txt; do tail -n 3 $f; done
