#!/usr/bin/env bash
# Runs gpu-counters on the GPU machine, which has no Rust toolchain and no
# Vulkan loader: build here, carry `.gl` and `.bin` there, run named steps.
#
#   bash scripts/device.sh STEP [STEP ...]
#
# Here (a Rust toolchain; CARGO_TARGET_DIR is honoured):
#   prep        the Vulkan loader and validation layer packages the GPU
#               machine lacks, downloaded into .gl/ (apt-get download)
#   build       release `gpu-counters`, the test binaries (test-CRATE-TARGET)
#               and examples (example-CRATE-NAME) of hal, vulkan, profiler,
#               workloads, wgpu and cuda, stripped and packed into
#               .bin/bins.tar.xz (under the 64 MiB a run may carry)
#
# There (from the checkout's root, .gl and .bin carried; results in $OUT,
# /tmp/out by default, with $OUT/summary.txt saying what each step exited
# with):
#   suite       every test binary, one test at a time, then the command's
#               runs and the examples under the validation layer
#   bench       BENCHES runs (default 3) of the h200-vulkan command in
#               docs/bench/runs.json: $OUT/h200-vulkan-N.json
#   cuda-bench  CUDA_BENCHES runs (default 1) of the h200-cuda command, as
#               JSON: $OUT/h200-cuda-N.json
#   hardware    the CUDA hardware-counter example, then the same kernel
#               under Nsight Compute (docs/guide/cuda-hardware-counters.md)
#
# Every command there has its own time limit (LIMIT seconds for a test
# binary, default 120; BENCH_LIMIT for a bench run, default 300), so one
# hang costs only its own step. A run brings back at most 8 files: the
# suite's output comes back as one archive, $OUT/suite.tar.gz, and the
# other steps' logs as $OUT/logs.tar.gz; the bench JSON stays loose.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
T=${CARGO_TARGET_DIR:-target}

# The command of a run in docs/bench/runs.json, with --json.
bench_command() {
  python3 - "$1" <<'PY'
import json, sys
run = next(r for r in json.load(open("docs/bench/runs.json"))["runs"] if r["id"] == sys.argv[1])
cmd = run["command"].split()
print(" ".join(cmd[1:] + ([] if "--json" in cmd else ["--json"])))
PY
}

prep() {
  set -e
  local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  mkdir -p .gl /tmp/amd64/partial
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 \
    vulkan-validationlayers >/dev/null)
  ls .gl
  set +e
}

# Copies the test and example executables named in cargo's JSON messages
# (stdin) into .bin: test-CRATE-TARGET, example-CRATE-NAME.
keep_executables() {
  python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind = m["target"]["kind"]
    if kind not in (["test"], ["lib"], ["example"]):
        continue
    crate = m["package_id"].split("#")[0].rsplit("/", 1)[-1]  # the crate folder: hal, cuda, ...
    prefix = "example" if kind == ["example"] else "test"
    name = m["target"]["name"]
    shutil.copy(m["executable"], f".bin/{prefix}-{crate}-{name}")
'
}

