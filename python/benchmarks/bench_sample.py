"""Cost of CPU sampling (`strato record --sample[=HZ]`, issue 19 items 3 and 5): the same
workload recorded at one collection level without sampling and with sampling at two rates, in
interleaved rounds (a burst of load on a shared machine hits all alike). Per configuration: the
median wall time of the `strato record` command and the median CPU time of it and its children
(the program with its Python-stack sampler thread, the launcher with the perf-event collector
thread; the kernel's sampling interrupts are charged to the threads they hit), and the ratios to
the run without sampling. Nothing is asserted.

Run: python python/benchmarks/bench_sample.py [--rounds 5] [--level 1] [--rates 99,999]
     [-- CMD ...]   (default CMD: python examples/rl_cartpole.py --steps 2000, fixed work)"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from _timing import REPO, run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--level", type=int, default=1)
    p.add_argument("--rates", default="99,999")
    p.add_argument("cmd", nargs="*")
    args = p.parse_args()
    cmd = args.cmd or [sys.executable, str(REPO / "examples" / "rl_cartpole.py"), "--steps",
                       "2000"]
    configs: dict[str, tuple[list[str], list[tuple[float, float]]]] = {
        "no sampling": ([], [])}
    for hz in args.rates.split(","):
        configs[f"--sample={hz}"] = ([f"--sample={hz}"], [])
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.rounds):
            for extra, results in configs.values():
                results.append(run([sys.executable, "-m", "stratoscope", "record", "--level",
                                    str(args.level), *extra, "-o", f"{d}/prof", "--", *cmd]))
    base = configs["no sampling"][1]
    base_wall = statistics.median(w for w, _ in base)
    base_cpu = statistics.median(c for _, c in base)
    print(f"{'configuration (level ' + str(args.level) + ')':<28} {'wall s':>8} {'ratio':>6} "
          f"{'CPU s':>8} {'ratio':>6}")
    for name, (_, results) in configs.items():
        wall = statistics.median(w for w, _ in results)
        cpu = statistics.median(c for _, c in results)
        print(f"{name:<28} {wall:>8.3f} {wall / base_wall:>6.3f} {cpu:>8.3f} "
              f"{cpu / base_cpu:>6.3f}")
    print(f"medians of {args.rounds} interleaved rounds; command: {' '.join(cmd)}")


if __name__ == "__main__":
    main()
