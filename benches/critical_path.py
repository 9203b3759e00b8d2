#!/usr/bin/env python3
"""Benchmark: critical path of one rank, against Holistic Trace Analysis (HTA) 0.5 in the same
run on the same machine, reported as ratios.

Contenders (each run in a fresh process; wall time and peak RSS from wait4's rusage):
  strato  `strato critical-path TRACE --json` (release build): import, graph, search, report
  hta     `TraceAnalysis(trace_dir=...)` + `critical_path_analysis(rank, annotation, 0)` over
          the annotation that spans the trace (HTA needs one), import included as for strato;
          needs a Python with `holistictraceanalysis` (HTA_PYTHON, default .venv/bin/python of
          the repo); skipped with a message when absent

Both compute the same thing on these inputs: the longest dependency chain of the rank over the
whole trace (the annotation chosen below covers every event). strato also writes per-kind
totals; HTA returns its graph.

Usage: python3 benches/critical_path.py [--runs N] [--strato PATH]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "..", "shared", "data", "kineto")

# (trace, its rank, HTA annotation, HTA instance ids): the annotation instances span the work of
# the trace (the df_index_resolver steps start 32 ms after its first event, of 1.77 s).
TRACES = [
    (os.path.join(DATA, "hta_critical_path", "simple_add_input.json.gz"), 0, "[param|cuda]", "0"),
    (os.path.join(DATA, "param_dlrm8", "worker0_step_12.1694128201545.pt.trace.json.gz"), 0, "ProfilerStep", "0"),
    (os.path.join(DATA, "hta_df_index_resolver.json.gz"), 1, "ProfilerStep", "0,4"),
]

HTA_SNIPPET = """
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
ids = tuple(int(i) for i in sys.argv[4].split(","))
graph, ok = analyzer.critical_path_analysis(
    rank=int(sys.argv[2]), annotation=sys.argv[3], instance_id=ids[0] if len(ids) == 1 else ids
)
assert ok, "HTA's critical path analysis failed"
print(len(graph.critical_path_nodes), len(graph.critical_path_edges_set))
"""


def measure(cmd, runs):
    """Runs cmd `runs` times; returns (median wall s, min wall s, max peak RSS MiB)."""
    walls, rss = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{err.decode(errors='replace')}")
        rss.append(usage.ru_maxrss / 1024.0)
    return statistics.median(walls), min(walls), max(rss)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strato", default=os.path.join(ROOT, "target", "release", "strato"))
    args = parser.parse_args()
    if not os.path.exists(args.strato):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "strato-cli"], cwd=ROOT, check=True)
    hta_python = os.environ.get("HTA_PYTHON", os.path.join(ROOT, ".venv", "bin", "python"))
    has_hta = os.path.exists(hta_python) and subprocess.run(
        [hta_python, "-c", "import hta"], capture_output=True
    ).returncode == 0
    if not has_hta:
        print(f"(hta skipped: no HTA in {hta_python}; install with: {hta_python} -m pip install holistictraceanalysis)\n")
    print(f"machine: {os.cpu_count()} cores; {args.runs} runs each (HTA {max(1, args.runs // 2)}), fresh process per run\n")
    print(f"{'trace':<48} {'contender':<7} {'median s':>9} {'min s':>8} {'peak RSS MiB':>13} {'time / strato':>14} {'RSS / strato':>13}")
    for trace, rank, annotation, ids in TRACES:
        results = {"strato": measure([args.strato, "critical-path", trace, "--json"], args.runs)}
        if has_hta:
            with tempfile.TemporaryDirectory() as d:
                shutil.copy(trace, os.path.join(d, "rank-0.json.gz"))
                results["hta"] = measure(
                    [hta_python, "-c", HTA_SNIPPET, d, str(rank), annotation, ids], max(1, args.runs // 2)
                )
        base_wall, _, base_rss = results["strato"]
        for name, (wall, best, rss) in results.items():
            label = os.path.relpath(trace, DATA)[-48:]
            print(f"{label:<48} {name:<7} {wall:>9.3f} {best:>8.3f} {rss:>13.1f} {wall / base_wall:>13.1f}x {rss / base_rss:>12.1f}x")


if __name__ == "__main__":
    main()
