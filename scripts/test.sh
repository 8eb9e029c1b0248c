#!/usr/bin/env bash
# Runs every test on a fresh Debian 12 / Ubuntu machine with a Rust toolchain
# (1.87 or later), from any directory:
#   1. the core model's tests, and the profiler's and exporters' tests on the
#      fake backend (CPU only, scripted), before anything is installed: they
#      need no Vulkan loader, driver or GPU; and a check that BENCHMARKS.md
#      (and README.md's cost table) is what scripts/benchmarks.py generates
#      from docs/bench/;
#   2. scripts/setup.sh: the Vulkan loader, lavapipe, the Khronos validation
#      layer and fonts, with apt-get (needs root or sudo);
#   3. the whole workspace's tests, GPU tests on lavapipe (or any Vulkan
#      driver present) under the validation layer: any validation message
#      fails a test;
#   4. the CUDA backend's tests with their output shown: without a CUDA
#      driver each GPU test prints one line saying it skipped;
#   5. the wgpu backend's tests again on its portable path (without its
#      `vulkan` feature: no wgpu-hal, as on every non-Vulkan wgpu backend).
# Once set up, `cargo test --workspace --locked` alone runs step 3.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== 1/5 core, and the profiler and exporters on the fake backend, before installing anything"
# BENCHMARKS.md is generated from docs/bench/: it must match (Python 3's
# standard library only; on a machine without python3 yet, after setup).
if command -v python3 >/dev/null; then python3 scripts/benchmarks.py --check; else bench_check_later=1; fi
cargo test --locked -p gpu-counters-core
cargo test --locked -p gpu-counters-profiler --lib --test fake
if ldconfig -p 2>/dev/null | grep libvulkan.so.1 >/dev/null; then
  echo "core and fake-backend tests passed; they use no Vulkan loader or driver (this machine already has a loader)"
else
  echo "core and fake-backend tests passed with no Vulkan loader installed: they need none"
fi

echo "== 2/5 scripts/setup.sh"
bash scripts/setup.sh
if [ -n "${bench_check_later:-}" ]; then python3 scripts/benchmarks.py --check; fi

echo "== 3/5 cargo test --workspace --locked"
cargo test --workspace --locked

echo "== 4/5 the CUDA backend's tests again, their output shown (each GPU test says so where it skips: no CUDA driver)"
# The binary step 3 built (asking cargo for it rebuilds nothing; building
# the package alone would, with other features).
cuda_tests=$(cargo test --workspace --locked --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["package_id"].split("#")[0].endswith("/cuda") and m["target"]["kind"] == ["test"]:
        print(m["executable"])
')
for t in $cuda_tests; do "$t" --nocapture --test-threads=1; done

echo "== 5/5 the wgpu backend on its portable path (no wgpu-hal)"
cargo test --locked -p gpu-counters-wgpu --no-default-features --features profiler
