"""Cost of the OS level (`strato record --os`, issue 19): the same workload recorded at one
collection level with and without `--os`, in interleaved rounds (a burst of load on a shared
machine hits both alike). Per configuration: the median wall time of the `strato record` command
and the median CPU time of it and its children (the program, its processes, the launcher with
the OS collector thread; the kernel's own tracepoint work is charged to the threads it fires
in), and the ratios to the run without `--os`. Nothing is asserted.

Run: python python/benchmarks/bench_os.py [--rounds 5] [--level 1] [-- CMD ...]
(default CMD: python examples/rl_cartpole.py --steps 2000)"""

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
    p.add_argument("cmd", nargs="*")
    args = p.parse_args()
    cmd = args.cmd or [sys.executable, str(REPO / "examples" / "rl_cartpole.py"), "--steps",
                       "2000"]
    configs = {"without --os": [], "with --os": []}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(args.rounds):
            for name, results in configs.items():
                extra = ["--os"] if name == "with --os" else []
                results.append(run([sys.executable, "-m", "stratoscope", "record", "--level",
                                    str(args.level), *extra, "-o", f"{d}/prof", "--", *cmd]))
    base_wall = statistics.median(w for w, _ in configs["without --os"])
    base_cpu = statistics.median(c for _, c in configs["without --os"])
    print(f"{'configuration (level ' + str(args.level) + ')':<28} {'wall s':>8} {'ratio':>6} "
          f"{'CPU s':>8} {'ratio':>6}")
    for name, results in configs.items():
        wall = statistics.median(w for w, _ in results)
        cpu = statistics.median(c for _, c in results)
        print(f"{name:<28} {wall:>8.3f} {wall / base_wall:>6.3f} {cpu:>8.3f} "
              f"{cpu / base_cpu:>6.3f}")
    print(f"medians of {args.rounds} interleaved rounds; command: {' '.join(cmd)}")


if __name__ == "__main__":
    main()
