#!/usr/bin/env python3
"""Reads what h200.sh wrote (OUT) and checks issue 43's must-shows.

Usage: .venv-perfetto/bin/python scripts/record-h200/analyze.py OUT [--json]

Prints one line per check, `PASS`, `FAIL` or `INFO`, with its numbers; with
--json, the details as one JSON object after them. Exits 1 when any check
fails.

- training loop (train.pftrace vs torch-profiler.json.gz): per step (NVTX
  "step i" on the main thread; each step synchronizes before its pop), the
  kernel names and counts equal torch.profiler's (kernels whose launch lies
  in the step's record_function window, joined by correlation id), and the
  total kernel time within 2%; every kernel starts no earlier than its
  launch call's entry minus the clock bound; NVTX forward/backward nested
  in their step, with GPU spans;
- the SIGINT'd trace decodes, and every prefix of it;
- metric checks before the program starts: an unknown metric and a
  multi-pass --counters set exit 2 naming the metric (and the chip);
- GPU metrics (metrics.pftrace): DRAM read and write bandwidth integrated
  over the copy phase equal the bytes the copy kernels moved within 10%;
  during the FMA phase the SM metric is high (>= 50%) and DRAM bandwidth
  low (< 5% of the copy phase's); the tensor-pipe metric is high during
  the matmul phase (>= 20%) and low during the FMA phase; samples cover
  the kernels (times on the kernels' clock);
- per-kernel counters (counters.pftrace vs ncu --cache-control none
  --clock-control none): instructions executed and DRAM bytes of each
  checked kernel within 2% (bytes where ncu counts at least 1 MB); the
  summary says kernels were serialized; with --replay kernel a set of
  several passes still measures the kernels;
- overhead medians (loop wall time, GPU time, process time) of bare,
  record, record --gpu-metrics and torch.profiler runs: record within 3%
  of bare and below torch.profiler's.
"""
import collections, gzip, json, os, statistics, subprocess, sys

out = sys.argv[1]
want_json = "--json" in sys.argv
here = os.path.dirname(os.path.abspath(__file__))
dump = os.path.join(here, "..", "gpu_trace_dump.py")
details = {}
failed = 0


def line(status, name, text):
    global failed
    if status == "FAIL":
        failed += 1
    print(f"{status} {name}: {text}")


def check(ok, name, text):
    line("PASS" if ok else "FAIL", name, text)


def decode(path, *flags):
    if not os.path.exists(path):
        return {"errors": [f"{path}: missing"], "missing": True}
    r = subprocess.run([sys.executable, dump, path, *flags], capture_output=True, text=True)
    if r.returncode != 0:
        return {"errors": [r.stderr[-2000:]]}
    return json.loads(r.stdout)


def norm(name):
    return " ".join((name or "").split())


def pct(x):
    return "n/a" if x is None else f"{100 * x:+.2f}%"


results = collections.defaultdict(list)
jpath = os.path.join(out, "results.jsonl")
if os.path.exists(jpath):
    for l in open(jpath):
        l = l.strip()
        if not l:
            continue
        try:
            d = json.loads(l)
        except ValueError:
            continue
        results[d.get("check")].append(d)


def first(name):
    r = results.get(name) or [{}]
    return r[0]


