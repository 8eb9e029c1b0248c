#!/usr/bin/env bash
# The sixth session's perf of one profiler scope on the H200 (host_cost's
# profiler loop, before = host_cost_old at aa8a093, after = host_cost), with
# perf carried in .bin-perf/perf.tar.xz (this machine's /usr/bin/perf and its
# libraries), then host_cost of both builds taking turns with raw ash.
# Carry [".gl", ".bin", ".bin-perf"].
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .bin && tar xJf bins.tar.xz && cd ..
mkdir -p /tmp/perf && tar xJf .bin-perf/perf.tar.xz -C /tmp/perf
P() { LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf "$@"; }
R=$OUT/r; mkdir -p $R
for b in host_cost_old host_cost; do
  P record -F 20000 -o /tmp/perf-$b.data .bin/$b profiler 4096 1500 > $R/perf-run-$b.txt 2>&1
  P report -i /tmp/perf-$b.data --no-children --sort dso,sym --stdio 2>>$R/perf-run-$b.txt | grep -v "^$" | grep -v "^#" | head -60 > $R/perf-self-$b.txt
  P report -i /tmp/perf-$b.data --no-children --sort dso --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -12 > $R/perf-dso-$b.txt
done
for i in 1 2 3 4 5; do
  timeout 60 .bin/host_cost_old raw-scopes,profiler 4096 60 > $R/hc-old-$i.txt 2>&1
  timeout 60 .bin/host_cost raw-scopes,profiler 4096 60 > $R/hc-new-$i.txt 2>&1
done
tar czf $OUT/all.tar.gz -C $OUT r; for f in $R/hc-*.txt; do echo "$(basename $f) $(tail -n 1 $f)"; done; for b in host_cost_old host_cost; do echo "== $b"; cat $R/perf-dso-$b.txt | cut -c1-100; head -30 $R/perf-self-$b.txt | cut -c1-200; done; tail -3 $R/perf-run-host_cost.txt
