"""MetaSchedule with its LocalRunner vs with stratoscope's StratoRunner (the strato-measure
engine), on one TIR matmul: total tuning time and the chosen schedule's latency re-measured in
isolation for each. Needs apache-tvm 0.27 + psutil; see docs/measure.md.

    python python/benchmarks/measure_tvm_compare.py --n 128 --trials 64 --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time

import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, LocalRunner

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_tvm_runner():
    path = os.path.join(os.path.dirname(HERE), "stratoscope", "tvm_runner.py")
    spec = importlib.util.spec_from_file_location("_strato_tvm_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def matmul(n: int):
    a = te.placeholder((n, n), name="A", dtype="float32")
    b = te.placeholder((n, n), name="B", dtype="float32")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def tune(mod, target, runner, builder, trials, per_iter, seed):
    with tempfile.TemporaryDirectory() as work_dir:
        t0 = time.perf_counter()
        db = ms.tune_tir(
            mod=mod,
            target=target,
            work_dir=work_dir,
            max_trials_global=trials,
            num_trials_per_iter=per_iter,
            runner=runner,
            builder=builder,
            cost_model="random",
            seed=seed,
        )
        elapsed = time.perf_counter() - t0
        sch = ms.tir_integration.compile_tir(db, mod, target)
    return elapsed, sch


def isolated_latency(sch, target, n, passes=7):
    from tvm.driver import build as tvm_build  # a runtime Module, as MetaSchedule's builder makes

    rt = tvm_build(sch.mod, target=target)
    dev = tvm.cpu(0)
    import numpy as np

    args = [tvm.runtime.tensor(np.random.rand(n, n).astype("float32"), dev) for _ in range(3)]
    f = rt.time_evaluator(rt.entry_name, dev, number=10, repeat=passes)
    return statistics.median(f(*args).results)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--per-iter", type=int, default=16)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    mod = matmul(args.n)
    cfg = EvaluatorConfig(number=3, repeat=3, min_repeat_ms=0, enable_cpu_cache_flush=False)

    tvm_runner = _load_tvm_runner()
    # Both sides build in-process (LocalBuilder's workers spend 15 s importing tensor
    # intrinsics on this machine), so the comparison is between runners.
    builder = tvm_runner.InProcessBuilder()
    t_local, sch_local = tune(mod, target, LocalRunner(evaluator_config=cfg), builder, args.trials, args.per_iter, args.seed)
    strato = tvm_runner.StratoRunner(parallelism="auto", repeats=3, number=3)
    try:
        t_strato, sch_strato = tune(mod, target, strato, builder, args.trials, args.per_iter, args.seed)
        report = strato.finish()
    finally:
        strato.close()
    print(f"tuning time: LocalRunner {t_local:.1f} s, StratoRunner {t_strato:.1f} s", flush=True)
    lat_local = isolated_latency(sch_local, target, args.n)
    lat_strato = isolated_latency(sch_strato, target, args.n)
    out = {
        "workload": f"matmul {args.n}x{args.n}x{args.n} f32, llvm, {args.trials} trials",
        "local_runner": {"time_s": t_local, "best_latency_ns": lat_local * 1e9},
        "strato_runner": {
            "time_s": t_strato,
            "best_latency_ns": lat_strato * 1e9,
            "dp_timeline": [p["dp"] for p in report["dp_timeline"]],
            "delta_by_dp": report["delta_by_dp"],
            "counts": report["counts"],
        },
        "time_reduction_pct": 100 * (t_local - t_strato) / t_local,
        "best_gap_pct": 100 * (lat_strato - lat_local) / lat_local,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