# ---------------------------------------------------------------- training
def training():
    spath = os.path.join(out, "train-summary.json")
    if not os.path.exists(spath):
        line("FAIL", "train", "train-summary.json missing")
        return
    summary = json.load(open(spath))
    bound = summary.get("clock", {}).get("max_bound_ns") or 0
    details["train"] = {"clock": summary.get("clock"), "drops": summary.get("drops"),
                        "notices": summary.get("notices")}
    bpk = summary.get("trace", {}).get("bytes_per_kernel")
    line("INFO", "train-bytes-per-kernel", f"{bpk}")
    t = decode(os.path.join(out, "train.pftrace"))
    check(not t["errors"], "train-trace-decodes", f"{len(t['errors'])} errors {t['errors'][:2]}")
    if t.get("missing"):
        return
    stages = [s for s in t["render_stages"] if s["category"] == "COMPUTE" or (s["description"] or "").startswith("grid")]
    steps = {}
    for s in t["slices"]:
        if s["name"] and s["name"].startswith("step ") and s["depth"] == 0:
            steps[int(s["name"].split()[1])] = (s["ts"], s["ts"] + (s["dur"] or 0))
    ours = {}
    for i, (a, b) in sorted(steps.items()):
        ks = [k for k in stages if k["ts"] >= a - bound and k["ts"] + k["dur"] <= b + bound]
        ours[i] = (collections.Counter(norm(k["name"]) for k in ks), sum(k["dur"] for k in ks))
    launch_ts = {}
    for s in t["slices"]:
        for e in s["launched"]:
            launch_ts[e] = s["ts"]
    joined = [k for k in stages if k["event_id"] in launch_ts]
    early = [k for k in joined if k["ts"] < launch_ts[k["event_id"]] - bound]
    worst = min((k["ts"] - launch_ts[k["event_id"]] for k in joined), default=None)
    check(joined and not early, "kernels-after-their-launch",
          f"{len(joined)} of {len(stages)} kernels joined to a launch slice, {len(early)} start before launch - bound ({bound} ns); worst start - launch {worst} ns")
    nested = [s for s in t["slices"] if s["name"] in ("forward", "backward")]
    depth1 = sum(1 for s in nested if s["depth"] == 1)
    spans = sum(1 for s in t["slices"] if (s["track"] or "").startswith("GPU span"))
    check(nested and depth1 == len(nested) and spans > 0, "nvtx-nested-with-gpu-spans",
          f"{depth1} of {len(nested)} forward/backward ranges at depth 1, {spans} GPU-span slices")
    ppath = os.path.join(out, "torch-profiler.json.gz")
    if not os.path.exists(ppath):
        line("FAIL", "train-vs-profiler", "torch-profiler.json.gz missing")
        return
    prof = json.load(gzip.open(ppath))
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
        rows.append({"step": i, "ours_kernels": sum(co.values()), "profiler_kernels": sum(ct.values()),
                     "names_equal": co == ct, "only_ours": list((co - ct).items())[:3],
                     "only_profiler": list((ct - co).items())[:3], "ours_ns": to, "profiler_ns": round(tt),
                     "rel_diff": (to - tt) / tt if tt else None})
    details["train"]["steps"] = rows
    equal = sum(r["names_equal"] for r in rows)
    check(rows and equal == len(rows), "step-kernels-equal-torch-profiler",
          f"{equal} of {len(rows)} steps with equal kernel names and counts"
          + ("" if not rows or equal == len(rows) else f"; first difference {next(r for r in rows if not r['names_equal'])}"))
    diffs = [abs(r["rel_diff"]) for r in rows if r["rel_diff"] is not None]
    worst = max(diffs, default=None)
    check(worst is not None and worst <= 0.02, "step-kernel-time-within-2pct",
          f"largest |difference| {pct(worst)} over {len(diffs)} steps")


# ------------------------------------------------------------------ SIGINT
def sigint():
    sig = decode(os.path.join(out, "sigint.pftrace"), "--prefixes", "--counts")
    ok = not sig.get("errors") and not sig.get("prefix_errors")
    check(ok, "sigint-trace-decodes",
          f"{sig.get('prefixes')} prefixes, {sig.get('render_stages')} render stages, {sig.get('slices')} slices; "
          f"errors {sig.get('errors', [])[:2]} prefix errors {sig.get('prefix_errors', [])[:2]}")


# ---------------------------------------------------------- metric checks
def metric_checks():
    listed = first("list-gpu-metrics")
    line("INFO", "list-gpu-metrics", f"{listed.get('lines')} lines; {norm(listed.get('head'))}")
    cases = results.get("metric-check", [])
    want = {
        "--counters bogus__no_such_metric.sum": ["bogus__no_such_metric.sum", "unknown metric", " on GH"],
        "--counters smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed":
            ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "passes", "--replay kernel"],
        "--gpu-metric bogus__no_such_metric.sum": ["bogus__no_such_metric.sum", "unknown metric", "PM sampling"],
    }
    for args, words in want.items():
        c = next((x for x in cases if x.get("args", "").strip() == args), None)
        if c is None:
            line("FAIL", "metric-check", f"{args}: not run")
            continue
        err = c.get("stderr", "")
        lines = [l for l in err.splitlines() if l.strip()]
        ok = c.get("code") == 2 and len(lines) == 1 and all(w in err for w in words)
        check(ok, "metric-check-exit-2", f"{args}: exit {c.get('code')}, {norm(err)}")


