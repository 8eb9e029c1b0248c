#!/usr/bin/env python3
"""Summarises `host_cost raw-scopes,profiler` outputs (prof-BUILD-N.txt in a
folder): per build, each process's median per-round ratio, then the median
and range over processes; and per phase, the profiler's record and resolve
ns a sample over raw ash's in the same process (medians over rounds).

    python3 scripts/host_cost_prof.py DIR
"""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

rows = defaultdict(list)
for f in sorted(Path(sys.argv[1]).glob("prof-*.txt")):
    m = re.match(r"prof-(.+)-(\d+)\.txt", f.name)
    if not m:
        continue
    text = f.read_text()
    ratio = re.search(r"host ratio per round, median ([\d.]+)", text)
    phase = {
        v: (float(r), float(s))
        for v, r, s in re.findall(r"^(\S+): record ([\d.]+) ns/sample, resolve ([\d.]+)", text, re.M)
    }
    if not ratio or "raw-scopes" not in phase or "profiler" not in phase:
        print(f"{f.name}: incomplete")
        continue
    (rr, rs), (pr, ps) = phase["raw-scopes"], phase["profiler"]
    rows[m.group(1)].append((float(ratio.group(1)), pr / rr, ps / rs, rr, rs))

for build, r in rows.items():
    col = lambda k: [x[k] for x in r]
    med = lambda k: statistics.median(col(k))
    print(
        f"{build}: {len(r)} processes; ratio median {med(0):.3f} [{min(col(0)):.2f}, {max(col(0)):.2f}]"
        f" ({', '.join(f'{x:.2f}' for x in col(0))}); record/raw {med(1):.3f}, resolve/raw {med(2):.3f};"
        f" raw record {med(3):.1f} ns, raw resolve {med(4):.1f} ns a sample"
    )
