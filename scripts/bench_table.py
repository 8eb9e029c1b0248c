#!/usr/bin/env python3
"""Prints the Markdown tables of BENCHMARKS.md from `gpu-counters bench --json`.

    python3 scripts/bench_table.py bench.json
"""
import json
import sys


def fmt(x, digits=1):
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def main():
    r = json.load(open(sys.argv[1]))
    print("| variant | tool | placement | added GPU ns/sample | host record ns/sample | host resolve ns/sample | host / raw | GPU / raw |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for v in r["variants"]:
        if "baseline" in v["name"]:
            continue
        print(f"| {v['name']} | {v['tool']} | {v['placement']} | {fmt(v['gpu_ns_per_sample'])} | "
              f"{fmt(v['host_record_ns_per_sample'])} | {fmt(v['host_resolve_ns_per_sample'])} | "
              f"{fmt(v['host_ratio_to_raw'], 2)} | {fmt(v['gpu_ratio_to_raw'], 2)} |")
    comparisons = r.get("comparisons", [])
    if comparisons:
        print()
        print("| comparison | target | GPU ns/scope | GPU ratio median [min, max] | host ns/scope | host ratio median [min, max] |")
        print("|---|---:|---:|---:|---:|---:|")
        for c in comparisons:
            def spread(x):
                if x is None:
                    return "–"
                return f"{x['median']:.2f} [{x['min']:.2f}, {x['max']:.2f}]"
            print(f"| {c['variant']} / {c['against']} | ≤ {c['target']:.2f} | "
                  f"{fmt(c['variant_gpu_ns_per_scope'])} / {fmt(c['against_gpu_ns_per_scope'])} | {spread(c['gpu_ratio'])} | "
                  f"{fmt(c['variant_host_ns_per_scope'])} / {fmt(c['against_host_ns_per_scope'])} | {spread(c['host_ratio'])} |")
    res = r["resolve"]
    print()
    print(f"CPU resolve of {res['samples']:,} timestamps: {res['samples_per_s'] / 1e6:,.1f} M samples/s, "
          f"{res['ratio_to_copy']:.3f} of a plain copy of the same bytes.")
    c = r["calibration"]
    print()
    print("| calibration | value |")
    print("|---|---:|")
    print(f"| smallest max deviation in a burst of 100 reads | {c['min_max_deviation_ns']:,} ns |")
    print(f"| median max deviation | {c['median_max_deviation_ns']:,} ns |")
    print(f"| gpu-counters' error bound | {c['error_bound_ns']:,} ns |")
    print(f"| drift without refit over {c['drift_window_s']:.0f} s | {c['drift_ns']:,.0f} ns |")
    print(f"| calibrated times outside their CPU bracket ± bound (with refit) | {c['bracket_violations']} |")


if __name__ == "__main__":
    main()
