"""`strato advise` on a real OpenCL recording (PoCL): the Zins 4.5.5 use case of
examples/opencl/usecases.py copies a 4 MiB dataset host-to-device as 256 chunks of 16 KiB,
three times, then as one 4 MiB copy. The small-copies rule must find exactly the 3 x 256 small
copies (the large copies are not small), in bursts of 256 (issue 17)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, strato
from test_opencl_record import LAYER, NOT_BUILT

pytest.importorskip("pyopencl")


@pytest.mark.skipif(not LAYER.exists(), reason=NOT_BUILT)
def test_advise_finds_the_many_small_copies_of_the_opencl_use_case(tmp_path):
    profile = tmp_path / "prof"
    strato("record", "--opencl", "-o", str(profile), "--", "python3",
           str(REPO / "examples" / "opencl" / "usecases.py"),
           env={"STRATOSCOPE_OPENCL_LAYER": str(LAYER), "CHUNKS": "256"})
    report = json.loads(strato("advise", str(profile), "--all", "--json").stdout)
    small = [f for f in report["findings"] if f["rule"] == "small-copies"]
    assert len(small) == 1, [f["rule"] for f in report["findings"]]
    f = small[0]
    assert "ran 768 small HtoD copies" in f["message"], f["message"]
    # 3 iterations x 256 chunks x 16 KiB = 3 x 4 MiB: the large copies are not counted.
    assert f"{3 * (4 << 20)} bytes known" in f["message"], f["message"]
    assert [e["name"] for e in f["evidence"][:3]] == ["256 small HtoD copies in a row"] * 3
    assert f["time_ns"] > 0 and f["docs"] == "docs/advise.md#small-copies"
    # The floor hides it by default only when it is below 1% of the window; with a floor of 0
    # it is always there.
    floor0 = json.loads(strato("advise", str(profile), "--floor", "0", "--json").stdout)
    assert any(x["rule"] == "small-copies" for x in floor0["findings"])
    # Disabled, it is gone and the rule says so.
    off = json.loads(strato("advise", str(profile), "--all", "--disable", "small-copies",
                            "--json").stdout)
    assert not any(x["rule"] == "small-copies" for x in off["findings"])
    assert {r["rule"]: r["enabled"] for r in off["rules"]}["small-copies"] is False
