"""torch.profiler alongside stratoscope (Kineto events merged on one clock). Skipped, with a
message, where torch is not installed."""

from __future__ import annotations

import pytest

from conftest import run_script, spans


def test_torch_profiler_merge(tmp_path, profile_dir):
    pytest.importorskip("torch", reason="torch is not installed: the Kineto merge is not tested")
    run_script(tmp_path, f"""
        import torch, stratoscope as rls
        with rls.profile({str(profile_dir)!r}, torch=True):
            with rls.operation("matmul"):
                torch.ones(64, 64) @ torch.ones(64, 64)
    """)
    evs = spans(profile_dir, tmp_path)
    op = next(e for e in evs if e["name"] == "matmul")
    kineto = [e for e in evs if e["cat"].startswith("kineto")]
    assert kineto
    assert any(op["ts"] <= e["ts"] <= op["ts"] + op["dur"] for e in kineto)
