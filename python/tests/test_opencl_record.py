"""`strato record --opencl` on a real pyopencl program (PoCL), with stratoscope annotations:
the Python recorder and the OpenCL layer write two files for one process, and the breakdown
attributes device time to the operation that enqueued it (issue 6, items 4 and 5)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import REPO, strato

# `cargo build -p strato-opencl-layer` (scripts/test.sh runs it) puts the layer in target/debug;
# `cargo test` alone leaves it in target/debug/deps. The newest one is used.
_CANDIDATES = [REPO / "target" / "debug" / "libstrato_opencl_layer.so",
               REPO / "target" / "debug" / "deps" / "libstrato_opencl_layer.so"]
LAYER = max((p for p in _CANDIDATES if p.exists()), key=lambda p: p.stat().st_mtime,
            default=_CANDIDATES[0])
NOT_BUILT = ("the OpenCL layer or demo is not built "
             "(cargo build -p strato-opencl-layer -p strato-opencl-examples)")

pytest.importorskip("pyopencl")


@pytest.mark.skipif(not LAYER.exists(), reason=NOT_BUILT)
def test_record_pyopencl_program_attributes_device_time_to_operations(tmp_path):
    profile = tmp_path / "prof"
    proc = strato("record", "--opencl", "--json", "-o", str(profile), "--", "python3",
                  str(REPO / "examples" / "opencl" / "usecases.py"),
                  env={"STRATOSCOPE_OPENCL_LAYER": str(LAYER)})
    report = json.loads(proc.stdout)
    files = sorted(p.name for p in profile.iterdir() if p.suffix == ".strato")
    assert len(files) == 2 and any(f.endswith("-opencl.strato") for f in files), files

    process = report["processes"][0]
    by_op: dict[str, dict[tuple, int]] = {}
    for row in process["rows"]:
        key = (row["resource"], row["cpu_level"])
        by_op.setdefault(row["operation"], {})[key] = by_op.get(row["operation"], {}).get(key, 0) + row["time_ns"]
    assert sum(row["time_ns"] for row in process["rows"]) == process["window_ns"]

    for op in ("many_small_copies", "one_large_copy", "conv_relu_maxpool_matmul", "strided_conv_relu_matmul"):
        rows = by_op[op]
        # The device was busy inside the operation, and the CPU was in the accelerator API.
        assert any(res == "CPU+GPU" for res, _ in rows), (op, rows)
        assert any(level == "AcceleratorApi" for _, level in rows), (op, rows)
    transitions = {(t["operation"], t["from"], t["to"]): t["count"] for t in process["transitions"]}
    # 256 chunks x 3 iterations of clEnqueueWriteBuffer, plus kernels and reads.
    assert transitions[("many_small_copies", "Python", "AcceleratorApi")] >= 3 * 256
    assert transitions[("many_small_copies", "Python", "AcceleratorApi")] > \
        10 * transitions[("one_large_copy", "Python", "AcceleratorApi")]


@pytest.mark.skipif(not LAYER.exists(), reason=NOT_BUILT)
def test_record_opencl_calibrate_measures_the_layer(tmp_path):
    # With --opencl, calibration adds the layer's own configurations (annotations with the
    # layer off and at `api`): its API spans get a per-event cost, and API calls that device
    # tracing inflates get a difference of averages (never the ones that wait for the device).
    profile = tmp_path / "prof"
    proc = strato("record", "--opencl", "--calibrate", "--repeat", "1", "--json", "-o",
                  str(profile), "--", "python3", str(REPO / "examples" / "opencl" / "usecases.py"),
                  env={"STRATOSCOPE_OPENCL_LAYER": str(LAYER)})
    doc = json.loads(proc.stdout)
    cal = json.loads((profile / "calibration.json").read_text())
    runs = {r["name"]: r for r in cal["runs"]}
    assert runs["annotations, opencl off"]["counts"][0]["opencl_api_span"] == 0
    api_spans = runs["annotations, opencl api"]["counts"][0]["opencl_api_span"]
    assert api_spans > 3 * 256  # every small copy is an API call
    assert runs["full"]["counts"][0]["opencl_api_span"] == api_spans
    assert "opencl_api_span" in cal["costs_ns"]
    inflation = cal["api_inflation_ns"]
    assert "clEnqueueNDRangeKernel" in inflation and "clSetKernelArg" in inflation, inflation
    assert all(v >= 0 for v in inflation.values())
    assert not {"clFinish", "clWaitForEvents", "clEnqueueWriteBuffer"} & set(inflation)
    # The same figures (read back through the profile's metadata: equal to the last bits).
    assert doc["calibration"]["api_inflation_ns"] == pytest.approx(inflation, rel=1e-12)
    assert isinstance(doc["validation"]["bias_pct"], float)


DEMO = REPO / "target" / "debug" / "strato-opencl-demo"


@pytest.mark.skipif(not (LAYER.exists() and DEMO.exists()), reason=NOT_BUILT)
def test_overhead_per_collection_level(tmp_path):
    # `strato overhead` (Zins tables 4.3-4.8) on the Rust demo's launch-bound workload: every
    # level runs, the baseline is the reference, and each level's recording holds more than the
    # one below it (api: API spans; device: device commands; full: both).
    proc = strato("overhead", "--runs", "2", "--json", "--", str(DEMO), "workload", "20",
                  env={"STRATOSCOPE_OPENCL_LAYER": str(LAYER)})
    assert proc.stderr == ""  # no progress drawn when stderr is not a terminal
    doc = json.loads(proc.stdout)
    levels = {row["level"]: row for row in doc["levels"]}
    assert list(levels) == ["baseline", "api", "device", "full"]
    assert all(row["runs"] == 2 and row["wall_mean_s"] > 0 for row in levels.values())
    assert levels["baseline"]["wall_overhead_pct"] == 0.0
    # The workload prints its own time (workload_ns): it is measured at every level.
    assert all(row["workload_mean_s"] > 0 for row in levels.values())
    size = {name: row["recording_bytes_mean"] for name, row in levels.items()}
    assert size["baseline"] < size["api"] < size["full"]
    assert size["baseline"] < size["device"] < size["full"]
