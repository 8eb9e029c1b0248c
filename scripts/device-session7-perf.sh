#!/usr/bin/env bash
# The seventh session's perf of host_cost profiler and raw-scopes on the H200 (perf
# carried in .bin-perf/perf.tar.xz, as scripts/device-profiler-perf.sh).
# Carry [".gl", ".bin", ".bin-perf"]; .bin/host_cost with its symbols.
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
R=$OUT/r; mkdir -p $R
for v in profiler raw-scopes; do
  P record -F 20000 -o /tmp/perf-$v.data .bin/host_cost $v 4096 1500 > $R/run-$v.txt 2>&1
  P report -i /tmp/perf-$v.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -70 > $R/self-$v.txt
  P report -i /tmp/perf-$v.data --no-children --sort dso --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -12 > $R/dso-$v.txt
done
for sym in $(P report -i /tmp/perf-profiler.data --no-children --sort sym --stdio --dsos host_cost 2>/dev/null | grep -v "^#" | grep "%" | head -8 | awk '{print $3}'); do
  P annotate -i /tmp/perf-profiler.data --stdio --dsos host_cost "$sym" 2>/dev/null | grep -E "^\s+[0-9]+\.[0-9]+ " | sort -rn | head -25 > "$R/ann-$(echo $sym | md5sum | cut -c1-8).txt"; echo "$sym" >> "$R/ann-$(echo $sym | md5sum | cut -c1-8).txt"
done
tar czf $OUT/perf.tar.gz -C $OUT r
for v in profiler raw-scopes; do echo "== $v"; tail -n 2 $R/run-$v.txt; cut -c1-150 $R/dso-$v.txt; head -40 $R/self-$v.txt | cut -c1-170; done