# -------------------------------------------------------------- PM sampling
def pm():
    s = (first("pm-summary").get("summary")) or {}
    wl = first("pm-workload")
    notices = [n.get("text") for n in s.get("notices", [])]
    details["pm"] = {"summary_gpu_metrics": s.get("gpu_metrics"), "notices": notices, "workload": wl,
                     "drops": s.get("drops")}
    t = decode(os.path.join(out, "metrics.pftrace"))
    samples = [e for e in t.get("gpu_counters", [])]
    rows = s.get("gpu_metrics") or []
    check(bool(samples) and s.get("pm_clocks_locked") is True and rows, "pm-sampled",
          f"{len(samples)} samples in the trace, summary rows {rows}, clocks-locked line {s.get('pm_clocks_locked')}; notices {notices}")
    if not samples or not wl:
        line("FAIL", "pm-checks", "no samples or no workload line: the remaining GPU-metric checks cannot run")
        return
    losses = {k: v for k, v in (s.get("drops", {}).get("injected") or {}).items() if k.startswith("pm_")}
    line("INFO", "pm-losses", f"{losses}")
    units = t.get("gpu_counter_units", {})
    names = sorted({n for e in samples for n in e["values"]})
    line("INFO", "pm-metrics", ", ".join(f"{n} [{'/'.join(units.get(n, {}).get('numerator', []))}"
                                         f"{'/' + '/'.join(units[n]['denominator']) if units.get(n, {}).get('denominator') else ''}]" for n in names))
    ts = [e["ts"] for e in samples]
    gaps = [b - a for a, b in zip(ts, ts[1:]) if b > a]
    interval = statistics.median(gaps) if gaps else 100_000
    dt = {}
    for i, e in enumerate(samples):
        dt[i] = (e["ts"] - samples[i - 1]["ts"]) if i > 0 and e["ts"] - samples[i - 1]["ts"] < 4 * interval else interval
    kernels = [k for k in t["render_stages"] if k["category"] == "COMPUTE"]
    copies = sorted((k for k in kernels if "copy_kernel" in (k["name"] or "")), key=lambda k: k["ts"])
    fmas = sorted((k for k in kernels if "fma_kernel" in (k["name"] or "")), key=lambda k: k["ts"])
    n_copies = wl["copies"]
    phase = copies[-n_copies:]
    if len(phase) < n_copies or not fmas:
        line("FAIL", "pm-kernels", f"{len(copies)} copy kernels, {len(fmas)} FMA kernels in the trace")
        return
    a = phase[0]["ts"] - 2 * interval
    b = phase[-1]["ts"] + phase[-1]["dur"] + 2 * interval
    inside = [i for i, e in enumerate(samples) if a < e["ts"] <= b + interval]
    bracket = [i for i, e in enumerate(samples) if e["ts"] - dt[i] >= phase[0]["ts"] and e["ts"] <= phase[-1]["ts"] + phase[-1]["dur"]]
    check(len(bracket) > 0, "pm-samples-on-kernel-clock",
          f"{len(bracket)} samples lie wholly inside the copy phase ({(phase[-1]['ts'] + phase[-1]['dur'] - phase[0]['ts']) / 1e6:.2f} ms), first sample at {samples[0]['ts']}, copy phase at {phase[0]['ts']}")
    moved = [n for n in notices if "not on CLOCK_MONOTONIC" in (n or "")]
    if moved:
        line("INFO", "pm-times-moved", moved[0])
    moved_bytes = wl["bytes_per_copy"] * n_copies

    def integral(metric, idx):
        return sum(samples[i]["values"].get(metric, 0.0) * dt[i] / 1e9 for i in idx)

    for kind in ("read", "write"):
        m = next((n for n in names if n.startswith(f"dram__bytes_{kind}")), None)
        if m is None:
            other = next((n for n in names if kind in n and n.startswith("dram")), None)
            line("FAIL", f"pm-dram-{kind}-integrates", f"no DRAM {kind} byte metric sampled ({other} is not a byte count); pass --gpu-metric dram__bytes_{kind}.sum or a byte metric --list-gpu-metrics shows")
            continue
        got = integral(m, inside)
        rel = (got - moved_bytes) / moved_bytes
        check(abs(rel) <= 0.10, f"pm-dram-{kind}-integrates",
              f"{m} over the copy phase: {got / 1e9:.3f} GB vs {moved_bytes / 1e9:.3f} GB moved by {n_copies} copy kernels ({pct(rel)}, limit 10%)")
    # FMA phase: samples wholly inside FMA kernels.
    fwin = [(k["ts"], k["ts"] + k["dur"]) for k in fmas[1:]]
    in_fma = [i for i, e in enumerate(samples) if any(s0 <= e["ts"] - dt[i] and e["ts"] <= s1 for s0, s1 in fwin)]
    sm = next((n for n in names if n.startswith("sm__") and "tensor" not in n), None)
    dram = [n for n in names if n.startswith("dram__bytes")]
    if not in_fma or sm is None:
        line("FAIL", "pm-compute-bound", f"{len(in_fma)} samples inside FMA kernels, SM metric {sm}")
    else:
        sm_mean = statistics.mean(samples[i]["values"].get(sm, 0.0) for i in in_fma)
        copy_bw = sum(integral(n, inside) for n in dram) / max(1e-9, (b - a) / 1e9)
        fma_bw = statistics.mean(sum(samples[i]["values"].get(n, 0.0) for n in dram) for i in in_fma)
        ratio = fma_bw / copy_bw if copy_bw > 0 else None
        check(sm_mean >= 50.0 and ratio is not None and ratio < 0.05, "pm-compute-bound",
              f"during {len(in_fma)} FMA samples: {sm} mean {sm_mean:.1f}% (>= 50%), DRAM {fma_bw / 1e9:.2f} GB/s = {pct(ratio)} of the copy phase's {copy_bw / 1e9:.1f} GB/s (< 5%)")
    tensor = next((n for n in names if "tensor" in n), None)
    mm = [k for k in kernels if fmas and k["ts"] > fmas[-1]["ts"] + fmas[-1]["dur"] and "copy_kernel" not in (k["name"] or "")]
    mwin = [(k["ts"], k["ts"] + k["dur"]) for k in mm]
    in_mm = [i for i, e in enumerate(samples) if any(s0 <= e["ts"] - dt[i] and e["ts"] <= s1 for s0, s1 in mwin)]
    if tensor is None or not in_mm:
        line("FAIL", "pm-tensor-pipes", f"tensor metric {tensor}, {len(in_mm)} samples inside matmul kernels")
    else:
        t_mm = statistics.mean(samples[i]["values"].get(tensor, 0.0) for i in in_mm)
        t_fma = statistics.mean(samples[i]["values"].get(tensor, 0.0) for i in in_fma) if in_fma else None
        check(t_mm >= 20.0 and (t_fma is None or t_fma < 5.0), "pm-tensor-pipes",
              f"{tensor}: matmul phase mean {t_mm:.1f}% over {len(in_mm)} samples (>= 20%), FMA phase {t_fma if t_fma is None else round(t_fma, 2)}% (< 5%); kernels {sorted({norm(k['name'])[:40] for k in mm})[:2]}")


