"""Cost of one annotation (enter + exit) and of one intercepted native call, beside baselines
measured in the same run: a no-op context manager, and, where torch is importable,
torch.profiler.record_function with and without an active profiler. Prints a table (ns per
operation, ratio to the baseline); nothing is asserted.
Run: python python/benchmarks/bench_annotations.py [--n 200000]"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
import time

import numpy as np

import stratoscope


class NoopCM:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def per_op(fn, n: int, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def loop_empty(n):
    for _ in range(n):
        pass


def loop_cm(cm):
    def run(n):
        for _ in range(n):
            with cm:
                pass
    return run


def loop_new_op(n):
    op = stratoscope.operation
    for _ in range(n):
        with op("step"):
            pass


def loop_np(n):
    empty = np.empty
    for _ in range(n):
        empty(0)


def loop_len(n):
    x = [1]
    for _ in range(n):
        len(x)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=200_000)
    args = p.parse_args()
    n = args.n
    rows = []
    base = per_op(loop_empty, n)
    noop = per_op(loop_cm(NoopCM()), n) - base
    null = per_op(loop_cm(contextlib.nullcontext()), n) - base
    rows.append(("no-op Python context manager (enter+exit)", noop, 1.0))
    rows.append(("contextlib.nullcontext (enter+exit)", null, null / noop))
    with tempfile.TemporaryDirectory() as d:
        stratoscope.start(d, level=1)
        op = stratoscope.operation("step")
        ann = per_op(loop_cm(op), n) - base
        ann_new = per_op(loop_new_op, n) - base
        stratoscope.stop()
    rows.append(("stratoscope.operation, reused object", ann, ann / noop))
    rows.append(("stratoscope.operation(name) each time", ann_new, ann_new / noop))
    rows.extend(torch_rows(n, base, noop))
    # Interception: a numpy builtin (classified Library: recorded) and len() (not classified:
    # counted only), with the C hook, against no hook and against sys.setprofile(Python fn).
    np_plain = per_op(loop_np, n)
    len_plain = per_op(loop_len, n)
    with tempfile.TemporaryDirectory() as d:
        stratoscope.start(d, level=3)
        np_hook = per_op(loop_np, n)
        len_hook = per_op(loop_len, n)
        stratoscope.stop()
    sys.setprofile(lambda frame, event, arg: None)
    np_py = per_op(loop_np, n)
    len_py = per_op(loop_len, n)
    sys.setprofile(None)
    rows.append(("intercepted numpy call, recorded (C hook)", np_hook - np_plain, float("nan")))
    rows.append(("  same call, sys.setprofile(Python callback)", np_py - np_plain,
                 (np_py - np_plain) / max(np_hook - np_plain, 1e-9)))
    rows.append(("builtin call seen and not recorded (C hook)", len_hook - len_plain,
                 float("nan")))
    rows.append(("  same call, sys.setprofile(Python callback)", len_py - len_plain,
                 (len_py - len_plain) / max(len_hook - len_plain, 1e-9)))
    print(f"{'what':<52} {'ns/op':>9} {'ratio':>7}")
    for name, ns, ratio in rows:
        print(f"{name:<52} {ns:>9.1f} {ratio:>7.2f}")
    print("ratio: annotations vs the no-op context manager; Python-callback rows vs the C hook")


def loop_new_rf(record_function):
    def run(n):
        for _ in range(n):
            with record_function("step"):
                pass
    return run


def torch_rows(n: int, base: float, noop: float) -> list[tuple[str, float, float]]:
    """torch.profiler.record_function, built each time as it is normally used (and reused,
    like the reused stratoscope.operation row), with no profiler running and under an active
    CPU profiler (which stores every range: fewer iterations, so its buffer stays small)."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function
    except ImportError:
        return [("torch record_function (torch not installed)", math.nan, math.nan)]
    rows = []
    rf_new = per_op(loop_new_rf(record_function), n) - base
    rf_reused = per_op(loop_cm(record_function("step")), n) - base
    rows.append(("torch record_function(name) each time, no profiler", rf_new, rf_new / noop))
    rows.append(("torch record_function, reused, no profiler", rf_reused, rf_reused / noop))
    with profile(activities=[ProfilerActivity.CPU]):
        on_new = per_op(loop_new_rf(record_function), n // 10, repeat=3) - base
        on_reused = per_op(loop_cm(record_function("step")), n // 10, repeat=3) - base
    rows.append(("torch record_function(name) each time, profiling", on_new, on_new / noop))
    rows.append(("torch record_function, reused, profiling", on_reused, on_reused / noop))
    print(f"torch {torch.__version__}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
