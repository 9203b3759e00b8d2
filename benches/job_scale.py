#!/usr/bin/env python3
"""Benchmark (issue 18 item 4(c), issue 15 item 10): `gpu-time`, `kernels` and `collectives` at
job scale, against Holistic Trace Analysis on the same inputs in the same run, as ratios; how
time and peak memory grow with ranks and with the size of each rank.

Inputs are generated from the 8 real DLRM ranks (`../shared/data/kineto/param_dlrm8`, one
training step each, 0.9 MB of JSON): rank r of an N-rank job is DLRM rank r mod 8 with its
step repeated ("tiles") until the rank's JSON reaches the target size; every tile gets fresh
correlation / external / flow ids and step number, its own jitter (the whole tile moved by
0..200 us, drawn per rank and tile, so the late rank changes from step to step), and each rank
its own clock (moved by up to +-50 ms, rank 0 unmoved). Written gzipped (level 1) to a
temporary directory and deleted after. Deterministic (`random.Random(seed)`).

Contenders (each a fresh process; wall time and peak RSS from wait4's rusage):
  strato gpu-time / kernels / collectives   `strato CMD DIR --json` (release build; all cores
                      unless --jobs)
  hta                 HTA 0.5.0 in one process: `TraceAnalysis(trace_dir=DIR)` (the load),
                      then get_temporal_breakdown (vs gpu-time), get_gpu_kernel_breakdown (vs
                      kernels), get_comm_comp_overlap (vs collectives; HTA has no collective
                      matching). HTA's time for an analysis = its load + that analysis. Its peak
                      RSS is the largest of its process and its parser pool's (wait4 reports
                      the maximum, not the sum: HTA's real footprint is larger).
HTA is skipped for a job whose JSON exceeds --hta-max-gb (default 2: HTA keeps every event of
every rank in pandas, several times the JSON size, and takes minutes per GB on 2 cores), or at
exactly the jobs --hta-at names (RANKSxMB, e.g. 128x5,8x50).

Usage:
  python3 benches/job_scale.py [--ranks 8,32,128] [--mb 5,50] [--runs 1] [--strato PATH]
         [--hta-max-gb 2 | --hta-at 128x5,8x50] [--svg docs/job_scale.svg] [--json benches/results/job_scale.json]
     --json and --svg are rewritten after every job (a run stopped part-way keeps its rows);
     each row also has the 1-minute load average after its job.
  python3 benches/job_scale.py --plot-from A.json [B.json ...] --svg docs/job_scale.svg
     the plot and the table from the rows of earlier runs (no run).
  python3 benches/job_scale.py --ci [--strato target/debug/strato]
     bounded check CI runs (seconds): 4 ranks x 1.7 MB (2 steps); the answers with 1 and 2 jobs are the same,
     every collective of the generated job is matched and complete, and the clock shifts put
     into the ranks are recovered within the jitter.
"""
import argparse
import copy
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DLRM = os.path.join(ROOT, "..", "shared", "data", "kineto", "param_dlrm8")
JITTER_US = 200
CLOCK_US = 50_000
ID_STRIDE = 10_000_000

from _measure import measure as _measure  # noqa: E402  (benches/ is the script directory)


def measure(cmd, runs):
    """`_measure.measure` through GNU time: this script's own process holds the generated job's
    templates (~75 MiB), and a child forked from it reports that as its peak RSS before it
    runs the command; `time` is a small process, so its child's peak is the command's own."""
    with tempfile.NamedTemporaryFile("r") as rss_file:
        wall, best, _, out = _measure(["/usr/bin/time", "-o", rss_file.name, "-f", "%M", *cmd], runs)
        rss_kib = max(int(line) for line in rss_file.read().split() if line.isdigit())
    return wall, best, rss_kib / 1024.0, out

HTA_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
a.get_temporal_breakdown(visualize=False)
t2 = time.perf_counter()
a.get_gpu_kernel_breakdown(visualize=False)
t3 = time.perf_counter()
a.get_comm_comp_overlap(visualize=False)
t4 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "gpu-time": t2 - t1, "kernels": t3 - t2, "collectives": t4 - t3}))
"""


def load_bases():
    bases = []
    for f in sorted(os.listdir(DLRM)):
        with gzip.open(os.path.join(DLRM, f), "rt") as fh:
            bases.append(json.load(fh))
    return bases


def period_us(bases):
    """Tile length: the longest rank's span plus a gap and the jitter."""
    longest = 0
    for doc in bases:
        xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        lo = min(e["ts"] for e in xs)
        hi = max(e["ts"] + e.get("dur", 0) for e in xs)
        longest = max(longest, hi - lo)
    return int(longest) + 1000 + JITTER_US


