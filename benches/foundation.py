#!/usr/bin/env python3
"""Benchmark: import + device temporal breakdown on a real trace, against baselines measured in
the same run on the same machine, reported as ratios.

Contenders (each run in a fresh process; wall time and peak RSS from wait4's rusage):
  strato     `strato gpu-time TRACE --window hta` (release build)
  hta        Holistic Trace Analysis 0.5.0 `TraceAnalysis(...).get_temporal_breakdown()`
             (needs a Python with `holistictraceanalysis`; set HTA_PYTHON, default
             /opt/hta-venv/bin/python; skipped with a message when absent)
  json.load  Python's json.load of the decompressed trace: the first step of any Python tool

Usage: python3 benches/foundation.py [TRACE] [--runs N] [--strato PATH]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from _measure import measure  # noqa: E402  (benches/ is the script directory)
DEFAULT_TRACE = os.path.join(ROOT, "..", "shared", "data", "kineto", "hta_df_index_resolver.json.gz")

HTA_SNIPPET = """
import sys
from hta.trace_analysis import TraceAnalysis
df = TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
print(df.to_string())
"""

JSON_SNIPPET = """
import gzip, json, sys
opener = gzip.open if sys.argv[1].endswith('.gz') else open
with opener(sys.argv[1], 'rb') as f:
    doc = json.load(f)
print(len(doc['traceEvents']))
"""



def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default=DEFAULT_TRACE)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strato", default=os.path.join(ROOT, "target", "release", "strato"))
    args = parser.parse_args()
    if not os.path.exists(args.strato):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "strato-cli"], cwd=ROOT, check=True)

    size = os.path.getsize(args.trace)
    print(f"trace: {os.path.relpath(args.trace, ROOT)} ({size / 1e6:.1f} MB on disk)")
    print(f"machine: {os.cpu_count()} cores; {args.runs} runs each, fresh process per run\n")
    results = {}
    results["strato"] = measure([args.strato, "gpu-time", args.trace, "--window", "hta"], args.runs)
    hta_python = os.environ.get("HTA_PYTHON", "/opt/hta-venv/bin/python")
    if os.path.exists(hta_python):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(args.trace, os.path.join(d, "rank-0" + (".json.gz" if args.trace.endswith(".gz") else ".json")))
            results["hta"] = measure([hta_python, "-c", HTA_SNIPPET, d], max(1, args.runs // 2))
    else:
        print(f"(hta skipped: no {hta_python}; install with: python3 -m venv /opt/hta-venv && "
              "/opt/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0)\n")
    results["json.load"] = measure([sys.executable, "-c", JSON_SNIPPET, args.trace], args.runs)

    base_wall, _, base_rss, _ = results["strato"]
    print(f"{'contender':<10} {'median s':>9} {'min s':>8} {'peak RSS MiB':>13} {'time / strato':>14} {'RSS / strato':>13}")
    for name, (wall, best, rss, _) in results.items():
        print(f"{name:<10} {wall:>9.3f} {best:>8.3f} {rss:>13.1f} {wall / base_wall:>13.1f}x {rss / base_rss:>12.1f}x")


if __name__ == "__main__":
    main()
