# Sourced by the device-session scripts on the GPU machine, from the
# checkout's root: unpacks .bin/bins.tar.xz and the Vulkan loader and
# validation layer (.gl), points the loader at NVIDIA's driver, and sets
# R (results, under $OUT) and V (host_cost's primitive variants).
tar xJf .bin/bins.tar.xz -C .bin
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
# That machine has no Python `perfetto` package: the Perfetto export's
# decoding tests say so and skip (they run in CI and here).
export GPU_COUNTERS_SKIP_PYTHON=1
OUT=${OUT:-/tmp/out}; R=$OUT/r; mkdir -p "$R"
V=raw-pass,passes,attachments,raw-precise,relaxed-pass,heap-precise,encoder-sample,scope-pairs
