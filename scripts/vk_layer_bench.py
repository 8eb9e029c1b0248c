#!/usr/bin/env python3
"""What the Vulkan layer costs a program no one here wrote: vkcube for
FRAMES frames on a virtual X display, without the layer and under
`gpu-counters record` (pass-level timing), as RUNS paired runs (each pair
in alternating order). Prints one JSON object: each run's wall time (the
program's, spawn to exit: measured here for the plain run, and the
recorder's `wall_ns` for the recorded one), the medians and their ratio.

Usage: scripts/vk_layer_bench.py [--runs 10] [--frames 300]
           [--gpu-counters target/release/gpu-counters] [--level pass]

The layer is found as `gpu-counters record` finds it (beside the binary, or
$GPU_COUNTERS_VK_LAYER_LIB); the CUDA injection library is a stand-in (vkcube
loads no CUDA). Needs vkcube (vulkan-tools) and Xvfb.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--gpu-counters", default="target/release/gpu-counters")
    p.add_argument("--level", default="pass")
    a = p.parse_args()
    a.gpu_counters = os.path.abspath(a.gpu_counters)  # the recorded runs start in a temporary directory
    # -displayfd 1: Xvfb picks a free display and prints its number once it
    # accepts connections (nothing printed: it did not start).
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        n = xvfb.stdout.readline().strip()
        if not n.isdigit():
            sys.exit("Xvfb did not start")
        with tempfile.TemporaryDirectory() as tmp:
            inject = os.path.join(tmp, "libgpu_counters_inject.so")
            open(inject, "wb").close()
            env = dict(os.environ, DISPLAY=f":{n}", GPU_COUNTERS_INJECT_LIB=inject)
            for k in ("VK_INSTANCE_LAYERS", "VK_ADD_LAYER_PATH"):
                env.pop(k, None)
            cube = ["vkcube", "--c", str(a.frames)]

            def plain():
                t0 = time.monotonic_ns()
                subprocess.run(cube, env=env, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                return time.monotonic_ns() - t0

            def recorded():
                out = subprocess.run([a.gpu_counters, "record", "--summary-only", "--json",
                                      "--level", a.level, "--"] + cube,
                                     env=env, check=True, capture_output=True, cwd=tmp)
                s = json.loads(out.stdout)
                assert s["vulkan"]["frames"] >= a.frames, s["vulkan"]
                assert s["vulkan"]["untimed_scopes"] == 0, s["vulkan"]
                return s["wall_ns"]

            plain()  # warm the caches (shaders, libraries) once
            runs = []
            for i in range(a.runs):
                if i % 2 == 0:
                    p_ns, r_ns = plain(), recorded()
                else:
                    r_ns, p_ns = recorded(), plain()
                runs.append({"plain_ns": p_ns, "recorded_ns": r_ns})
    finally:
        xvfb.kill()
        xvfb.wait()
    mp = statistics.median(r["plain_ns"] for r in runs)
    mr = statistics.median(r["recorded_ns"] for r in runs)
    ratios = [r["recorded_ns"] / r["plain_ns"] for r in runs]
    print(json.dumps({
        "program": " ".join(cube),
        "level": a.level,
        "runs": runs,
        "median_plain_ns": mp,
        "median_recorded_ns": mr,
        "ratio_of_medians": mr / mp,
        "median_pair_ratio": statistics.median(ratios),
    }, indent=1))


if __name__ == "__main__":
    main()
