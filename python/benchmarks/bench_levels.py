"""Overhead per level (issue 19 item 5; Zins 4.3-4.8 style, like the OpenCL layer's table in
docs/opencl.md): the same workload run uninstrumented (baseline), recorded with annotations
only (`--level 1`), with interception added (`--level 3`: the profile hook), and with the OS
events added (`--level 3 --os`), in interleaved rounds (a burst of load on a shared machine hits
every configuration alike). Per configuration: the median wall time of the command and the
median CPU time of it and its children (the program, its processes, the launcher with the OS
collector thread; the kernel's tracepoint work is charged to the threads it fires in), and both
as ratios to the baseline of the same run. Nothing is asserted. CPU sampling has its own rows,
under their own heading in docs/levels.md.

Run: python python/benchmarks/bench_levels.py [--rounds 5] [--strato target/release/strato]
     [-- CMD ...]   (default CMD: python examples/rl_cartpole.py --steps 2000)"""

from __future__ import annotations

import argparse
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
    p.add_argument("cmd", nargs="*")
    args = p.parse_args()
    cmd = args.cmd or [sys.executable, str(REPO / "examples" / "rl_cartpole.py"), "--steps",
                       "2000"]
    strato = [args.strato] if args.strato else [sys.executable, "-m", "stratoscope"]
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


if __name__ == "__main__":
    main()
