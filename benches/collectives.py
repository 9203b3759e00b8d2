#!/usr/bin/env python3
"""Benchmark (issue 15 item 10): multi-rank analyses on a rank directory against Holistic Trace
Analysis, measured in the same run on the same machine, reported as ratios.

Contenders (each run in a fresh process; wall time and peak RSS from wait4's rusage):
  strato gpu-time     `strato gpu-time DIR --json`: per rank the temporal breakdown and the
                      comm/comp overlap (release build)
  strato collectives  `strato collectives DIR --json`: collectives matched across ranks, clock
                      alignment, stragglers with cause (release build)
  hta overlap         HTA 0.5.0 `TraceAnalysis(trace_dir=DIR).get_comm_comp_overlap()` (its
                      multi-rank comm/comp overlap; needs a Python with
                      `holistictraceanalysis` and `psutil`, which HTA 0.5.0 imports but does
                      not declare: HTA_PYTHON, default .venv/bin/python)

Also checks that the two tools agree: per rank, strato's `comm_comp_overlap_pct` against HTA's
`comp_comm_overlap_pctg` (printed side by side; the difference is reported, not hidden).

Usage: python3 benches/collectives.py [DIR] [--runs N] [--strato PATH] [--replicate N]
  --replicate N  benchmark an N-rank job instead: the ranks of DIR repeated (rank r = a copy of
                 DIR's rank r mod 8 with distributedInfo rank r of N), written to a temporary
                 directory as plain JSON (the job the 128-rank report test builds)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import gzip

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from _measure import measure  # noqa: E402  (benches/ is the script directory)
DEFAULT_DIR = os.path.join(ROOT, "..", "shared", "data", "kineto", "param_dlrm8")

HTA_SNIPPET = """
import json, sys
from hta.trace_analysis import TraceAnalysis
df = TraceAnalysis(trace_dir=sys.argv[1]).get_comm_comp_overlap(visualize=False)
print(json.dumps({int(r): float(p) for r, p in zip(df["rank"], df["comp_comm_overlap_pctg"])}))
"""



def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strato", default=os.path.join(ROOT, "target", "release", "strato"))
    parser.add_argument("--replicate", type=int, default=0)
    args = parser.parse_args()
    if args.replicate:
        with tempfile.TemporaryDirectory() as d:
            replicate(args.dir, args.replicate, d)
            args.dir = d
            run(args)
    else:
        run(args)


def replicate(src, n, out):
    docs = []
    for f in sorted(os.listdir(src)):
        opener = gzip.open if f.endswith(".gz") else open
        with opener(os.path.join(src, f), "rt") as fh:
            docs.append(json.load(fh))
    for r in range(n):
        doc = docs[r % len(docs)]
        doc["distributedInfo"]["rank"] = r
        doc["distributedInfo"]["world_size"] = n
        with open(os.path.join(out, f"rank{r:04d}.json"), "w") as fh:
            json.dump(doc, fh)


def run(args):
    if not os.path.exists(args.strato):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "strato-cli"], cwd=ROOT, check=True)
    files = sorted(os.listdir(args.dir))
    size = sum(os.path.getsize(os.path.join(args.dir, f)) for f in files)
    print(f"input: {args.dir} ({len(files)} ranks, {size / 1e6:.2f} MB on disk)")
    print(f"machine: {os.cpu_count()} cores; {args.runs} runs each, fresh process per run\n")
    results = {}
    results["strato gpu-time"] = measure([args.strato, "gpu-time", args.dir, "--json"], args.runs)
    results["strato collectives"] = measure([args.strato, "collectives", args.dir, "--json"], args.runs)
    hta_python = os.environ.get("HTA_PYTHON", os.path.join(ROOT, ".venv", "bin", "python"))
    if os.path.exists(hta_python):
        results["hta overlap"] = measure([hta_python, "-c", HTA_SNIPPET, args.dir], args.runs)
    else:
        print(f"(hta skipped: no {hta_python}; install with: python3 -m venv .venv && "
              ".venv/bin/pip install holistictraceanalysis==0.5.0 psutil)\n")

    base_wall, _, base_rss, _ = results["strato gpu-time"]
    print(f"{'contender':<19} {'median s':>9} {'min s':>8} {'peak RSS MiB':>13} {'time / strato':>14} {'RSS / strato':>13}")
    for name, (wall, best, rss, _) in results.items():
        print(f"{name:<19} {wall:>9.3f} {best:>8.3f} {rss:>13.1f} {wall / base_wall:>13.1f}x {rss / base_rss:>12.1f}x")

    if "hta overlap" in results:
        ours = json.loads(results["strato gpu-time"][3])
        theirs = {int(k): v for k, v in json.loads(results["hta overlap"][3].strip().splitlines()[-1]).items()}
        print("\ncomm/comp overlap per rank (% of communication time overlapped by computation):")
        print(f"{'rank':>4} {'strato':>8} {'hta':>8} {'diff':>8}")
        diffs = [abs(r["comm_comp_overlap_pct"] - theirs[r["rank"]]) for r in ours["ranks"]
                 if r["comm_comp_overlap_pct"] is not None and r["rank"] in theirs]
        print(f"(max |strato - hta| over {len(diffs)} ranks: {max(diffs, default=float('nan')):.3f}; HTA rounds to 0.01)")
        for r in ours["ranks"][:16]:
            o = r["comm_comp_overlap_pct"]
            t = theirs.get(r["rank"])
            diff = "" if o is None or t is None else f"{o - t:8.3f}"
            print(f"{r['rank']:>4} {o if o is not None else float('nan'):8.3f} {t if t is not None else float('nan'):8.3f} {diff}")


if __name__ == "__main__":
    main()
