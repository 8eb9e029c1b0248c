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
"""
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


def rounds(path):
    """{round: {variant: (record ns in all, samples)}}"""
    out = {}
    pat = re.compile(r"round (\d+) (\S+) record ([\d.]+) resolve ([\d.]+) samples (\d+)")
    for line in open(path):
        m = pat.match(line)
        if m:
            r, v, rec, _res, n = m.groups()
            out.setdefault(int(r), {})[v] = (float(rec) * int(n), int(n))
    return out


# The same with the pass included (`--whole`).
WHOLE = {
    "passes": (None, "raw-pass", None),
    "attachments": (None, "raw-pass", None),
    "relaxed-pass": (None, "raw-precise", None),
}


def main(paths, pairs=PAIRS):
    per_file = {v: [] for v in pairs}
    for path in paths:
        ratios = {v: [] for v in pairs}
        for r in rounds(path).values():
            for v, (base, raw, _) in pairs.items():
                if v not in r or raw not in r or (base and base not in r):
                    continue
                total, n = r[v]
                if base:
                    total -= r[base][0]
                raw_total, raw_n = r[raw]
                ratios[v].append((total / n) / (raw_total / raw_n))
        for v, x in ratios.items():
            if x:
                per_file[v].append(statistics.median(x))
                print(f"{path}: {v}: median {statistics.median(x):.2f} over {len(x)} rounds "
                      f"[quartiles {statistics.quantiles(x, n=4)[0]:.2f}, {statistics.quantiles(x, n=4)[2]:.2f}]")
    print()
    for v, meds in per_file.items():
        if meds:
            base, raw, target = pairs[v]
            print(f"{v} {'- ' + base if base else ''} / {raw}: median of {len(meds)} processes "
                  f"{statistics.median(meds):.2f} [{min(meds):.2f}, {max(meds):.2f}]"
                  + (f", target {target}" if target else ""))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--whole":
        main(args[1:], WHOLE)
    else:
        main(args)