def tile_events(events, k, shift):
    out = []
    for e in events:
        if e.get("ph") == "M":
            continue
        e = dict(e)
        if "ts" in e:
            e["ts"] = e["ts"] + shift
        if "id" in e and isinstance(e["id"], int):
            e["id"] = e["id"] + k * ID_STRIDE
        args = e.get("args")
        if args:
            args = dict(args)
            for key in ("correlation", "External id", "Ev Idx"):
                if isinstance(args.get(key), int):
                    args[key] = args[key] + k * ID_STRIDE
            e["args"] = args
        name = e.get("name", "")
        if name.startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{int(name[13:]) + k}"
        out.append(e)
    return out


def generate(bases, ranks, mb, out_dir, seed=1):
    """Writes `ranks` gzipped rank files of about `mb` MB of JSON each; returns (tiles, JSON
    bytes in all, clock shift in us per rank)."""
    rng = random.Random(seed)
    period = period_us(bases)
    tile_bytes = len(json.dumps(bases[0]))
    tiles = max(1, round(mb * 1e6 / tile_bytes))
    shifts = [0] + [rng.randint(-CLOCK_US, CLOCK_US) for _ in range(ranks - 1)]
    total = 0
    for r in range(ranks):
        base = bases[r % len(bases)]
        doc = {k: copy.deepcopy(v) for k, v in base.items() if k != "traceEvents"}
        doc["distributedInfo"]["rank"] = r
        doc["distributedInfo"]["world_size"] = ranks
        events = [e for e in base["traceEvents"] if e.get("ph") == "M"]
        for k in range(tiles):
            jitter = rng.randint(0, JITTER_US)
            events.extend(tile_events(base["traceEvents"], k, k * period + shifts[r] + jitter))
        doc["traceEvents"] = events
        text = json.dumps(doc).encode()
        total += len(text)
        with gzip.open(os.path.join(out_dir, f"rank{r:04d}.pt.trace.json.gz"), "wb", compresslevel=1) as fh:
            fh.write(text)
    return tiles, total, shifts


def strato_json(strato, args):
    out = subprocess.run([strato, *args], capture_output=True, check=True)
    return out.stdout


def ci(args):
    """The bounded check (see the module docs)."""
    bases = load_bases()
    with tempfile.TemporaryDirectory() as d:
        tiles, total, shifts = generate(bases, 4, 1.7, d)
        for cmd in ("gpu-time", "kernels", "collectives"):
            one = strato_json(args.strato, ["--jobs", "1", cmd, d, "--json"])
            two = strato_json(args.strato, ["--jobs", "2", cmd, d, "--json"])
            assert one == two, f"{cmd}: 1 and 2 jobs differ"
        report = json.loads(one)
        # 8 collectives (3 all-reduce, 5 send/recv kernels) per DLRM step, every rank has them.
        assert len(report["collectives"]) == 8 * tiles, len(report["collectives"])
        assert all(c["complete"] and len(c["ranks"]) == 4 for c in report["collectives"])
        for rc in report["clock"]["ranks"]:
            injected_ns = shifts[rc["rank"]] * 1000
            # reference time = own time + offset; DLRM's own skew is a few us.
            if rc["offset_ns"] is not None:
                assert abs(rc["offset_ns"] + injected_ns) <= (JITTER_US + 10) * 1000, rc
        assert all(rc["offset_ns"] is not None for rc in report["clock"]["ranks"])
        print(f"ok: 4 ranks x {tiles} steps ({total / 1e6:.1f} MB JSON): same answers with 1 and 2 "
              f"jobs, {len(report['collectives'])} collectives all complete, clock shifts recovered")


