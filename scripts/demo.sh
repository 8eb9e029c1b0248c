#!/usr/bin/env bash
# The demo: `gpu-counters run mixed` on the default device (the first GPU, or
# lavapipe on a machine without one), writing a timeline picture, a Chrome
# trace and a Perfetto trace (open either in https://ui.perfetto.dev) and a
# CSV into ./demo-out/.
# Installs the software Vulkan driver first if no Vulkan driver is present.
set -euo pipefail
cd "$(dirname "$0")/.."
have_driver() {
  ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/*.json \
    ${VK_DRIVER_FILES:-} ${VK_ICD_FILENAMES:-} >/dev/null 2>&1
}
if ! have_driver || ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1; then
  echo "no Vulkan driver found: installing Mesa's software driver (lavapipe)"
  bash scripts/setup.sh
fi
mkdir -p demo-out
cargo run --release -q -p gpu-counters-cli -- run mixed \
  --svg demo-out/timeline.svg --trace demo-out/trace.json --perfetto demo-out/trace.pftrace --csv demo-out/passes.csv "$@"
echo "wrote demo-out/timeline.svg, demo-out/trace.json (Perfetto UI, chrome://tracing), demo-out/trace.pftrace (Perfetto UI), demo-out/passes.csv"
