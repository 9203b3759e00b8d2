"""A fixed-work, CPU-bound program for the cost of CPU sampling (issue 19 item 5): every
native sample is a timer interrupt in the sampled thread, with the kernel's walk of its user
stack, charged to that thread's CPU time, so a program that only computes pays it in full.
Used to check that `strato record --sample --calibrate` measures and removes that cost
(python/tests/test_sample_calibration.py, python/benchmarks/bench_levels.py --calibrated):

    strato record --sample=999 --calibrate --level 1 -o prof -- python examples/sample_spin.py

``--steps`` annotated operations (default 20), each a pure-Python loop of ``--iters``
iterations (default 10,000: about 0.3 s of CPU in all here). Fixed work, not fixed time, so
the instrumented and uninstrumented runs do the same thing. The annotations are no-ops when
stratoscope is not installed or not recording.
"""

from __future__ import annotations

import argparse
import contextlib

try:
    import stratoscope as rls
except ImportError:  # the example runs without stratoscope too
    rls = None


def operation(name):
    return rls.operation(name) if rls is not None else contextlib.nullcontext()


def spin(iters: int) -> int:
    total = 0
    for i in range(iters):
        total += sum(j * j for j in range(20)) % (i + 7)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--iters", type=int, default=10_000)
    args = p.parse_args()
    total = 0
    for _ in range(args.steps):
        with operation("spin"):
            total += spin(args.iters)
    print(total)


if __name__ == "__main__":
    main()