def svg_plot(rows, path):
    """Two log-log panels (time, peak RSS) against the job's JSON size: one line per contender
    and per rank count. Hand-written SVG (no plotting dependency)."""
    import math
    contenders = ["strato gpu-time", "strato kernels", "strato collectives", "hta gpu-time"]
    colors = {"strato gpu-time": "#1f77b4", "strato kernels": "#2ca02c",
              "strato collectives": "#d62728", "hta gpu-time": "#7f7f7f"}
    W, H, M = 420, 300, 55
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W + 40}" height="{H + 70}" '
             'font-family="sans-serif" font-size="11">']
    for panel, (key, label) in enumerate([("time_s", "median wall time (s)"), ("rss_mib", "peak RSS (MiB)")]):
        x0 = panel * (W + 20)
        pts = [(r["json_mb"], r[key]) for r in rows if r.get(key)]
        if not pts:
            continue
        xs = [math.log10(p[0]) for p in pts]
        ys = [math.log10(max(p[1], 1e-3)) for p in pts]
        xlo, xhi = math.floor(min(xs)), math.ceil(max(xs))
        ylo, yhi = math.floor(min(ys)), math.ceil(max(ys))
        xhi, yhi = max(xhi, xlo + 1), max(yhi, ylo + 1)
        sx = lambda v: x0 + M + (math.log10(v) - xlo) / (xhi - xlo) * (W - M - 10)
        sy = lambda v: 20 + (yhi - math.log10(max(v, 1e-3))) / (yhi - ylo) * (H - 40)
        parts.append(f'<text x="{x0 + W / 2}" y="14" text-anchor="middle">{label} vs job JSON size (MB), log-log</text>')
        parts.append(f'<rect x="{x0 + M}" y="20" width="{W - M - 10}" height="{H - 40}" fill="none" stroke="#999"/>')
        for e in range(xlo, xhi + 1):
            x = sx(10 ** e)
            parts.append(f'<text x="{x:.1f}" y="{H - 5}" text-anchor="middle">{10 ** e:g}</text>')
        for e in range(ylo, yhi + 1):
            y = sy(10 ** e)
            parts.append(f'<text x="{x0 + M - 4}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
        for c in contenders:
            for mb in sorted({r["mb_per_rank"] for r in rows}):
                line = sorted((r["json_mb"], r[key], r["ranks"]) for r in rows
                              if r["contender"] == c and r["mb_per_rank"] == mb and r.get(key))
                if not line:
                    continue
                dash = "" if mb == max(r["mb_per_rank"] for r in rows) else ' stroke-dasharray="4 3"'
                d = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b, _ in line)
                parts.append(f'<polyline points="{d}" fill="none" stroke="{colors[c]}" stroke-width="1.5"{dash}/>')
                for a, b, n in line:
                    parts.append(f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="2.5" fill="{colors[c]}"/>')
                    if c in (contenders[0], "hta gpu-time"):
                        # Which job a point is: ranks x MB per rank, under strato gpu-time's and HTA's points.
                        parts.append(f'<text x="{sx(a):.1f}" y="{sy(b) + 13:.1f}" text-anchor="middle" '
                                     f'font-size="9" fill="#555">{n}x{mb:g}</text>')
    for i, c in enumerate(contenders):
        x = 10 + i * 200
        parts.append(f'<line x1="{x}" y1="{H + 30}" x2="{x + 20}" y2="{H + 30}" stroke="{colors[c]}" stroke-width="2"/>')
        parts.append(f'<text x="{x + 25}" y="{H + 34}">{c}</text>')
    sizes = sorted({r["mb_per_rank"] for r in rows})
    parts.append(f'<text x="10" y="{H + 55}">solid: {sizes[-1]:g} MB per rank, dashed: '
                 f'{", ".join(f"{m:g}" for m in sizes[:-1]) or "-"} MB; points along a line: more ranks '
                 '(labels: ranks x MB per rank). HTA "gpu-time" = its load + temporal breakdown.</text>')
    parts.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(parts) + "\n")


