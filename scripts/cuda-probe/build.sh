#!/usr/bin/env bash
# Builds the H200 probe here, without CUDA: headers from the nvidia-cuda-runtime
# and nvidia-cuda-cupti wheels (CUPTI_WHEELS: where they are unpacked, holding
# nvidia/cu13/{include,lib}); libcuda comes from the driver at run time
# (an empty stub with its soname makes the DT_NEEDED entry here).
set -euo pipefail
here=$(dirname "$0"); W=${CUPTI_WHEELS:-/tmp/cupti}/nvidia/cu13
out=${1:-$here/probe}
tmp=$(mktemp -d)
# The stub defines every driver symbol the probe uses (found by a first link).
g++ -O2 -std=c++17 -I"$W/include" -c "$here/probe.cpp" -o "$tmp/probe.o"
nm -u "$tmp/probe.o" | awk '$2 ~ /^cu[A-Z]/ && $2 !~ /^cupti/ {print "void " $2 "(void) {}"}' > "$tmp/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$tmp/libcuda.so" "$tmp/stub.c"
ln -sf "$W/lib/libcupti.so.13" "$tmp/libcupti.so"
g++ "$tmp/probe.o" -o "$out" -L"$tmp" -Wl,--no-as-needed -lcuda -lcupti
rm -rf "$tmp"
