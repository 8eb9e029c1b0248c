#!/usr/bin/env bash
# Builds what scripts/device-session11.sh runs into .bin/bins.tar.xz: the
# Vulkan and profiler test binaries, host_cost and the gpu-counters command
# of this checkout, and
# host_cost of `BASE` (default 4f12e10), built in a worktree under /tmp
# (or HOST_COST_BASE: a host_cost binary built at that commit already).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-4f12e10}
rm -rf .bin && mkdir -p .bin
cargo build --release -p gpu-counters-bench --example host_cost -p gpu-counters-cli
cp "${CARGO_TARGET_DIR:-target}/release/examples/host_cost" .bin/host_cost
cp "${CARGO_TARGET_DIR:-target}/release/gpu-counters" .bin/gpu-counters
cargo test --release --no-run -p gpu-counters-vulkan -p gpu-counters-profiler --message-format=json 2>/dev/null \
  | python3 scripts/copy_test_bins.py .bin --no-examples
if [ -n "${HOST_COST_BASE:-}" ]; then
  cp "$HOST_COST_BASE" .bin/host_cost-base
else
  wt=/tmp/gpu-counters-base-$BASE
  [ -d "$wt" ] || git worktree add -f "$wt" "$BASE"
  (cd "$wt" && CARGO_TARGET_DIR=/tmp/gpu-counters-base-target cargo build --release -p gpu-counters-bench --example host_cost)
  cp /tmp/gpu-counters-base-target/release/examples/host_cost .bin/host_cost-base
fi
strip .bin/* 2>/dev/null || true
(cd .bin && tar cJf bins.tar.xz --remove-files $(ls | grep -v bins.tar.xz))
du -sh .bin; tar tJf .bin/bins.tar.xz | tr '\n' ' '; echo
