#!/usr/bin/env bash
# Builds what scripts/device-session12.sh runs into .bin/bins.tar.xz: the
# Vulkan, profiler and core test binaries, host_cost, conversion_cost and
# the gpu-counters command of this checkout, and host_cost and
# conversion_cost of `BASE` (default 515afb6, the twelfth session's start),
# built in a worktree under /tmp with this checkout's conversion_cost.rs
# and host_cost.rs (both use only the public API; since the fourteenth
# session host_cost also times `end_frame`).
# For a time profile there, also pack this machine's perf:
#   PERF=1 bash scripts/device-build-session12.sh   (.bin-perf/perf.tar.xz)
# DIAG="a b" adds those prebuilt binaries too (as host_cost-diag-<name>),
# for device-session12.sh's `diag` step; the thirteenth session's were
# host_cost built with per-phase timers (not committed).
# WGPU=1 (the nineteenth session) adds wgpu_host_cost of this checkout and
# of BASE (as wgpu_host_cost-base, built with this checkout's
# wgpu_host_cost.rs, which uses only the public API) and the wgpu crate's
# test binary. Since the twenty-second session it also builds
# threaded_cost of this checkout and of BASE (with this checkout's
# threaded_cost.rs, public API only).
# The thirteenth session ran it with BASE=43538ef, the fourteenth with
# BASE=4a26989, the nineteenth with BASE=5d89055 WGPU=1.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-515afb6}
T=${CARGO_TARGET_DIR:-target}
rm -rf .bin && mkdir -p .bin
cargo build --release -p gpu-counters-bench --example host_cost --example threaded_cost \
  -p gpu-counters-cli --bin gpu-counters -p gpu-counters-core --example conversion_cost
cp "$T/release/examples/host_cost" "$T/release/examples/threaded_cost" \
  "$T/release/examples/conversion_cost" "$T/release/gpu-counters" .bin/
WGPU_TESTS=${WGPU:+-p gpu-counters-wgpu}
cargo test --release --no-run -p gpu-counters-vulkan -p gpu-counters-profiler -p gpu-counters-core \
  $WGPU_TESTS --message-format=json 2>/dev/null | python3 scripts/copy_test_bins.py .bin --no-examples
if [ -n "${WGPU:-}" ]; then
  cargo build --release -p gpu-counters-bench --example wgpu_host_cost
  cp "$T/release/examples/wgpu_host_cost" .bin/
fi
wt=/tmp/gpu-counters-base-$BASE
[ -d "$wt" ] || git worktree add -f "$wt" "$BASE"
cp crates/core/examples/conversion_cost.rs "$wt/crates/core/examples/"
cp crates/bench/examples/host_cost.rs crates/bench/examples/threaded_cost.rs "$wt/crates/bench/examples/"
EXTRA=
if [ -n "${WGPU:-}" ]; then
  cp crates/bench/examples/wgpu_host_cost.rs "$wt/crates/bench/examples/"
  EXTRA=wgpu_host_cost
fi
(cd "$wt" && CARGO_TARGET_DIR=/tmp/gpu-counters-base-target cargo build --release \
  -p gpu-counters-bench --example host_cost --example threaded_cost \
  -p gpu-counters-core --example conversion_cost ${EXTRA:+--example $EXTRA})
for b in host_cost threaded_cost conversion_cost $EXTRA; do
  cp "/tmp/gpu-counters-base-target/release/examples/$b" ".bin/$b-base"
done
for d in ${DIAG:-}; do cp "$d" ".bin/host_cost-diag-$(basename "$d")"; done
# Symbols kept (debug info dropped) for perf reports there.
strip --strip-debug .bin/* 2>/dev/null || true
(cd .bin && tar cJf bins.tar.xz --remove-files $(ls | grep -v bins.tar.xz))
if [ -n "${PERF:-}" ]; then
  p=/tmp/perf-pkg && rm -rf "$p" && mkdir -p "$p/lib" && cp "$(command -v perf)" "$p/"
  for l in $(ldd "$(command -v perf)" | awk '/=>/{print $3}' | grep -v -E 'libc.so|libm.so|ld-linux'); do
    cp -L "$l" "$p/lib/"
  done
  mkdir -p .bin-perf && tar cJf .bin-perf/perf.tar.xz -C "$p" .
fi
du -sh .bin .bin-perf 2>/dev/null || true; tar tJf .bin/bins.tar.xz | tr '\n' ' '; echo