build() {
  set -e
  rm -rf .bin && mkdir -p .bin
  cargo build --release --locked -p gpu-counters-cli
  cp "$T/release/gpu-counters" .bin/
  # Test binaries as test-CRATE-TARGET, examples as example-CRATE-NAME;
  # the gpu-counters crate's with its wgpu drop-in on.
  cargo test --release --locked --no-run --message-format=json \
    -p gpu-counters-hal -p gpu-counters-vulkan -p gpu-counters-profiler -p gpu-counters-workloads \
    -p gpu-counters-wgpu -p gpu-counters-cuda 2>/dev/null | keep_executables
  cargo test --release --locked --no-run --message-format=json \
    -p gpu-counters --features gpu-counters/wgpu 2>/dev/null | keep_executables
  strip .bin/* 2>/dev/null || true
  (cd .bin && tar cJf bins.tar.xz --remove-files $(ls | grep -v bins.tar.xz))
  du -sh .bin
  set +e
}

# The GPU machine: binaries unpacked, the loader and validation layer
# unpacked into /, NVIDIA's Vulkan driver and CUDA 13's CUPTI found.
there() {
  [ -n "${THERE_READY:-}" ] && return
  [ -f .bin/bins.tar.xz ] && tar xJf .bin/bins.tar.xz -C .bin
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
  export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=$PATH:/usr/local/cuda-13.0/bin
  # No Python `perfetto` package there: the Perfetto decoding tests skip, saying so.
  export GPU_COUNTERS_SKIP_PYTHON=1
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  THERE_READY=1
}

# step DIR NAME LIMIT COMMAND...: COMMAND's output into DIR/NAME.txt, its
# exit and time into $OUT/summary.txt.
step() {
  local dir=$1 name=$2 limit=$3; shift 3
  local t0; t0=$(date +%s%N)
  mkdir -p "$dir"
  timeout -s KILL "$limit" "$@" > "$dir/$name.txt" 2>&1; local rc=$?
  printf '%-40s exit %3s %8s ms  %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" \
    "$(grep -E '^test result' "$dir/$name.txt" | tail -1)" | tee -a "$OUT/summary.txt"
}

suite() {
  there
  local d=$OUT/suite
  for t in .bin/test-*; do
    step "$d" "$(basename "$t")" "${LIMIT:-120}" "$t" --test-threads=1
  done
  export GPU_COUNTERS_VALIDATION=1
  step "$d" vk-run-mixed 60 .bin/gpu-counters run mixed --frames 5 --svg "$d/vk-mixed.svg" --perfetto "$d/vk-mixed.pftrace"
  step "$d" vk-run-compute 60 .bin/gpu-counters run compute --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json
  step "$d" vk-run-render 60 .bin/gpu-counters run render --frames 3 --triangles 37 --width 256 --height 128 --json
  step "$d" wgpu-run-compute 60 .bin/gpu-counters run compute --backend wgpu --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json
  step "$d" wgpu-run-render 60 .bin/gpu-counters run render --backend wgpu --frames 3 --triangles 37 --width 256 --height 128 --json
  step "$d" cuda-run-compute 60 .bin/gpu-counters run compute --backend cuda --frames 3 --dispatches 3 --workgroups 7 --workgroup-size 13 --json
  step "$d" devices-all 60 .bin/gpu-counters devices --backend all
  unset GPU_COUNTERS_VALIDATION
  step "$d" example-gpu-counters-profile_passes 60 .bin/example-gpu-counters-profile_passes "$d/wgpu-trace.json"
  step "$d" example-cuda-profile_kernels 60 .bin/example-cuda-profile_kernels "$d/cuda-trace.json"
  (cd "$OUT" && tar czf suite.tar.gz suite && rm -rf suite)
}

bench() {
  there
  local args; args=$(bench_command h200-vulkan)
  for i in $(seq 1 "${BENCHES:-3}"); do
      step "$OUT/logs" "h200-vulkan-$i" "${BENCH_LIMIT:-300}" sh -c ".bin/gpu-counters $args > '$OUT/h200-vulkan-$i.json'"
  done
}

cuda_bench() {
  there
  local args; args=$(bench_command h200-cuda)
  for i in $(seq 1 "${CUDA_BENCHES:-1}"); do
    step "$OUT/logs" "h200-cuda-$i" "${BENCH_LIMIT:-300}" sh -c ".bin/gpu-counters $args > '$OUT/h200-cuda-$i.json'"
  done
}

hardware() {
  there
  local x=.bin/example-cuda-hardware_counters
  step "$OUT/logs" hardware-ours 60 "$x" --reps 5
  step "$OUT/logs" hardware-ncu 120 ncu --clock-control none --kernel-name spin --launch-skip 3 \
    --metrics sm__cycles_elapsed.max,gpu__time_duration.sum --print-units base --csv "$x" --ncu --reps 5
}

[ $# -gt 0 ] || { sed -n '2,30p' "$0"; exit 2; }
for s in "$@"; do
  case $s in
    prep) prep ;;
    build) build ;;
    suite) suite ;;
    bench) bench ;;
    cuda-bench) cuda_bench ;;
    hardware) hardware ;;
    *) echo "error: unknown step \`$s\` (prep, build, suite, bench, cuda-bench, hardware)" >&2; exit 2 ;;
  esac
done
if [ -d "$OUT/logs" ]; then
  (cd "$OUT" && tar czf logs.tar.gz logs && rm -rf logs)
fi
