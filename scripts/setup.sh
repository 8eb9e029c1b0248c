#!/usr/bin/env bash
# Installs what gpu-counters needs besides a Rust toolchain (1.87 or later) on
# Debian/Ubuntu: the Vulkan loader, Mesa's software Vulkan driver (lavapipe,
# used when the machine has no GPU), the Khronos validation layer (the tests
# run under it) and a font for the SVG-to-PNG rendering in the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  libvulkan1 mesa-vulkan-drivers vulkan-validationlayers fonts-dejavu-core ca-certificates >/dev/null
echo "gpu-counters: Vulkan loader, lavapipe, validation layer and fonts installed"