# ------------------------------------------------------ per-kernel counters
def counters():
    c = first("counters-summary")
    s = c.get("summary") or {}
    notices = [n.get("text") for n in s.get("notices", [])]
    details["counters"] = {"replay": c.get("replay"), "rows": s.get("counters"), "notices": notices}
    check(s.get("serialized") is True and bool(s.get("counters")), "counters-summary-says-serialized",
          f"serialized {s.get('serialized')}, rows {s.get('counters')}, replay {c.get('replay')!r}; notices {notices}")
    t = decode(os.path.join(out, "counters.pftrace"))
    ends = {}
    for e in t.get("gpu_counters", []):
        ends[e["ts"]] = {k.replace(" (per kernel)", ""): v for k, v in e["values"].items()}
    kernels = [k for k in t.get("render_stages", []) if k["category"] == "COMPUTE"]
    serialized_instant = any("kernels are serialized" in (i["name"] or "") for i in t.get("instants", []))
    check(serialized_instant, "counters-trace-says-serialized", f"instant present: {serialized_instant}")
    ncu = results.get("ncu", [])
    by_id = collections.defaultdict(dict)
    names = {}
    for r in ncu:
        by_id[r["id"]][r["metric"]] = r["value"]
        names[r["id"]] = r["kernel"] or ""
    wl = first("counters-workload")
    keys = wl.get("kernels") or ["copy_kernel", "fma_kernel", "MulFunctor"]
    for key in keys:
        ours = [k for k in kernels if key in (k["name"] or "")]
        ids = [i for i in by_id if key in names[i]]
        if not ours or not ids:
            line("FAIL", f"counters-vs-ncu {key}", f"{len(ours)} kernels in our trace, {len(ids)} in ncu's output")
            continue
        k = ours[-1]
        vals = ends.get(k["ts"] + k["dur"])
        theirs = by_id[ids[-1]]
        if vals is None:
            line("FAIL", f"counters-vs-ncu {key}", "no counters drawn at the kernel's end")
            continue
        parts, ok = [], True
        for m, v in sorted(theirs.items()):
            o = vals.get(m)
            if v is None or o is None:
                parts.append(f"{m}: ours {o} ncu {v}")
                ok = False
                continue
            if "bytes" in m and v < 1e6:
                parts.append(f"{m}: ours {o:.0f} ncu {v:.0f} (under 1 MB, not compared)")
                continue
            rel = (o - v) / v if v else (0.0 if o == 0 else 1.0)
            ok = ok and abs(rel) <= 0.02
            parts.append(f"{m}: ours {o:.0f} ncu {v:.0f} ({pct(rel)})")
        check(ok, f"counters-vs-ncu {key}", "; ".join(parts) + " (limit 2%)")
    r = (first("replay-summary").get("summary")) or {}
    rows = r.get("counters") or []
    rn = [n.get("text") for n in r.get("notices", [])]
    dropped = [n for n in rn if "per-kernel counters" in (n or "")]
    measured = sum(x.get("kernels_measured", 0) for x in rows)
    check(measured >= 3 and not dropped, "counters-kernel-replay",
          f"--replay kernel with a multi-pass set: {rows}; counter notices {dropped}")


