#!/usr/bin/env python3
"""Compare `gpu-counters run` printed pass durations with a Tracy capture's GPU zones
(tracy-gpuinfo output). Usage: compare.py run.txt gpuinfo.txt"""
import re, sys
UNIT = {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
def dur(tok, unit): return float(tok) * UNIT[unit]
run = open(sys.argv[1], encoding="utf-8").read().splitlines()
frames, cur = [], None
for l in run:
    m = re.match(r"frame (\d+): submit to complete ([\d.]+) (\S+), times ± ([\d.]+) (\S+)", l)
    if m:
        cur = {"frame": int(m[1]), "passes": [], "bound": dur(m[4], m[5])}; frames.append(cur); continue
    m = re.match(r"  (\S+)\s+(\S+)\s+\+([\d.]+) (\S+)\s+(?:–|\+([\d.]+) (\S+))\s+([\d.]+) (\S+)\s", l)
    if m and cur is not None and m[1] != "pass":
        cur["passes"].append((m[1], dur(m[7], m[8])))
zones, ctxs = [], []
for l in open(sys.argv[2], encoding="utf-8"):
    m = re.match(r'context \d+: name "(.*)" type (\S+) .*hasCalibration (\d)', l)
    if m: ctxs.append(m.groups()); continue
    m = re.match(r"  (\d+)\s+(\S+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)", l)
    if m: zones.append((m[2], int(m[3]), int(m[4]), int(m[5]), int(m[6])))
zones.sort(key=lambda z: z[1])
print("contexts:", ctxs)
runp = [(f["frame"], n, d, f["bound"]) for f in frames for n, d in f["passes"]]
print(f"run printed {len(runp)} passes in {len(frames)} frames; capture has {len(zones)} zones")
worst = 0.0
print(f"{'frame':>5} {'pass':8} {'run_ns':>14} {'tracy_ns':>14} {'diff_ns':>8}  {'emit-gpu_end_ms':>15}")
for (f, n, d, b), z in zip(runp, zones):
    diff = z[3] - d
    worst = max(worst, abs(diff))
    print(f"{f:>5} {n:8} {d:14.0f} {z[3]:14d} {diff:8.0f}  {(z[4]-z[2])/1e6:15.3f}  {'NAME MISMATCH '+z[0] if z[0]!=n else ''}")
print(f"largest |duration difference|: {worst:.0f} ns; zones starting before the previous zone's end: "
      f"{sum(1 for a, b in zip(zones, zones[1:]) if b[1] < a[2])}; zones whose GPU end is after their CPU emission: "
      f"{sum(1 for z in zones if z[2] > z[4])}")
