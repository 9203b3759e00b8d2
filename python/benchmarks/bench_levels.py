"""Overhead per level (issue 19 item 5; Zins 4.3-4.8 style, like the OpenCL layer's table in
docs/opencl.md): the same workload run uninstrumented (baseline), recorded with annotations
only (`--level 1`), with interception added (`--level 3`: the profile hook), and with the OS
events added (`--level 3 --os`), in interleaved rounds (a burst of load on a shared machine hits
every configuration alike). Per configuration: the median wall time of the command and the
median CPU time of it and its children (the program, its processes, the launcher with the OS
collector thread; the kernel's tracepoint work is charged to the threads it fires in), and both
as ratios to the baseline of the same run. Nothing is asserted. CPU sampling has its own rows,
under their own heading in docs/levels.md.

With `--calibrated`, instead: one `strato record --os --calibrate --level 3 --repeat ROUNDS`
of the command, and per calibration configuration (uninstrumented, annotations, annotations +
OS level, hook silent, interception, full, and the held-out runs = interception + OS level) its
time on the calibration's basis (the CPU time of the program's recording threads) and its
**corrected** time (its calibrated book-keeping cost removed), both as ratios to the
uninstrumented runs of the same run (from `calibration.json`: `basis_s`, `corrected_s`).

Run: python python/benchmarks/bench_levels.py [--rounds 5] [--strato target/release/strato]
     [--calibrated] [-- CMD ...]   (default CMD: python examples/rl_cartpole.py --steps 2000)"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--strato", default=None,
                   help="the strato binary (default: python -m stratoscope)")
    p.add_argument("--calibrated", action="store_true",
                   help="per-level instrumented and corrected times from one --os --calibrate run")
    p.add_argument("cmd", nargs="*")
    args = p.parse_args()
    cmd = args.cmd or [sys.executable, str(REPO / "examples" / "rl_cartpole.py"), "--steps",
                       "2000"]
    strato = [args.strato] if args.strato else [sys.executable, "-m", "stratoscope"]
    if args.calibrated:
        calibrated(strato, cmd, args.rounds)
        return
    configs: dict[str, list[str] | None] = {
        "baseline (uninstrumented)": None,
        "annotations (--level 1)": ["--level", "1"],
        "+ interception (--level 3)": ["--level", "3"],
        "+ OS events (--level 3 --os)": ["--level", "3", "--os"],
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.rounds):
            for name, extra in configs.items():
                if extra is None:
                    results[name].append(run(cmd))
                else:
                    results[name].append(run([*strato, "record", *extra, "-o", f"{d}/prof",
                                              "--", *cmd]))
    base = results["baseline (uninstrumented)"]
    base_wall = statistics.median(w for w, _ in base)
    base_cpu = statistics.median(c for _, c in base)
    print("| configuration | wall s | wall ratio | CPU s | CPU ratio |")
    print("|---|---|---|---|---|")
    for name, rs in results.items():
        wall = statistics.median(w for w, _ in rs)
        cpu = statistics.median(c for _, c in rs)
        print(f"| {name} | {wall:.3f} | {wall / base_wall:.3f} | {cpu:.3f} | "
              f"{cpu / base_cpu:.3f} |")
    print(f"medians of {args.rounds} interleaved rounds; command: {' '.join(cmd)}")


def calibrated(strato: list[str], cmd: list[str], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([*strato, "record", "--os", "--calibrate", "--level", "3", "--repeat",
                        str(rounds), "--json", "-o", f"{d}/prof", "--", *cmd], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cal = json.loads(Path(f"{d}/prof/calibration.json").read_text())
    base = cal["runs"][0]
    assert base["name"] == "uninstrumented"
    print(f"basis: {cal['basis']}; costs (ns per event): "
          + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cal["costs_ns"].items())))
    print("| configuration | time s | ratio | corrected s | corrected ratio |")
    print("|---|---|---|---|---|")
    for r in cal["runs"]:
        name = "interception + os (held out)" if r["name"] == "held-out" else r["name"]
        print(f"| {name} | {r['basis_s']:.3f} | {r['basis_s'] / base['basis_s']:.3f} | "
              f"{r['corrected_s']:.3f} | {r['corrected_s'] / base['basis_s']:.3f} |")
    v, os_part = cal["validation"], cal.get("os") or {}
    print(f"validation (held out): bias {v['bias_pct']:+.1f}% "
          f"(95% interval {v.get('bias_pct_interval95')}), without the OS part "
          f"{os_part.get('bias_without_os_pct', float('nan')):+.1f}%; OS collector CPU "
          f"{os_part.get('collector_cpu_s', float('nan')):.3f} s a run")
    print(f"one run of strato record --calibrate --repeat {rounds}; command: {' '.join(cmd)}")


if __name__ == "__main__":
    main()
