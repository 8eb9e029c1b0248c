#!/usr/bin/env bash
# Builds release binaries for a run on the GPU machine (which has no Rust
# toolchain) into .bin/: the gpu-counters command and the GPU test binaries.
# Pair with scripts/device-run.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .bin
cargo build --release -p gpu-counters-cli
cp "${CARGO_TARGET_DIR:-target}/release/gpu-counters" .bin/
rm -f .bin/test-* .bin/bins.tar.xz
cargo test --release --no-run -p gpu-counters-vulkan -p gpu-counters-profiler -p gpu-counters-workloads -p gpu-counters-wgpu -p gpu-counters-cuda \
  --message-format=json 2>/dev/null \
  | python3 scripts/copy_test_bins.py .bin
strip .bin/* 2>/dev/null || true
# The loose binaries exceed what a run may carry (64 MiB): ship them packed.
(cd .bin && tar cJf bins.tar.xz --remove-files $(ls | grep -v bins.tar.xz))
du -sh .bin; tar tJf .bin/bins.tar.xz | tr '\n' ' '; echo
