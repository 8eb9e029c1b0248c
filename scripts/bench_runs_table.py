import json, statistics, sys, glob
rows = {}
res = {}
for b in ("before", "after"):
    for f in sorted(glob.glob(f"docs/bench-issue12/{b}-*.json")):
        try: d = json.load(open(f))
        except Exception: continue
        for v in d["variants"]:
            if v["tool"] != "gpu-counters": continue
            rows.setdefault(v["name"], {}).setdefault(b, []).append(v)
        res.setdefault(b, []).append(d["resolve"]["ratio_to_copy"])
def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs: return "–"
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"
print("| variant | host / raw before, median [min, max] | host / raw after, median [min, max] | record ns/sample after (median) | resolve ns/sample after (median) |")
print("|---|---:|---:|---:|---:|")
for name, r in rows.items():
    b = [v["host_ratio_to_raw"] for v in r.get("before", [])]
    a = [v["host_ratio_to_raw"] for v in r.get("after", [])]
    rec = [v["host_record_ns_per_sample"] for v in r.get("after", [])]
    rs = [v["host_resolve_ns_per_sample"] for v in r.get("after", [])]
    print(f"| {name} | {fmt(b)} | {fmt(a)} | {statistics.median(rec):.1f} | {statistics.median(rs):.1f} |" if rec else f"| {name} | {fmt(b)} | – | – | – |")
print()
for b in res: print(b, "resolve ratio to copy:", fmt(res[b]), "runs:", len(res[b]))
print()
for b in ("before","after"):
    for f in sorted(glob.glob(f"docs/bench-issue12/{b}-*.json")):
        try: d = json.load(open(f))
        except Exception: continue
        raw = [v for v in d["variants"] if v["tool"] == "raw-ash"]
        print(b, f, [(v["placement"], round(v["host_record_ns_per_sample"],1), round(v["host_resolve_ns_per_sample"],1)) for v in raw])
