#!/usr/bin/env python3
"""Reads what h200.sh wrote (OUT) and checks issue 43's must-shows.

Usage: .venv-perfetto/bin/python scripts/record-h200/analyze.py OUT

- per step (NVTX "step i" on the main thread; each step synchronizes before
  its pop, so its kernels run inside it): kernel names and counts, and the
  total kernel time, against torch.profiler's run (kernels whose launch
  lies in the step's record_function window, joined by correlation id);
- every kernel starts no earlier than its launch call's entry minus the
  clock bound (the API slice naming its event id);
- NVTX nesting (forward/backward inside step) and GPU spans;
- overhead medians (loop wall time, GPU time, process time) per mode;
- the SIGINT'd trace decodes, and every prefix of it.
Prints one JSON object.
"""
import collections, gzip, json, os, statistics, subprocess, sys

out = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
dump = os.path.join(here, "..", "gpu_trace_dump.py")


def decode(path, *flags):
    r = subprocess.run([sys.executable, dump, path, *flags], capture_output=True, text=True)
    if r.returncode != 0:
        return {"errors": [r.stderr[-2000:]]}
    return json.loads(r.stdout)


def norm(name):
    return " ".join((name or "").split())


res = {}
summary = json.load(open(os.path.join(out, "train-summary.json")))
bound = summary.get("clock", {}).get("max_bound_ns") or 0
res["clock"] = summary.get("clock")
res["bytes_per_kernel"] = summary.get("trace", {}).get("bytes_per_kernel")
res["drops"] = summary.get("drops")
res["notices"] = summary.get("notices")
t = decode(os.path.join(out, "train.pftrace"))
res["trace_errors"] = t["errors"][:10]
stages = [s for s in t["render_stages"] if s["category"] == "COMPUTE" or (s["description"] or "").startswith("grid")]
steps = {}
for s in t["slices"]:
    if s["name"] and s["name"].startswith("step ") and s["depth"] == 0:
        steps[int(s["name"].split()[1])] = (s["ts"], s["ts"] + (s["dur"] or 0))
ours = {}
for i, (a, b) in sorted(steps.items()):
    ks = [k for k in stages if k["ts"] >= a - bound and k["ts"] + k["dur"] <= b + bound]
    ours[i] = (collections.Counter(norm(k["name"]) for k in ks), sum(k["dur"] for k in ks))
# launch containment
launch_ts = {}
for s in t["slices"]:
    for e in s["launched"]:
        launch_ts[e] = s["ts"]
joined = [k for k in stages if k["event_id"] in launch_ts]
early = [k for k in joined if k["ts"] < launch_ts[k["event_id"]] - bound]
res["kernels"] = len(stages)
res["kernels_with_launch_slice"] = len(joined)
res["kernels_starting_before_launch_minus_bound"] = len(early)
res["worst_kernel_minus_launch_ns"] = min((k["ts"] - launch_ts[k["event_id"]] for k in joined), default=None)
# NVTX nesting and spans
nested = [s for s in t["slices"] if s["name"] in ("forward", "backward")]
res["nvtx_forward_backward"] = len(nested)
res["nvtx_nested_depth1"] = sum(1 for s in nested if s["depth"] == 1)
res["gpu_span_slices"] = sum(1 for s in t["slices"] if (s["track"] or "").startswith("GPU span"))
# torch.profiler
prof = json.load(gzip.open(os.path.join(out, "torch-profiler.json.gz")))
ev = prof["traceEvents"] if isinstance(prof, dict) else prof
ann = {}
for e in ev:
    if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step "):
        ann[int(e["name"].split()[1])] = (e["ts"], e["ts"] + e["dur"])
launch_corr = [(e["ts"], e.get("args", {}).get("correlation")) for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
kern = {e.get("args", {}).get("correlation"): e for e in ev if e.get("cat") == "kernel"}
theirs = {}
for i, (a, b) in sorted(ann.items()):
    ks = [kern[c] for ts, c in launch_corr if a <= ts <= b and c in kern]
    theirs[i] = (collections.Counter(norm(k["name"]) for k in ks), sum(k["dur"] for k in ks) * 1000)
rows = []
for i in sorted(set(ours) & set(theirs)):
    (co, to), (ct, tt) = ours[i], theirs[i]
    rows.append({
        "step": i, "ours_kernels": sum(co.values()), "profiler_kernels": sum(ct.values()),
        "names_equal": co == ct,
        "only_ours": list((co - ct).items())[:3], "only_profiler": list((ct - co).items())[:3],
        "ours_ns": to, "profiler_ns": round(tt), "rel_diff": (to - tt) / tt if tt else None,
    })
res["steps_compared"] = len(rows)
res["steps_names_equal"] = sum(r["names_equal"] for r in rows)
res["max_abs_rel_kernel_time_diff"] = max((abs(r["rel_diff"]) for r in rows if r["rel_diff"] is not None), default=None)
res["steps"] = rows
# overhead
modes = collections.defaultdict(list)
for line in open(os.path.join(out, "overhead.jsonl")):
    d = json.loads(line)
    modes[d["mode"]].append(d)
med = {m: {k: statistics.median(r[k] for r in v) for k in ("loop_s", "gpu_ms", "process_s")} | {"runs": len(v)} for m, v in modes.items()}
if "bare" in med:
    for m in med:
        for k in ("loop_s", "gpu_ms", "process_s"):
            med[m][k + "_overhead_pct"] = 100 * (med[m][k] / med["bare"][k] - 1)
res["overhead_medians"] = med
sig = decode(os.path.join(out, "sigint.pftrace"), "--prefixes", "--counts")
res["sigint"] = {"errors": sig.get("errors", [])[:5], "prefix_errors": sig.get("prefix_errors", [])[:5],
                 "prefixes": sig.get("prefixes"), "render_stages": sig.get("render_stages"), "slices": sig.get("slices")}
json.dump(res, sys.stdout, indent=1, default=str)
print()
