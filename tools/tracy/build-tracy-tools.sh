#!/bin/bash
# Builds Tracy v0.14.0's tracy-capture and tracy-csvexport (and tracy-gpuinfo,
# a small helper that prints a capture's GPU contexts, zones and plots) offline,
# from the partial git mirrors in /work/.mirror, as static x86-64 binaries.
# Usage: [MIRROR=DIR] build-tracy-tools.sh [WORKDIR]   (binaries end up in WORKDIR/bin;
# MIRROR holds bare clones owner+name/repo of tracy, capstone, zstd, json, PPQSort)
set -euo pipefail
W=${1:-/tmp/tracy-build}; M=${MIRROR:-/work/.mirror}; HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W/tracy" "$W/deps/capstone" "$W/deps/zstd" "$W/deps/json" "$W/deps/packageproject" "$W/bin"
cd "$W"
git --git-dir=$M/wolfpld+tracy/repo/ archive v0.14.0 capture csvexport server public cmake dtl getopt | tar x -C tracy
# Tracy links `capstone_static`; capstone's `next` (the newest capstone in the mirror) names its static library `capstone`.
sed -i 's/capstone_static/capstone/' tracy/cmake/vendor.cmake
# vendor.cmake wants capstone 6.0.0-Alpha10, zstd v1.5.7, json v3.12.0, PPQSort 1.0.6; the mirrors stop earlier:
# capstone next (32519c01, 2024-10-23, CS API 6.0), zstd v1.5.6, json v3.11.3, PPQSort v1.0.6.
# One capstone file is absent from the mirror (arch/AArch64/AArch64GenCSMappingInsnOp.inc): AArch64 is left out.
git --git-dir=$M/capstone-engine+capstone/repo archive 32519c01efbcfb1bf29bdfc3ad0ad574aea369d9 -- . ':(exclude)arch/AArch64/AArch64GenCSMappingInsnOp.inc' | tar x -C deps/capstone
git --git-dir=$M/facebook+zstd/repo archive v1.5.6 | tar x -C deps/zstd
git --git-dir=$M/nlohmann+json/repo archive v3.11.3 | tar x -C deps/json
# PPQSort pulls PackageProject.cmake and its own CPM.cmake from the internet: a stub for the one,
# nothing for the other (Tracy's CPM is loaded already). CPM applies Tracy's two PPQSort patches to
# the source dir in place, so each of the two builds gets its own fresh copy.
cp "$HERE/packageproject-stub.cmake" deps/packageproject/CMakeLists.txt
for p in capture csvexport; do
  mkdir -p deps/ppqsort-$p
  git --git-dir=$M/GabTux+PPQSort/repo archive v1.0.6 | tar x -C deps/ppqsort-$p
  printf '# offline: CPM is loaded by Tracy already\n' > deps/ppqsort-$p/cmake/CPM.cmake
done
D=$W/deps
for p in capture csvexport; do
  cmake -S tracy/$p -B build-$p -DCMAKE_BUILD_TYPE=Release -DNO_ISA_EXTENSIONS=ON -DNO_LTO=ON \
    -DCMAKE_EXE_LINKER_FLAGS=-static -DCAPSTONE_AARCH64_SUPPORT=OFF \
    -DCPM_capstone_SOURCE=$D/capstone -DCPM_zstd_SOURCE=$D/zstd -DCPM_json_SOURCE=$D/json \
    -DCPM_PPQSort_SOURCE=$D/ppqsort-$p -DCPM_PackageProject.cmake_SOURCE=$D/packageproject
  cmake --build build-$p -j2 --target tracy-$p
  strip -o bin/tracy-$p build-$p/tracy-$p
done
# tracy-gpuinfo: against csvexport's TracyServer (statistics on, as in csvexport).
c++ -O2 -DNDEBUG -std=gnu++20 -Itracy/public/common -Itracy/server -I$D/capstone/include/capstone -I$D/capstone/include \
  -I$D/zstd/lib -I$D/ppqsort-csvexport/include "$HERE/gpuinfo.cpp" -static -o bin/tracy-gpuinfo \
  build-csvexport/libTracyServer.a build-csvexport/_deps/capstone-build/libcapstone.a build-csvexport/_deps/zstd-build/lib/libzstd.a -lpthread
strip bin/tracy-gpuinfo
ls -la bin; bin/tracy-capture -h | head -3 || true
