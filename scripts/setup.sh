#!/usr/bin/env bash
# Installs what gpu-counters needs besides a Rust toolchain (1.87 or later) on
# Debian/Ubuntu: the Vulkan loader, Mesa's software Vulkan driver (lavapipe,
# used when the machine has no GPU), the Khronos validation layer (the tests
# run under it), a font for the SVG-to-PNG rendering in the tests, and
# Perfetto's trace schema for Python (PyPI: perfetto) for the Perfetto export's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# `scripts/setup.sh --cross`: only what scripts/test.sh's cross-platform stage
# needs: the Windows (GNU) and macOS (Apple Silicon) Rust standard libraries,
# the mingw-w64 linker, and Wine to run the Windows test binaries.
if [ "${1:-}" = "--cross" ]; then
  rustup target add x86_64-pc-windows-gnu aarch64-apple-darwin
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends gcc-mingw-w64-x86-64 wine64 >/dev/null
  echo "gpu-counters: Windows and macOS targets, mingw-w64 and Wine installed"
  exit 0
fi
$SUDO apt-get update -qq
# vulkan-tools (vkcube) and xvfb: the Vulkan layer's test runs vkcube, a
# program no one here wrote, on a virtual X display.
$SUDO apt-get install -y -qq --no-install-recommends \
  libvulkan1 mesa-vulkan-drivers vulkan-validationlayers fonts-dejavu-core ca-certificates \
  vulkan-tools xvfb >/dev/null
echo "gpu-counters: Vulkan loader, lavapipe, validation layer, vkcube, Xvfb and fonts installed"

# The Perfetto export's tests decode its traces with Perfetto's own schema:
# `perfetto_trace_pb2` from the `perfetto` package on PyPI, pinned, in a
# virtual environment in the repository (.venv-perfetto/, which the tests
# look for), so that neither a distribution's Python (PEP 668) nor a user's
# packages are touched.
PERFETTO_PY_VERSION="0.59.1"
PROTOBUF_PY_VERSION="7.36.2"
if ! command -v python3 >/dev/null || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip >/dev/null
fi
if [ ! -x .venv-perfetto/bin/python3 ]; then
  python3 -m venv .venv-perfetto
fi
.venv-perfetto/bin/python3 -m pip install --quiet --disable-pip-version-check \
  "perfetto==$PERFETTO_PY_VERSION" "protobuf==$PROTOBUF_PY_VERSION"
.venv-perfetto/bin/python3 -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2"
echo "gpu-counters: perfetto $PERFETTO_PY_VERSION (Perfetto's trace schema for the tests) in .venv-perfetto/"
