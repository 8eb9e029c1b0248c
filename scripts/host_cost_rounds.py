#!/usr/bin/env python3
"""Round-by-round host recording ratios from `host_cost` runs made with
HOST_COST_ROUNDS=1 (crates/bench/examples/host_cost.rs).

Each primitive's recording cost over its baseline (the same recording without
its samples: `passes` for the per-pass variants, nothing for the others)
against raw ash's at the same placement, per sample, taken within each round
(the variants of a round run one after another), then the median and spread
over the rounds and over the files given (one file per process).

    python3 scripts/host_cost_rounds.py hc-1.txt hc-2.txt ...
    python3 scripts/host_cost_rounds.py --whole hc-1.txt ...

`--whole` holds the per-pass variants to raw ash with their pass included
(no baseline subtracted), and the empty pass itself (`passes`, per pass of
two samples) to raw ash's pair: what a raw ash user moving to encoders pays.

`--wgpu` reads `wgpu_host_cost` runs (crates/bench/examples/wgpu_host_cost.rs)
and holds gpu-counters-wgpu's rows to raw wgpu's and wgpu-profiler's, as the
bench's comparisons do: each side's host cost (record plus resolve) over its
own baseline, per sample, round by round.
"""
import random
import re
import statistics
import sys

# variant: (baseline or None, raw ash variant it is held to, target)
PAIRS = {
    "attachments": ("passes", "raw-pass", 1.2),
    "relaxed-pass": ("passes", "raw-precise", 1.2),
    "heap-precise": (None, "raw-precise", 1.2),
    "encoder-sample": (None, "raw-precise", 1.2),
    "scope-pairs": (None, "raw-pass", 1.2),
}


def rounds(path, with_resolve=False):
    """{round: {variant: (record ns in all, samples)}}; with the resolve
    added to the record where `with_resolve`."""
    out = {}
    pat = re.compile(r"round (\d+) (\S+) record ([\d.]+) resolve ([\d.]+) samples (\d+)")
    for line in open(path):
        m = pat.match(line)
        if m:
            r, v, rec, res, n = m.groups()
            ns = float(rec) + (float(res) if with_resolve else 0.0)
            out.setdefault(int(r), {})[v] = (ns * int(n), int(n))
    return out


# The same with the pass included (`--whole`).
WHOLE = {
    "passes": (None, "raw-pass", None),
    "attachments": (None, "raw-pass", None),
    "relaxed-pass": (None, "raw-precise", None),
}


# gpu-counters-wgpu row: (its baseline, the row it is held to, that row's
# baseline, target); host cost is record plus resolve.
WGPU = {
    "gcw-writes": ("gcw-passes", "raw-writes", "raw-passes", 1.1),
    "gcw-profiled": ("gcw-passes", "raw-writes", "raw-passes", 1.1),
    "gcw-profiled/wgpu-profiler": ("gcw-passes", "wgpu-profiler", "raw-passes", 1.0),
    "gcw-writes/wgpu-profiler": ("gcw-passes", "wgpu-profiler", "raw-passes", 1.0),
    # Not a target: the profiled pass against raw writes into labelled passes.
    "gcw-profiled/labelled": ("gcw-passes", "raw-writes-labelled", "raw-passes", None),
}


def main(paths, pairs=PAIRS, with_resolve=False):
    per_file = {v: [] for v in pairs}
    # Every round's cost over its baseline, per sample, both sides, pooled
    # over the files: their medians' ratio does not swing with a noisy
    # denominator as a round's ratio does (the wgpu rows, whose baselines
    # are 15 times what sampling adds).
    pooled = {v: ([], []) for v in pairs}
    for path in paths:
        ratios = {v: [] for v in pairs}
        for r in rounds(path, with_resolve).values():
            for key, spec in pairs.items():
                base, raw, raw_base = spec[0], spec[1], spec[2] if len(spec) == 4 else None
                v = key.split("/")[0]
                if v not in r or raw not in r or (base and base not in r) or (
                    raw_base and raw_base not in r
                ):
                    continue
                total, n = r[v]
                if base:
                    total -= r[base][0]
                raw_total, raw_n = r[raw]
                if raw_base:
                    raw_total -= r[raw_base][0]
                ratios[key].append((total / n) / (raw_total / raw_n))
                pooled[key][0].append(total / n)
                pooled[key][1].append(raw_total / raw_n)
        for v, x in ratios.items():
            if x:
                per_file[v].append(statistics.median(x))
                print(f"{path}: {v}: median {statistics.median(x):.2f} over {len(x)} rounds "
                      f"[quartiles {statistics.quantiles(x, n=4)[0]:.2f}, {statistics.quantiles(x, n=4)[2]:.2f}]")
    print()
    for v, meds in per_file.items():
        if meds:
            base, raw, target = pairs[v][0], pairs[v][1], pairs[v][-1]
            raw_base = pairs[v][2] if len(pairs[v]) == 4 else None
            raw = f"({raw} - {raw_base})" if raw_base else raw
            print(f"{v.split('/')[0]} {'- ' + base if base else ''} / {raw}: median of {len(meds)} processes "
                  f"{statistics.median(meds):.2f} [{min(meds):.2f}, {max(meds):.2f}]"
                  + (f", target {target}" if target else ""))
            if with_resolve:
                mine, theirs = pooled[v]
                lo, hi = bootstrap(mine, theirs)
                print(f"    pooled over {len(mine)} rounds: {statistics.median(mine):.1f} / "
                      f"{statistics.median(theirs):.1f} ns per sample = "
                      f"{statistics.median(mine) / statistics.median(theirs):.2f} "
                      f"[90% bootstrap {lo:.2f}, {hi:.2f}]")


def bootstrap(mine, theirs, n=2000):
    """5th and 95th percentiles of the ratio of medians over `n` resamples
    of the rounds (pairs kept together; fixed seed, so reruns agree)."""
    rng = random.Random(1)
    k = len(mine)
    out = []
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        den = statistics.median(theirs[i] for i in idx)
        if den > 0:
            out.append(statistics.median(mine[i] for i in idx) / den)
    out.sort()
    return out[len(out) // 20], out[len(out) * 19 // 20]


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--whole":
        main(args[1:], WHOLE)
    elif args and args[0] == "--wgpu":
        main(args[1:], WGPU, with_resolve=True)
    else:
        main(args)
