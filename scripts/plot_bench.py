#!/usr/bin/env python3
"""Draws GPU and host cost per sample by variant from `gpu-counters bench --json`
output as an SVG bar chart (no dependencies).

    python3 scripts/plot_bench.py bench-h200.json docs/bench-h200.svg "NVIDIA H200"
"""
import json
import sys
from html import escape

COLORS = {"raw-ash": "#8c8c8c", "gpu-counters": "#2b7bba", "wgpu": "#e6862e", "wgpu-profiler": "#c0504d", "gpu-counters-wgpu": "#3a9a5b"}


def panel(variants, key, title, x0, y0, width, row_h):
    values = [v.get(key) or 0.0 for v in variants]
    top = max(values) or 1.0
    out = [f'<text x="{x0}" y="{y0 - 8}" font-size="14" font-weight="bold">{escape(title)}</text>']
    for i, (v, value) in enumerate(zip(variants, values)):
        y = y0 + i * row_h
        w = max(1.0, value / top * width)
        out.append(f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{row_h - 6}" rx="3" '
                   f'fill="{COLORS.get(v["tool"], "#999")}"><title>{escape(v["name"])}: {value:.1f} ns</title></rect>')
        out.append(f'<text x="{x0 + w + 6:.1f}" y="{y + row_h - 11}" font-size="12">{value:,.1f} ns</text>')
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else ""
    report = json.load(open(src))
    variants = [v for v in report["variants"] if "baseline" not in v["name"]]
    for v in variants:
        v["host_ns"] = (v.get("host_record_ns_per_sample") or 0) + (v.get("host_resolve_ns_per_sample") or 0)
    row_h, label_w, bar_w = 24, 470, 260
    top = 70
    height = top + row_h * len(variants) + 60
    width = label_w + 2 * (bar_w + 120) + 20
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="24" font-size="16" font-weight="bold">Cost per sample by variant: '
           f'{escape(title or report["device"]["name"])} ({report["samples"]} samples, {report["reps"]} reps, medians)</text>']
    for i, v in enumerate(variants):
        y = top + i * row_h + row_h - 11
        svg.append(f'<text x="{label_w - 8}" y="{y}" font-size="12" text-anchor="end">{escape(v["name"])}</text>')
    svg += panel(variants, "gpu_ns_per_sample", "added GPU ns per sample", label_w, top, bar_w, row_h)
    svg += panel(variants, "host_ns", "host ns per sample (record + resolve)", label_w + bar_w + 120, top, bar_w, row_h)
    lx = 10
    for tool, color in COLORS.items():
        svg.append(f'<rect x="{lx}" y="{height - 30}" width="14" height="14" fill="{color}"/>'
                   f'<text x="{lx + 20}" y="{height - 18}" font-size="12">{tool}</text>')
        lx += 140
    svg.append("</svg>")
    open(dst, "w").write("\n".join(svg))


if __name__ == "__main__":
    main()
