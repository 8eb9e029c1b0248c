#!/usr/bin/env python3
"""Tables of several `gpu-counters bench --json` runs of the same command:
for every row, the median over the runs of each run's median, with the
smallest and largest run in brackets; then the wgpu comparisons the same
way, the samples-alone comparisons (runs since the twenty-fourth
session: the Vulkan rows recorded without the dispatches, `--host-reps`
rounds; since the twenty-fifth, the wgpu rows with empty passes too),
and the
CPU resolve throughput.

Usage: bench_runs_h200.py RUN.json [RUN.json ...]
(BENCHMARKS.md's H200 tables are this script's output for
docs/h200-2026-12-01/bench-{1,2,3}.json.)
"""
import json
import statistics as st
import sys

runs = [json.load(open(f)) for f in sys.argv[1:]]


def spread(xs, digits=2):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{st.median(xs):.{digits}f} [{min(xs):.{digits}f}, {max(xs):.{digits}f}]"


def rows(tools):
    if not any(v["tool"] in tools for v in runs[0]["variants"]):
        return
    print("| row | added GPU ns/sample | host record ns/sample | host resolve ns/sample | GPU / raw | host / raw |")
    print("|---|---:|---:|---:|---:|---:|")
    for v0 in runs[0]["variants"]:
        if v0["tool"] not in tools or v0["placement"] == "none":
            continue
        vs = [next(v for v in r["variants"] if v["name"] == v0["name"]) for r in runs]
        col = lambda k, d=1: spread([v[k] for v in vs], d)
        print(f"| {v0['name']} | {col('gpu_ns_per_sample')} | {col('host_record_ns_per_sample')} "
              f"| {col('host_resolve_ns_per_sample')} | {col('gpu_ratio_to_raw', 2)} | {col('host_ratio_to_raw', 2)} |")
    print()


rows({"raw-ash", "gpu-counters"})
rows({"wgpu", "wgpu-profiler", "gpu-counters-wgpu"})
rows({"raw-cuda", "cuda-events", "gpu-counters-cuda"})
# Runs since the twentieth session say whether each run's host verdict is
# settled (its rounds' quartiles on one side of the target): the last
# column counts those runs.
settled = any("settled" in (c["host_ratio"] or {}) for r in runs for c in r["comparisons"])
print("| comparison (per scope) | target | GPU ratio | host ratio | host ratio of medians |"
      + (" host verdict settled in |" if settled else ""))
print("|---|---:|---:|---:|---:|" + ("---:|" if settled else ""))
for c in range(len(runs[0]["comparisons"])):
    cs = [r["comparisons"][c] for r in runs]
    g = [(x["gpu_ratio"] or {}).get("median") for x in cs]
    h = [(x["host_ratio"] or {}).get("median") for x in cs]
    # Each side's median added host ns over the other's (the field
    # `host_ratio_of_medians` since the nineteenth session; computed from
    # the medians for older runs).
    hm = [x["variant_host_ns_per_scope"] / x["against_host_ns_per_scope"]
          if x["against_host_ns_per_scope"] > 0 else None for x in cs]
    k = (f" {sum(bool((x['host_ratio'] or {}).get('settled')) for x in cs)} of {len(cs)} runs |"
         if settled else "")
    print(f"| {cs[0]['variant']} / {cs[0]['against']} | ≤ {cs[0]['target']} | {spread(g, 3)} | {spread(h, 2)} | {spread(hm, 2)} |{k}")
print()
alone = [r.get("samples_alone") or [] for r in runs]
if all(alone):
    wgpu_alone = runs[0].get("wgpu_samples_alone_reps")
    print(f"samples alone ({runs[0].get('samples_alone_reps')} rounds a run"
          + (f"; the wgpu rows {wgpu_alone}" if wgpu_alone else "") + "):")
    print()
    print("| comparison (per scope, host only) | target | host ratio (run medians) | "
          "median's 95% interval, low … high (smallest … largest round in runs without one) | host ns per scope, variant / raw | within and settled in |")
    print("|---|---:|---:|---:|---:|---:|")
    for c in range(len(alone[0])):
        cs = [a[c] for a in alone]
        # A ratio is null where no round had a denominator above 0 (a
        # wgpu row's empty passes can read so on a noisy host).
        hr = [x["host_ratio"] or {} for x in cs]
        h = [x.get("median") for x in hr]
        ok = sum(bool(x.get("within_target") and x.get("settled")) for x in hr)
        v = st.median(x["variant_host_ns_per_scope"] for x in cs)
        a = st.median(x["against_host_ns_per_scope"] for x in cs)
        print(f"| {cs[0]['variant']} / {cs[0]['against']} | ≤ {cs[0]['target']} | {spread(h, 2)} "
              f"| {spread([x.get('median_low', x.get('min')) for x in hr], 2)} … "
              f"{spread([x.get('median_high', x.get('max')) for x in hr], 2)} "
              f"| {v:.1f} / {a:.1f} | {ok} of {len(cs)} runs |")
    print()
print("CPU resolve of", runs[0]["resolve"]["samples"], "timestamps, ratio to a plain copy:",
      spread([r["resolve"]["ratio_to_copy"] for r in runs]))
# Runs since the tenth session also give the medians of each (ms).
if all("resolve_ns" in r["resolve"] for r in runs):
    print("  resolve ms:", spread([r["resolve"]["resolve_ns"] / 1e6 for r in runs], 3),
          " plain copy ms:", spread([r["resolve"]["copy_ns"] / 1e6 for r in runs], 3))
