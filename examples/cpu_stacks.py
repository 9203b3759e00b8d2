"""A workload for `strato record --sample` (issue 19, item 3): two CPU-bound operations whose
flame graphs must differ.

- ``pure_python``: a pure-Python loop (``python_spin``): its samples sit in the interpreter,
  under the Python frame ``python_spin``;
- ``numpy_blas``: repeated matrix products (``numpy_matmul``): its samples sit in OpenBLAS's
  GEMM kernels (or numpy's own loops), under the Python frame ``numpy_matmul``.

Run it under stratoscope:

    strato record --sample -o prof -- python examples/cpu_stacks.py
    strato export prof --folded stacks.folded    # or --firefox profile.json
    strato report prof -o report.html           # a flame graph per operation

Each operation lasts about ``--seconds`` (default 1.0 s). The annotations are no-ops when
stratoscope is not installed or not recording.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

try:
    import stratoscope as rls
except ImportError:  # the example runs without stratoscope too
    rls = None


def operation(name):
    return rls.operation(name) if rls is not None else contextlib.nullcontext()


def python_spin(seconds: float) -> int:
    total = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for i in range(2000):
            total += i * i % 7
    return total


def numpy_matmul(seconds: float) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256))
    b = rng.standard_normal((256, 256))
    acc = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        acc += float((a @ b)[0, 0])
    return acc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.rounds):
        with operation("pure_python"):
            python_spin(args.seconds / args.rounds)
        with operation("numpy_blas"):
            numpy_matmul(args.seconds / args.rounds)


if __name__ == "__main__":
    main()
