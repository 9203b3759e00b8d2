"""Accuracy of overhead correction on the examples: for each, `strato record --calibrate`
(levels 0-4 plus held-out full runs, --repeat interleaved rounds; each configuration's time is
the mean of its fastest 60% of runs; costs by joint non-negative least squares); prints
uninstrumented time, uncorrected instrumented time (inflation %), corrected time, bias % on the
calibration's basis (CPU time of the recording threads, when every run has it) and on the
root process's wall-clock time, and the calibrated costs. Nothing is asserted.
Run: python python/benchmarks/bench_examples.py [--repeat 9] [--strato target/release/strato]"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = {
    "rl_cartpole (6000 steps)": ["examples/rl_cartpole.py", "--steps", "6000"],
    "rl_cartpole + --wrap numpy": ["examples/rl_cartpole.py", "--steps", "6000"],
    "selfplay (4 fork workers)": ["examples/selfplay.py", "--workers", "4", "--games", "1"],
}


def interval(v: dict) -> str:
    lo_hi = v.get("bias_pct_interval95")
    return f"[{lo_hi[0]:+.1f}, {lo_hi[1]:+.1f}]" if lo_hi else "-"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--strato", help="a strato binary (default: python -m stratoscope)")
    p.add_argument("--only", help="run only workloads whose name contains this")
    args = p.parse_args()
    strato = [args.strato] if args.strato else [sys.executable, "-m", "stratoscope"]
    print(f"{'workload':<30} {'basis':<10} {'uninstr s':>9} {'instr s':>8} {'infl %':>7} "
          f"{'corr s':>8} {'bias %':>7} {'95% interval':>17} | wall: {'infl %':>7} {'bias %':>7}")
    for name, cmd in WORKLOADS.items():
        if args.only and args.only not in name:
            continue
        with tempfile.TemporaryDirectory() as d:
            extra = ["--wrap", "numpy"] if "wrap" in name else []
            out = subprocess.run(
                [*strato, "record", "--calibrate", "--repeat",
                 str(args.repeat), "--json", "-o", d, *extra, "--", sys.executable,
                 *[str(REPO / c) if c.endswith(".py") else c for c in cmd]],
                capture_output=True, text=True, check=True)
            doc = json.loads(out.stdout)
            v = doc["validation"]
            costs = {k: round(c, 1) for k, c in doc["calibration"]["costs_ns"].items()}
        w = v.get("wall", v)
        print(f"{name:<30} {v.get('basis', 'wall'):<10} {v['uninstrumented_s']:>9.3f} "
              f"{v['instrumented_s']:>8.3f} {v['inflation_pct']:>7.1f} {v['corrected_s']:>8.3f} "
              f"{v['bias_pct']:>+7.2f} {interval(v):>17} | wall: {w['inflation_pct']:>7.1f} "
              f"{w['bias_pct']:>+7.2f}"
              f"  x{args.repeat} costs ns {costs}", flush=True)


if __name__ == "__main__":
    main()
