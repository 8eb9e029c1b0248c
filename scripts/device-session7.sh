#!/usr/bin/env bash
# The seventh session's H200 call (docs/h200-2026-12-02b/): every test
# binary, the demos and three benches (scripts/device-all.sh with
# STEPS="cuda wgpu vulkan demo bench" BENCHES=3 REPS=7), then, taking turns
# with the build before this session (the `-old` binaries, aa9e6fd):
# where a CPU resolve of 1,000,000 timestamps goes (query_read_paths, and
# core's own part with resolve_layout), the CUDA bench on GPU-bound kernels
# (5 and 20 us; with CUDA_GPU_ROWS=1, as in the first call), and the
# profiler against raw ash (host_cost, five processes each). Build with scripts/device-build.sh, copy
# query_read_paths, host_cost, resolve_layout and the -old binaries into .bin/ (strip
# --strip-debug), carry [".gl", ".bin"].
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-"cuda wgpu vulkan demo bench"} BENCHES=${BENCHES:-3} REPS=${REPS:-7} bash scripts/device-all.sh
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
X=$OUT/x; mkdir -p "$X"
for i in 1 2; do
  for b in query_read_paths-old query_read_paths; do
    timeout 60 .bin/$b 1000000 9 > "$X/qrp-$b-$i.txt" 2>&1
  done
done
for a in "100000 atomic" "1000000 copied"; do
  timeout 60 .bin/resolve_layout $a >> "$X/resolve-layout.txt" 2>&1
done
if [ -n "${CUDA_GPU_ROWS:-}" ]; then
  for ns in 5000 20000; do
    for b in gpu-counters-old gpu-counters; do
      timeout 90 .bin/$b bench --backend cuda --samples 4000 --reps 3 --kernel-ns $ns --drift-seconds 0 --resolve-samples 1000000 > "$X/cuda-$ns-$b.txt" 2>&1
    done
  done
fi
for i in 1 2 3 4 5; do
  for b in host_cost-old host_cost; do
    timeout 60 .bin/$b raw-scopes,profiler 4096 60 > "$X/hc-$b-$i.txt" 2>&1
  done
done
(cd "$OUT" && tar czf x.tar.gz x && rm -rf x)
tar xzf "$OUT/all.tar.gz" -O summary.txt
for f in $(tar tzf "$OUT/x.tar.gz" | grep txt); do echo "== $f"; tar xzf "$OUT/x.tar.gz" -O "$f" | grep -E "resolve_into|driver 16|parts, pool|memcpy|ratio to copy|precise after each kernel / raw %globaltimer|host ratio per round|timestamps \(" | head -8; done