# ----------------------------------------------------------------- overhead
def overhead():
    modes = collections.defaultdict(list)
    for d in results.get("overhead", []):
        modes[d["mode"]].append(d)
    med = {m: {k: statistics.median(r[k] for r in v) for k in ("loop_s", "gpu_ms", "process_s")} | {"runs": len(v)}
           for m, v in modes.items()}
    if "bare" in med:
        for m in med:
            for k in ("loop_s", "gpu_ms", "process_s"):
                med[m][k + "_overhead_pct"] = 100 * (med[m][k] / med["bare"][k] - 1)
    details["overhead_medians"] = med
    for m in ("bare", "record", "metrics", "profiler"):
        if m in med:
            x = med[m]
            line("INFO", f"overhead {m}",
                 f"{x['runs']} runs: loop {x['loop_s']:.3f} s ({x.get('loop_s_overhead_pct', 0):+.2f}%), GPU {x['gpu_ms']:.1f} ms ({x.get('gpu_ms_overhead_pct', 0):+.2f}%), process {x['process_s']:.2f} s ({x.get('process_s_overhead_pct', 0):+.2f}%)")
    if "record" in med and "profiler" in med and "bare" in med:
        r, p = med["record"]["loop_s_overhead_pct"], med["profiler"]["loop_s_overhead_pct"]
        check(r <= 3.0 and r < p, "overhead-record", f"loop wall time {r:+.2f}% (<= 3%), torch.profiler {p:+.2f}%")
    else:
        line("FAIL", "overhead-record", f"modes run: {sorted(med)}")


for f in (training, sigint, metric_checks, pm, counters, overhead):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - a broken input is one failed line
        line("FAIL", f.__name__, f"analysis failed: {type(e).__name__}: {e}")
smoke = (first("smoke-summary").get("summary")) or {}
line("INFO", "smoke", f"kernels {smoke.get('kernels', {}).get('count')}, notices {[n.get('text') for n in smoke.get('notices', [])][:3]}")
print(f"{failed} failed")
if want_json:
    json.dump(details, sys.stdout, indent=1, default=str)
    print()
sys.exit(1 if failed else 0)
