#!/usr/bin/env bash
# Runs every test on a fresh Debian 12 / Ubuntu machine with a Rust toolchain
# (1.87 or later), from any directory:
#   1. the hal crate's tests, and the profiler's and exporters' tests on the
#      fake backend (CPU only, scripted), and their criterion benches once
#      each, before anything is installed: they need no Vulkan loader,
#      driver or GPU; and a check that BENCHMARKS.md
#      (and README.md's cost table) is what scripts/benchmarks.py generates
#      from docs/bench/;
#   2. scripts/setup.sh: the Vulkan loader, lavapipe, the Khronos validation
#      layer and fonts, with apt-get (needs root or sudo);
#   3. the whole workspace's tests, GPU tests on lavapipe (or any Vulkan
#      driver present) under the validation layer: any validation message
#      fails a test; then the `gpu-counters` crate's examples, as built
#      there, run under the layer with their output checked;
#   4. the CUDA backend's tests with their output shown: without a CUDA
#      driver each GPU test prints one line saying it skipped;
#   5. the wgpu backend's tests again on its portable path (without its
#      `vulkan` feature: no wgpu-hal, as on every non-Vulkan wgpu backend).
#   6. cross-platform: `cargo check` of the libraries a wgpu user adds for
#      Windows (x86_64-pc-windows-gnu) and macOS (aarch64-apple-darwin), and
#      the hal and fake-backend profiler tests built for Windows and run
#      under Wine (installs the targets, mingw-w64 and Wine: setup.sh --cross).
# Once set up, `cargo test --workspace --locked` alone runs step 3.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== 1/6 hal, and the profiler and exporters on the fake backend, before installing anything"
# BENCHMARKS.md is generated from docs/bench/: it must match (Python 3's
# standard library only; on a machine without python3 yet, after setup).
if command -v python3 >/dev/null; then python3 scripts/benchmarks.py --check; else bench_check_later=1; fi
cargo test --locked -p gpu-counters-hal
# The criterion benches (benches/) once each, in criterion's test mode.
cargo test --locked -p gpu-counters-hal --benches
cargo test --locked -p gpu-counters-profiler --lib --test fake --bench scopes
if ldconfig -p 2>/dev/null | grep libvulkan.so.1 >/dev/null; then
  echo "hal and fake-backend tests passed; they use no Vulkan loader or driver (this machine already has a loader)"
else
  echo "hal and fake-backend tests passed with no Vulkan loader installed: they need none"
fi

echo "== 2/6 scripts/setup.sh"
bash scripts/setup.sh
if [ -n "${bench_check_later:-}" ]; then python3 scripts/benchmarks.py --check; fi

echo "== 3/6 cargo test --workspace --locked"
cargo test --workspace --locked
# The wgpu-profiler port, three ways, on lavapipe (built by the step above).
for example in unprofiled with_wgpu_profiler with_gpu_counters; do
  cargo run --locked -q -p wgpu-profiler-port --example "$example" | tail -n 3
done

