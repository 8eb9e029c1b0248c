"""The lavapipe table of BENCHMARKS.md ("lavapipe, 2026-12-01"): host / raw
ash per gpu-counters row over the runs of each build, median [min, max].

Usage: python3 scripts/bench_runs_table.py [SET ...]
SET names docs/bench-issue12/SET-*.json (default: before after session2).
"""
import json, statistics, sys, glob

sets = sys.argv[1:] or ["before", "after", "session2"]
rows = {}
res = {}
for b in sets:
    for f in sorted(glob.glob(f"docs/bench-issue12/{b}-*.json")):
        try:
            d = json.load(open(f))
        except Exception:
            continue
        for v in d["variants"]:
            if v["tool"] != "gpu-counters":
                continue
            rows.setdefault(v["name"], {}).setdefault(b, []).append(v)
        res.setdefault(b, []).append(d["resolve"]["ratio_to_copy"])


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"


last = sets[-1]
print("| variant | " + " | ".join(f"host / raw {b}" for b in sets) + f" | record ns/sample {last} | resolve ns/sample {last} |")
print("|---|" + "---:|" * (len(sets) + 2))
for name, r in rows.items():
    cells = [fmt([v["host_ratio_to_raw"] for v in r.get(b, [])]) for b in sets]
    rec = [v["host_record_ns_per_sample"] for v in r.get(last, [])]
    rs = [v["host_resolve_ns_per_sample"] for v in r.get(last, [])]
    tail = f"{statistics.median(rec):.1f} | {statistics.median(rs):.1f}" if rec else "– | –"
    print(f"| {name} | " + " | ".join(cells) + f" | {tail} |")
print()
for b in res:
    print(b, "resolve ratio to copy:", fmt(res[b]), "runs:", len(res[b]))
print()
for b in sets:
    for f in sorted(glob.glob(f"docs/bench-issue12/{b}-*.json")):
        try:
            d = json.load(open(f))
        except Exception:
            continue
        raw = [v for v in d["variants"] if v["tool"] == "raw-ash"]
        print(b, f, [(v["placement"], round(v["host_record_ns_per_sample"], 1), round(v["host_resolve_ns_per_sample"], 1)) for v in raw])
