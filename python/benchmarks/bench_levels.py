"""Overhead per level (issue 19 item 5; Zins 4.3-4.8 style, like the OpenCL layer's table in
docs/opencl.md): the same workload run uninstrumented (baseline), recorded with annotations
only (`--level 1`), with interception added (`--level 3`: the profile hook), with the OS
events added (`--level 3 --os`), and with CPU sampling at two rates instead (`--level 3
--sample=99`, `--sample=999`), in interleaved rounds (a burst of load on a shared machine hits
every configuration alike). Per configuration: the median wall time of the command and the
median CPU time of it and its children (the program, its processes, the launcher with the OS
collector thread; the kernel's tracepoint work is charged to the threads it fires in), and both
as ratios to the baseline of the same run. Nothing is asserted.

With `--calibrated`, instead: one `strato record --os --calibrate --level 3 --repeat ROUNDS`
of the command, and per calibration configuration (uninstrumented, annotations, annotations +
OS level, hook silent, interception, full, and the held-out runs = interception + OS level) its
time on the calibration's basis (the CPU time of the program's recording threads) and its
**corrected** time (its calibrated book-keeping cost removed), both as ratios to the
uninstrumented runs of the same run (from `calibration.json`: `basis_s`, `corrected_s`); then
one `strato record --sample=HZ --calibrate --level 3 --repeat ROUNDS` per rate of `--rates`
(default 99 and 999), whose sampling rows (annotations + samples, annotations + native
samples, held out = interception + samples) are printed the same way, each against the
uninstrumented runs of its own `strato record` run.

Run: python python/benchmarks/bench_levels.py [--rounds 5] [--strato target/release/strato]
     [--calibrated] [--rates 99,999] [-- CMD ...]   (default CMD: python examples/rl_cartpole.py --steps 2000)"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import REPO, run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--strato", default=None,
                   help="the strato binary (default: python -m stratoscope)")
    p.add_argument("--calibrated", action="store_true",
                   help="per-level instrumented and corrected times from one --os --calibrate run"
                        " and one --sample=HZ --calibrate run per rate")
    p.add_argument("--rates", default="99,999", help="sampling rates (Hz), comma-separated")
    p.add_argument("cmd", nargs="*")
    args = p.parse_args()
    cmd = args.cmd or [sys.executable, str(REPO / "examples" / "rl_cartpole.py"), "--steps",
                       "2000"]
    strato = [args.strato] if args.strato else [sys.executable, "-m", "stratoscope"]
    rates = [int(r) for r in args.rates.split(",") if r]
    if args.calibrated:
        calibrated(strato, cmd, args.rounds, ["--os"], "os")
        for hz in rates:
            calibrated(strato, cmd, args.rounds, [f"--sample={hz}"], f"samples at {hz} Hz")
        return
    configs: dict[str, list[str] | None] = {
        "baseline (uninstrumented)": None,
        "annotations (--level 1)": ["--level", "1"],
        "+ interception (--level 3)": ["--level", "3"],
        "+ OS events (--level 3 --os)": ["--level", "3", "--os"],
    }
    for hz in rates:
        configs[f"+ sampling {hz} Hz (--level 3 --sample={hz})"] = [
            "--level", "3", f"--sample={hz}"]
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


def calibrated(strato: list[str], cmd: list[str], rounds: int, extra: list[str],
               what: str) -> None:
    """One `strato record --calibrate --level 3 EXTRA` run: each configuration's time and
    corrected time against its uninstrumented runs (with sampling, only the sampled
    configurations' rows, the others being those of the OS run's table)."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([*strato, "record", *extra, "--calibrate", "--level", "3", "--repeat",
                        str(rounds), "--json", "-o", f"{d}/prof", "--", *cmd], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cal = json.loads(Path(f"{d}/prof/calibration.json").read_text())
    base = cal["runs"][0]
    assert base["name"] == "uninstrumented"
    sampling = "sample" in cal
    print(f"\n{what}: basis {cal['basis']}; costs (ns per event): "
          + ", ".join(f"{k} {v:.0f}" for k, v in sorted(cal["costs_ns"].items())))
    print("| configuration | time s | ratio | corrected s | corrected ratio |")
    print("|---|---|---|---|---|")
    for r in cal["runs"]:
        if sampling and r is not base and not r.get("sample"):
            continue
        name = f"interception + {what} (held out)" if r["name"] == "held-out" else r["name"]
        if sampling and r is not base and r["name"] != "held-out":
            name += f" at {what.split()[-2]} Hz"
        print(f"| {name} | {r['basis_s']:.3f} | {r['basis_s'] / base['basis_s']:.3f} | "
              f"{r['corrected_s']:.3f} | {r['corrected_s'] / base['basis_s']:.3f} |")
    v = cal["validation"]
    part = cal.get("sample" if sampling else "os") or {}
    without = part.get("bias_without_sampling_pct" if sampling else "bias_without_os_pct",
                       float("nan"))
    print(f"validation (held out): bias {v['bias_pct']:+.1f}% "
          f"(95% interval {v.get('bias_pct_interval95')}), without the {what} part "
          f"{without:+.1f}%; collector CPU {part.get('collector_cpu_s') or float('nan'):.3f} s "
          f"a run" + (f"; {part['cpu_samples']:.0f} native samples, "
                      f"{part['python_stacks']:.0f} Python stacks a held-out run"
                      if sampling else ""))
    print(f"one run of strato record {' '.join(extra)} --calibrate --repeat {rounds}; "
          f"command: {' '.join(cmd)}")


if __name__ == "__main__":
    main()
