#!/usr/bin/env python3
"""Benchmark: peak memory and time of each command against the size of the trace it reads.

For each trace size, generates (or reuses) a Kineto trace with `benches/gen_kineto.py` and
runs the release `strato` on it in fresh processes: every command a user runs on one trace
(`info`, each analysis with `--json`, the whole-trace and per-step critical path, both
exports, `import -o`, `report -o`, `sql`), and `info`, `gpu-time`, `kernels` and `breakdown`
on the stored profile that `import -o` wrote. Peak RSS is `wait4`'s `ru_maxrss` (the figure `/usr/bin/time -v` prints as
"Maximum resident set size"); wall time from a monotonic clock. Prints a Markdown table with
the ratio peak RSS / trace size (the uncompressed JSON), the figure issue 11 bounds
(target <= 0.15x for import and single-pass analyses).

Each row also gives the wall time over `info`'s on the same trace (issue 28's target: every
command within 5x `info` and 0.15x the JSON size). `--json OUT` keeps the rows, `--svg OUT`
plots both ratios against the trace size (from this run, or from `--plot-from` JSON files).

Usage: python3 benches/memory.py [--events N ...] [--dir /tmp/strato-mem] [--strato PATH]
                                 [--only info,gpu-time,...] [--keep] [--json OUT] [--svg OUT]
       python3 benches/memory.py --plot-from A.json [B.json ...] --svg OUT
Default sizes: 250k, 1M and 4M events (about 70 MB, 280 MB and 1.1 GB). The long runs of
docs/benchmarks.md: `--events 7000000 --decimal-times` (about 2 GB, every command) and
`--events 36000000 --decimal-times --only "import -o"` (about 10 GB; needs ~12 GB of disk). Generated files are kept in --dir for the
next run (delete them yourself); profiles written by `import -o` are removed unless --keep.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def commands(trace, store, html, out):
    """Every command a user runs on one trace: the analyses (`--json`), the exports, the
    report, SQL, and four analyses on the stored profile. `out` is a scratch file."""
    analyses = ["gpu-time", "kernels", "breakdown", "hierarchy", "modules", "layers", "roofline",
                "ops", "util", "memory", "queue-length", "iterations", "collectives", "advise",
                "whatif"]
    return (
        [("info", ["info", trace])]
        + [(name, [name, trace, "--json"]) for name in analyses]
        + [
            ("critical-path", ["critical-path", trace, "--json"]),
            ("critical-path --step all", ["critical-path", trace, "--step", "all", "--json"]),
            ("export --chrome", ["export", trace, "--chrome", out + ".json"]),
            ("export --perfetto", ["export", trace, "--perfetto", out + ".pftrace"]),
            ("import -o", ["import", trace, "-o", store]),
            ("report", ["report", trace, "-o", html]),
            ("sql", ["sql", "SELECT count(*) FROM kernels", trace]),
            ("info (profile)", ["info", store]),
            ("gpu-time (profile)", ["gpu-time", store]),
            ("kernels (profile)", ["kernels", store]),
            ("breakdown (profile)", ["breakdown", store]),
        ]
    )


def run(cmd):
    """Runs cmd; returns (wall s, peak RSS bytes). Exits on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err.decode(errors='replace')}")
    return wall, usage.ru_maxrss * 1024


COLORS = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf", "#ff7f0e", "#393b79", "#637939", "#8c6d31", "#843c39",
          "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#e7ba52",
          "#ad494a", "#a55194", "#6baed6", "#fd8d3c", "#74c476", "#9e9ac8"]