def full(args):
    if not os.path.exists(args.strato):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "strato-cli"], cwd=ROOT, check=True)
    hta_python = os.environ.get("HTA_PYTHON", os.path.join(ROOT, ".venv", "bin", "python"))
    have_hta = os.path.exists(hta_python)
    bases = load_bases()
    rows = []
    print(f"machine: {os.cpu_count()} cores; {args.runs} run(s) each, fresh process per run")
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    for mb in [float(x) for x in args.mb.split(",")]:
        for n in [int(x) for x in args.ranks.split(",")]:
            with tempfile.TemporaryDirectory(dir=args.tmp) as d:
                t = time.perf_counter()
                tiles, total, _ = generate(bases, n, mb, d)
                gz = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
                print(f"\n== {n} ranks x {mb:g} MB ({tiles} steps each): {total / 1e6:.0f} MB JSON, "
                      f"{gz / 1e6:.0f} MB gzipped (generated in {time.perf_counter() - t:.0f} s)")
                res = {}
                for cmd in ("gpu-time", "kernels", "collectives"):
                    wall, best, rss, _ = measure([args.strato, *jobs, cmd, d, "--json"], args.runs)
                    res[cmd] = (wall, rss)
                    rows.append(dict(contender=f"strato {cmd}", ranks=n, mb_per_rank=mb,
                                     json_mb=total / 1e6, time_s=wall, rss_mib=rss))
                    print(f"strato {cmd:<12} {wall:8.2f} s {rss:9.1f} MiB")
                if args.hta_at is not None:
                    run_hta = f"{n}x{mb:g}" in args.hta_at.split(",")
                    why = f"{n}x{mb:g} not in --hta-at {args.hta_at}"
                else:
                    run_hta = total <= args.hta_max_gb * 1e9
                    why = f"{total / 1e9:.1f} GB of JSON > --hta-max-gb {args.hta_max_gb}"
                if have_hta and run_hta:
                    wall, best, rss, out = measure([hta_python, "-c", HTA_SNIPPET, d], 1)
                    phases = json.loads(out.strip().splitlines()[-1])
                    print(f"hta load {phases['load']:.1f} s, peak RSS {rss:.0f} MiB (whole run {wall:.1f} s)")
                    for cmd in ("gpu-time", "kernels", "collectives"):
                        hta_s = phases["load"] + phases[cmd]
                        rows.append(dict(contender=f"hta {cmd}", ranks=n, mb_per_rank=mb,
                                         json_mb=total / 1e6, time_s=hta_s, rss_mib=rss))
                        print(f"  {cmd:<12} hta {hta_s:8.2f} s = {hta_s / res[cmd][0]:6.1f}x strato's time; "
                              f"RSS {rss / res[cmd][1]:6.1f}x strato's")
                elif have_hta:
                    print(f"hta skipped: {why}")
                load = os.getloadavg()
                print(f"load average after this job: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
                for r in rows:
                    if r["ranks"] == n and r["mb_per_rank"] == mb:
                        r["load_avg_1m"] = round(load[0], 1)
            # After every job, so that a long run stopped part-way keeps what it measured.
            write_outputs(rows, args)
    print_table(rows)
    if args.svg:
        print(f"plot: {args.svg}")


def print_table(rows):
    print("\n| contender | ranks | MB/rank | JSON MB | time s | peak RSS MiB | load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['contender']} | {r['ranks']} | {r['mb_per_rank']:g} | {r['json_mb']:.0f} | "
              f"{r['time_s']:.2f} | {r['rss_mib']:.0f} | {r.get('load_avg_1m', '')} |")


def write_outputs(rows, args):
    """The rows so far as --json and the plot as --svg (each written whole, then renamed)."""
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json + ".tmp", "w") as fh:
            json.dump(rows, fh, indent=1)
        os.replace(args.json + ".tmp", args.json)
    if args.svg:
        svg_plot(rows, args.svg + ".tmp")
        os.replace(args.svg + ".tmp", args.svg)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ci", action="store_true")
    parser.add_argument("--ranks", default="8,32,128")
    parser.add_argument("--mb", default="5,50")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0, help="strato --jobs (default: all cores)")
    parser.add_argument("--hta-max-gb", type=float, default=2.0)
    parser.add_argument("--hta-at", default=None, metavar="RxMB,...",
                        help="run HTA at exactly these jobs (e.g. 128x5,8x50) instead of by --hta-max-gb")
    parser.add_argument("--tmp", default=None, help="where the generated jobs go (default: $TMPDIR)")
    parser.add_argument("--strato", default=None)
    parser.add_argument("--svg", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot-from", nargs="+", default=None, metavar="JSON",
                        help="no run: the --svg plot and the table from the rows of earlier --json files")
    args = parser.parse_args()
    if args.plot_from:
        rows = [row for f in args.plot_from for row in json.load(open(f))]
        print_table(rows)
        if args.svg:
            svg_plot(rows, args.svg)
    elif args.ci:
        target_dir = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
        args.strato = args.strato or os.path.join(target_dir, "debug", "strato")
        ci(args)
    else:
        args.strato = args.strato or os.path.join(ROOT, "target", "release", "strato")
        full(args)


if __name__ == "__main__":
    main()