# The binaries step 3 built (asking cargo for them rebuilds nothing; building
# a package alone would, with other features): "<crate dir> <kind> <name>
# <path>" per executable.
built=$(cargo test --workspace --locked --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        crate = m["package_id"].split("#")[0].rsplit("/", 1)[-1]
        print(crate, m["target"]["kind"][0], m["target"]["name"], m["executable"])
')
# Runs a gpu-counters example with its arguments, its output shown and kept
# in $out; fails if it was not built or exits non-zero.
run_example() { # name args...
  local name=$1 exe; shift
  exe=$(awk -v n="$name" '$1 == "gpu-counters" && $2 == "example" && $3 == n { print $4 }' <<<"$built")
  [ -n "$exe" ] || { echo "FAIL: step 3 built no example $name"; exit 1; }
  out=$("$exe" "$@" 2>&1) || { printf '%s\n' "$out"; echo "FAIL: $name exited non-zero"; exit 1; }
  printf '%s\n' "$out"
}
# Fails with the example's output and what it lacked.
expect() { # name output pattern...
  local name=$1 out=$2; shift 2
  for p in "$@"; do
    grep -Eq -- "$p" <<<"$out" || { printf '%s\n' "$out"; echo "FAIL: $name printed no line matching /$p/"; exit 1; }
  done
}

echo "== 3/6 (continued) the gpu-counters examples on this driver, under the validation layer (any message fails them)"
export GPU_COUNTERS_VALIDATION=1
# Both timestamps written, a duration with its bound, and exactly the
# invocations dispatched counted (lavapipe has pipeline statistics).
run_example vulkan_pass
expect vulkan_pass "$out" '^timestamp 0: Written, [0-9]+ ticks$' '^timestamp 1: Written, [0-9]+ ticks$' \
  '^compute pass: [0-9]+ ns ± [0-9]+ ns ' '^compute invocations: ([1-9][0-9]*) \(dispatched \1\)$'
# Four frames of one "frame" scope holding two "clear" scopes, each with a
# time and bound; the three files hold those twelve scopes.
exports=$(mktemp -d)
run_example profiler_export "$exports"
for f in 0 1 2 3; do
  expect profiler_export "$out" "^frame $f frame: [0-9]+ ns ± [0-9]+ ns$" \
    "^frame $f   clear small: [0-9]+ ns ± [0-9]+ ns$" "^frame $f   clear large: [0-9]+ ns ± [0-9]+ ns$"
done
[ "$(grep -c ' ns ± ' <<<"$out")" = 12 ] || { echo "FAIL: profiler_export: not 12 scopes"; exit 1; }
python3 - "$exports" <<'PY'
import collections, json, sys, xml.etree.ElementTree as xml
d = sys.argv[1]
events = json.load(open(f"{d}/trace.json"))["traceEvents"]
spans = collections.Counter(e["name"] for e in events if e["ph"] == "X")
want = {"frame": 4, "clear small": 4, "clear large": 4}
assert all(spans[k] == n for k, n in want.items()), f"trace.json spans: {spans}"
svg = open(f"{d}/timeline.svg").read()
assert xml.fromstring(svg).tag.endswith("svg"), "timeline.svg: not an SVG"
assert all(svg.count(k) >= n for k, n in want.items()), "timeline.svg: a scope is missing"
pf = open(f"{d}/trace.pftrace", "rb").read()
assert pf[:1] == b"\x0a" and all(k.encode() in pf for k in want), "trace.pftrace: no packets or scope names"
print("profiler_export: trace.json, timeline.svg and trace.pftrace hold the 12 scopes")
PY
rm -rf "$exports"
unset GPU_COUNTERS_VALIDATION
# Without a CUDA driver, one line saying so and exit 0; with one, the
# kernel's time and bound.
run_example cuda_kernel
if grep -q '^cuda_kernel: skipped: ' <<<"$out"; then
  [ "$(wc -l <<<"$out")" = 1 ] || { echo "FAIL: cuda_kernel: more than one line when skipping"; exit 1; }
else
  expect cuda_kernel "$out" '^kernel: [0-9]+ ns ± [0-9]+ ns$'
fi

echo "== 4/6 the CUDA backend's tests again, their output shown (each GPU test says so where it skips: no CUDA driver)"
for t in $(awk '$1 == "cuda" && $2 == "test" { print $4 }' <<<"$built"); do "$t" --nocapture --test-threads=1; done

echo "== 5/6 the wgpu backend on its portable path (no wgpu-hal)"
cargo test --locked -p gpu-counters-wgpu --no-default-features

echo "== 6/6 cross-platform: cargo check for Windows and macOS, and the fake-backend tests under Wine"
bash scripts/setup.sh --cross
# The libraries a wgpu user adds: `gpu-counters` with its `wgpu` feature,
# and what it builds on. The Vulkan, CUDA and CLI crates are Linux-first and
# not checked here.
xplat=(-p gpu-counters -p gpu-counters-hal -p gpu-counters-profiler -p gpu-counters-wgpu
  --features gpu-counters/wgpu)
cargo check --locked --target x86_64-pc-windows-gnu --target aarch64-apple-darwin "${xplat[@]}"
# The Windows test binaries run under Wine in a throwaway prefix, so the
# Windows clock (QueryPerformanceCounter) runs somewhere.
wine=$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)
WINEPREFIX=$(mktemp -d)
trap '"$wineserver" -k 2>/dev/null || true; rm -rf "$WINEPREFIX"' EXIT
export WINEPREFIX WINEARCH=win64 WINEDEBUG=-all
"$wine" wineboot --init >/dev/null 2>&1 || true
if [ ! -e "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
  # Wine before 8.13 (Debian 12's 8.0) lacks the DLL Rust's std imports.
  x86_64-w64-mingw32-gcc -O2 -shared -s scripts/wine/bcryptprimitives.c -ladvapi32 \
    -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
fi
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$wine"
cargo test --locked --target x86_64-pc-windows-gnu -p gpu-counters-hal
# With the profiler's default features (the JSON and CSV exports), without
# the Perfetto export's schema crate (off by default; built for Windows it
# would be most of this build).
cargo test --locked --target x86_64-pc-windows-gnu -p gpu-counters-profiler --lib --test fake