def svg_ratios(rows, path):
    """Two panels against the JSON size (log x): peak RSS / JSON size and wall time / `info`'s
    wall time (log y), one line per command, with issue 28's targets (0.15x, 5x) dashed.
    Hand-written SVG (no plotting dependency)."""
    import math
    labels = sorted({r["command"] for r in rows}, key=lambda c: [r["command"] for r in rows].index(c))
    color = {c: COLORS[i % len(COLORS)] for i, c in enumerate(labels)}
    W, H, M = 440, 320, 50
    panels = [("rss_over_json", "peak RSS / JSON size", 0.15), ("wall_over_info", "wall time / info's", 5.0)]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W + 30}" height="{H + 40 + 16 * ((len(labels) + 3) // 4)}" '
           'font-family="sans-serif" font-size="11">']
    xs = [math.log10(r["json_mb"]) for r in rows]
    xlo, xhi = math.floor(min(xs)), math.ceil(max(xs))
    xhi = max(xhi, xlo + 1)
    for p, (key, title, target) in enumerate(panels):
        x0 = p * (W + 20)
        vals = [r[key] for r in rows if r.get(key)] + [target]
        ylo, yhi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
        yhi = max(yhi, ylo + 1)
        sx = lambda v: x0 + M + (math.log10(v) - xlo) / (xhi - xlo) * (W - M - 10)
        sy = lambda v: 20 + (yhi - math.log10(v)) / (yhi - ylo) * (H - 40)
        out.append(f'<text x="{x0 + W / 2}" y="14" text-anchor="middle">{title} vs JSON size (MB), log-log</text>')
        out.append(f'<rect x="{x0 + M}" y="20" width="{W - M - 10}" height="{H - 40}" fill="none" stroke="#999"/>')
        for e in range(xlo, xhi + 1):
            out.append(f'<text x="{sx(10 ** e):.1f}" y="{H - 5}" text-anchor="middle">{10 ** e:g}</text>')
        for e in range(ylo, yhi + 1):
            out.append(f'<text x="{x0 + M - 4}" y="{sy(10 ** e) + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
        out.append(f'<line x1="{x0 + M}" x2="{x0 + W - 10}" y1="{sy(target):.1f}" y2="{sy(target):.1f}" '
                   f'stroke="#000" stroke-dasharray="5 4"/>')
        out.append(f'<text x="{x0 + W - 12}" y="{sy(target) - 3:.1f}" text-anchor="end">target {target:g}x</text>')
        for c in labels:
            line = sorted((r["json_mb"], r[key]) for r in rows if r["command"] == c and r.get(key))
            if not line:
                continue
            pts = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in line)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{color[c]}" stroke-width="1.5"/>')
            out.extend(f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="2.5" fill="{color[c]}"/>' for a, b in line)
    for i, c in enumerate(labels):
        x, y = 10 + (i % 4) * 220, H + 20 + 16 * (i // 4)
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 20}" y2="{y}" stroke="{color[c]}" stroke-width="2"/>')
        out.append(f'<text x="{x + 25}" y="{y + 4}">{c}</text>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--dir", default="/tmp/strato-mem")
    parser.add_argument("--strato", default=os.path.join(ROOT, "target", "release", "strato"))
    parser.add_argument("--only", help="comma-separated command labels to run")
    parser.add_argument("--keep", action="store_true", help="keep the written profiles")
    parser.add_argument("--decimal-times", action="store_true",
                        help="generate decimal timestamps (Kineto's current layout; needs the "
                             "splitter fix of issue 11 item 1 at large sizes)")
    parser.add_argument("--json", help="write the rows as JSON to this file")
    parser.add_argument("--svg", help="plot the ratios against the trace size to this file")
    parser.add_argument("--plot-from", nargs="+", help="plot these --json files (no run)")
    args = parser.parse_args()
    if args.plot_from:
        import json
        rows = [r for f in args.plot_from for r in json.load(open(f))]
        svg_ratios(rows, args.svg or "memory.svg")
        return
    if not os.path.exists(args.strato):
        raise SystemExit(f"{args.strato}: build it first (cargo build --release -p strato-cli)")
    os.makedirs(args.dir, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    print(f"strato: {args.strato}; load average {os.getloadavg()[0]:.1f} at start", file=sys.stderr)
    print("| events | JSON MB | command | wall s | wall / info | peak RSS MB | RSS / JSON size |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for events in args.events:
        trace = os.path.join(args.dir, f"kineto-{events}.json")
        if not os.path.exists(trace):
            gen = [sys.executable, os.path.join(HERE, "gen_kineto.py"), trace, "--events", str(events)]
            if not args.decimal_times:
                gen.append("--integer-numbers")
            subprocess.run(gen, check=True, stdout=subprocess.DEVNULL)
        size = os.path.getsize(trace)
        store = os.path.join(args.dir, f"kineto-{events}.profile")
        html = os.path.join(args.dir, f"kineto-{events}.html")
        out = os.path.join(args.dir, f"kineto-{events}.out")
        info_wall = None
        for label, cmd in commands(trace, store, html, out):
            if only and label not in only and label != "info":
                continue
            if "(profile)" in label and not os.path.exists(store):
                run([args.strato, "import", trace, "-o", store])
            wall, rss = run([args.strato] + cmd)
            if label == "info":
                info_wall = wall
            ratio = wall / info_wall if info_wall else None
            rows.append({"events": events, "json_mb": size / 1e6, "command": label, "wall_s": wall,
                         "wall_over_info": ratio, "rss_mb": rss / 1e6, "rss_over_json": rss / size})
            shown = f"{ratio:.2f}x" if ratio else ""
            print(f"| {events:,} | {size / 1e6:,.0f} | `{label}` | {wall:.2f} | {shown} | {rss / 1e6:,.0f} | "
                  f"{rss / size:.3f}x |", flush=True)
        if not args.keep:
            shutil.rmtree(store, ignore_errors=True)
        for written in [html, out + ".json", out + ".pftrace"]:
            if os.path.exists(written):
                os.remove(written)
    print(f"load average {os.getloadavg()[0]:.1f} at end", file=sys.stderr)
    if args.json:
        import json
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    if args.svg:
        svg_ratios(rows, args.svg)


if __name__ == "__main__":
    main()
