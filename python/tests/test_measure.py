"""Tests of the Python side of strato-measure: the frame protocol, the one-shot and server APIs
over the ``strato`` program on the real OpenCL device, and the TVM MetaSchedule runner adapter.

The modules are loaded by file path so that these tests do not need the native ``stratoscope``
extension. Tests needing ``strato``, an OpenCL device or TVM skip cleanly without them.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "stratoscope")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_strato_test_{name}", os.path.join(PKG, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


measure = _load("measure")


def _strato():
    try:
        return measure.find_strato()
    except measure.MeasureError:
        return None


def _have_device() -> bool:
    if shutil.which("clinfo") is None:
        return False
    out = subprocess.run(["clinfo", "-l"], capture_output=True, text=True).stdout
    return "Device" in out


needs_engine = pytest.mark.skipif(
    _strato() is None or not _have_device(), reason="needs the strato program and an OpenCL device"
)

SAXPY = (
    "__kernel void saxpy(__global float* y, __global const float* x, float a, int n) {"
    " int i = get_global_id(0); if (i < n) y[i] = a * x[i] + y[i]; }"
)


def saxpy(name: str, n: int) -> dict:
    return {
        "name": name,
        "source": SAXPY,
        "kernel": "saxpy",
        "global": [n],
        "local": [16],
        "args": [
            {"buffer": {"bytes": 4 * n, "init": "ones"}},
            {"buffer": {"bytes": 4 * n, "init": "random"}},
            {"float": 2.0},
            {"int": n},
        ],
        "params": {"n": n},
    }


def test_frames_round_trip():
    buf = io.BytesIO()
    measure.write_frame(buf, {"type": "shutdown"})
    measure.write_frame(buf, {"type": "result", "id": 3, "outcome": {"status": "timeout", "after_s": 4.0}})
    buf.seek(0)
    assert measure.read_frame(buf) == {"type": "shutdown"}
    assert measure.read_frame(buf)["outcome"]["status"] == "timeout"
    assert measure.read_frame(buf) is None


@needs_engine
def test_one_shot_measure_reports_statuses_and_best():
    broken = dict(saxpy("broken", 64), source="__kernel void saxpy() { nope; }")
    report = measure.measure([saxpy("a", 1024), broken, saxpy("b", 4096)], parallelism=1, repeats=3, timeout=120)
    status = {r["name"]: r["status"] for r in report["results"]}
    assert status == {"a": "ok", "broken": "build_failed", "b": "ok"}
    assert report["best"]["name"] in ("a", "b")
    ok = [r for r in report["results"] if r["status"] == "ok"]
    assert all(r["reported_latency_ns"] > 0 and len(r["runs_ns"]) == 3 for r in ok)


@needs_engine
def test_server_keeps_react_state_across_batches():
    with measure.MeasureServer(parallelism="auto", repeats=3, params={"max_dp": 2, "min_round": 4}) as server:
        first = server.measure([saxpy(f"a{i}", 512 << (i % 3)) for i in range(4)])
        assert [r["status"] for r in first] == ["ok"] * 4
        assert server.dp is not None
        second = server.measure([saxpy(f"b{i}", 1024) for i in range(4)])
        assert [r["index"] for r in second] == [4, 5, 6, 7]
        report = server.finish()
    assert report["best"] is not None
    assert any(d["decision"] == "rank_selection" for d in report["log"])
    assert any(d["decision"] == "react" for d in report["log"])


# --- TVM MetaSchedule adapter -----------------------------------------------------------------

def _tvm_available() -> bool:
    try:
        import tvm  # noqa: F401
        from tvm.s_tir import meta_schedule  # noqa: F401
    except Exception:
        return False
    return True


needs_tvm = pytest.mark.skipif(not _tvm_available(), reason="needs apache-tvm 0.27 (not in CI requirements)")


def _matmul(n: int):
    from tvm import te

    a = te.placeholder((n, n), name="A", dtype="float32")
    b = te.placeholder((n, n), name="B", dtype="float32")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


@needs_tvm
@pytest.mark.skipif(_strato() is None, reason="needs the strato program")
def test_tvm_runner_adapter_tunes_a_matmul(tmp_path):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    tvm_runner = _load("tvm_runner")
    runner = tvm_runner.StratoRunner(parallelism="auto", repeats=3, params={"max_dp": 2})
    try:
        database = ms.tune_tir(
            mod=_matmul(64),
            target=tvm.target.Target({"kind": "llvm", "num-cores": 2}),
            work_dir=str(tmp_path),
            max_trials_global=8,
            num_trials_per_iter=8,
            runner=runner,
            builder=tvm_runner.InProcessBuilder(),
            cost_model="random",
        )
        records = database.get_all_tuning_records()
        assert len(records) > 0
        ok = [r for r in runner.results if r["status"] == "ok"]
        assert ok, runner.results
        assert all(r["reported_latency_ns"] > 0 for r in ok)
        report = runner.finish()
        assert report["best"] is not None
    finally:
        runner.close()
