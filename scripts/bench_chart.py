#!/usr/bin/env python3
"""Draws the comparison benchmark's medians as an SVG bar chart.

    python3 scripts/bench_chart.py [target/bench-compare.json] [docs/benchmarks.svg]

Reads the JSON written by `cargo bench --bench compare` and draws, per
broker and case, the ratio lazykafka / librdkafka of the medians of a few
metrics (1.0 = parity), with both medians printed beside each bar. Plain
Python, no packages needed.
"""

import json
import sys
from html import escape

METRICS = [
    ("rec_per_s", "records/s from 1st poll", "higher"),
    ("rec_per_s_steady", "records/s after 1st record", "higher"),
    ("ttfr_ms", "time to first record", "lower"),
    ("cpu_s", "CPU time", "lower"),
    ("vmhwm_mb", "peak RSS", "lower"),
    ("connect_calls", "connect() calls (strace)", "lower"),
    ("held", "sockets held", "lower"),
    ("idle_cpu_ms_per_s", "CPU/s polling, no data", "lower"),
]


def fmt(x):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "target/bench-compare.json"
    dst = sys.argv[2] if len(sys.argv) > 2 else "docs/benchmarks.svg"
    with open(src) as f:
        report = json.load(f)
    rows = {}
    for row in report["summary"]:
        rows.setdefault((row["broker"], row["case"]), {})[row["metric"]] = row
    groups = []
    for (broker, case), metrics in rows.items():
        bars = []
        for key, label, better in METRICS:
            r = metrics.get(key)
            if r and r["ratio"] is not None:
                bars.append((label, better, r["ratio"], r["lazykafka"], r["librdkafka"]))
        if bars:
            groups.append((f"{broker} / {case}", bars))

    max_ratio = max([2.0] + [min(b[2], 8.0) for _, bars in groups for b in bars])
    left, bar_w, row_h, gap = 200, 420, 18, 26
    width = left + bar_w + 280
    height = 70 + sum(gap + row_h * len(bars) for _, bars in groups) + 30
    scale = bar_w / max_ratio
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="15" font-weight="bold">lazykafka / librdkafka, '
        f'median of {report["rounds"]} rounds (scale {report["scale"]}, '
        f'tansu {report.get("tansu_scale", report["scale"])})</text>',
        '<text x="10" y="38" fill="#555">ratio of medians; green: lazykafka better, '
        'red: worse; dashed line: parity. Numbers: lazykafka vs librdkafka.</text>',
    ]
    y = 60
    for title, bars in groups:
        y += gap
        out.append(f'<text x="10" y="{y - 6}" font-weight="bold">{escape(title)}</text>')
        for label, better, ratio, a, b in bars:
            good = ratio >= 1.0 if better == "higher" else ratio <= 1.0
            w = max(1.0, min(ratio, max_ratio) * scale)
            color = "#3a9d5d" if good else "#d0583f"
            out.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{escape(label)}</text>')
            out.append(f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" fill="{color}"/>')
            clipped = "+" if ratio > max_ratio else ""
            out.append(
                f'<text x="{left + bar_w + 8}" y="{y + 13}">{ratio:.2f}{clipped}  '
                f'({escape(fmt(a))} vs {escape(fmt(b))})</text>'
            )
            y += row_h
    x1 = left + scale
    out.append(f'<line x1="{x1:.1f}" y1="50" x2="{x1:.1f}" y2="{y + 5}" stroke="#333" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{x1:.1f}" y="{y + 20}" text-anchor="middle">1.0</text>')
    out.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
