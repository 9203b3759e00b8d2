"""Cost of one annotation (enter + exit) and of one intercepted native call, beside baselines
measured in the same run: a no-op context manager (reused, and a no-op class constructed on
each use, `with NoOp("x"):`, the like-for-like baseline of `with stratoscope.operation("x"):`),
and, where torch is importable, torch.profiler.record_function with and without an active
profiler. Prints a table (ns per operation, ratio to the baseline) and the two ratios issue 19
sets targets for (built each time <= 2x the constructed no-op; reused <= 1.5x the reused no-op).
The loops are measured in interleaved rounds (best of each), so a burst of load on a shared
machine hits all of them alike. Nothing is asserted.
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


class NoOp:
    """A no-op annotation class as a user would write one: keeps its name."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def loop_new_noop(n):
    for _ in range(n):
        with NoOp("step"):
            pass


def interleaved(loops: dict, n: int, rounds: int = 7) -> dict:
    """Best ns per call of each loop over `rounds` interleaved rounds."""
    best = {name: float("inf") for name in loops}
    for _ in range(rounds):
        for name, fn in loops.items():
            t0 = time.perf_counter_ns()
            fn(n)
            best[name] = min(best[name], (time.perf_counter_ns() - t0) / n)
    return best


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
    with tempfile.TemporaryDirectory() as d:
        stratoscope.start(d, level=1)
        best = interleaved({
            "empty": loop_empty,
            "noop": loop_cm(NoopCM()),
            "null": loop_cm(contextlib.nullcontext()),
            "noop_new": loop_new_noop,
            "ann": loop_cm(stratoscope.operation("step")),
            "ann_new": loop_new_op,
        }, n)
        stratoscope.stop()
    base = best["empty"]
    noop, null, noop_new, ann, ann_new = (
        best[k] - base for k in ("noop", "null", "noop_new", "ann", "ann_new"))
    rows.append(("no-op Python context manager (enter+exit)", noop, 1.0))
    rows.append(("contextlib.nullcontext (enter+exit)", null, null / noop))
    rows.append(("no-op class constructed each time, NoOp(name)", noop_new, noop_new / noop))
    rows.append(("stratoscope.operation, reused object", ann, ann / noop))
    rows.append(("stratoscope.operation(name) each time", ann_new, ann_new / noop))
    targets = [
        ("operation(name) each time / NoOp(name) each time", ann_new / noop_new, 2.0),
        ("operation reused / no-op reused", ann / noop, 1.5),
    ]
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
    print()
    print(f"{'target (issue 19, recording at level 1)':<52} {'ratio':>9} {'limit':>7}")
    for name, ratio, limit in targets:
        verdict = "ok" if ratio <= limit else "OVER"
        print(f"{name:<52} {ratio:>9.2f} {limit:>7.1f} {verdict}")


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
