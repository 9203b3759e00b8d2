"""`strato whatif` and `advise` on a real OpenCL recording (PoCL) of a blocking write: the
demo's `pair upload-blocking/upload-second-queue` alternates a step whose op `upload` writes
8 MiB blocking on the step's queue (the host waits for the matmul queued ahead and for the copy
before `postprocess`) with one that writes it non-blocking on a second queue (issue 29 item 4's
"blocking copies made non-blocking on a second queue"). The blocking write is a host
synchronisation and a copy's call: `--no-sync upload` and `--async-copies all` predict that
the odd steps gain about `postprocess` (which then overlaps the device) and the even steps
nothing; `advise` counts the blocking writes as host stalls. How close the prediction comes to
the measured B is `benches/whatif_pairs.py`'s to judge (it needs repeated runs)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import strato
from test_opencl_record import DEMO, LAYER, NOT_BUILT


def _record(tmp_path, variant: str, steps: int):
    out = tmp_path / "rec"
    env = dict(os.environ, STRATOSCOPE_OUT=str(out), OPENCL_LAYERS=str(LAYER),
               POCL_MAX_PTHREAD_COUNT="1", POCL_CPU_MAX_CU_COUNT="1")
    done = subprocess.run([str(DEMO), "pair", variant, str(steps)], env=env, check=True,
                          capture_output=True, text=True)
    ran = json.loads(done.stdout.strip().splitlines()[-1])["step_variant"]
    return out, ran


@pytest.mark.skipif(not (LAYER.exists() and DEMO.exists()), reason=NOT_BUILT)
def test_a_blocking_opencl_write_is_a_sync_whatif_removes(tmp_path):
    profile, ran = _record(tmp_path, "upload-blocking/upload-second-queue", 8)
    assert ran == ["upload-blocking", "upload-second-queue"] * 4
    doc = json.loads(strato("whatif", str(profile), "--no-sync", "upload", "--json").stdout)
    replay = {w["number"]: w for w in doc["replay"]["steps"]}
    predicted = {w["number"]: w for w in doc["whatif"]["steps"]}
    assert sorted(replay) == list(range(1, 9))
    for number, w in replay.items():
        p = predicted[number]
        assert w["error_pct"] < 1.0, w  # the replay gives each step back
        gain = p["baseline_ns"] - p["predicted_ns"]
        assert gain == p["gain_ns"]
        if ran[number - 1] == "upload-blocking":
            # The host no longer waits inside the write: `postprocess` (1 ms of host work)
            # runs while the device works, and the step gains at least most of it ...
            assert gain > 0.5e6, (number, gain)
            # ... but no device work: `prepare` (3 ms) and the device's work on the path
            # remain (a loaded machine's late return from the wait is the wait's, and goes).
            kinds = w["path"]["by_kind"]
            assert p["predicted_ns"] >= 2.9e6 + kinds["kernel"] + kinds["copy"], (w, p)
            # The wait the write made is gone from the predicted path.
            assert p["path"]["by_kind"].get("sync_wait", 0) < w["path"]["by_kind"]["sync_wait"]
        else:
            # B's write does not block: nothing under `upload` to remove.
            assert gain == 0, (number, gain)
    # The blocking write is a copy's call: making copies asynchronous selects exactly it (the
    # steps' clFinish still waits) and predicts the same.
    copies = json.loads(strato("whatif", str(profile), "--async-copies", "all", "--json").stdout)
    assert [c["matched_ops"] for c in copies["whatif"]["changes"]] == [4]
    assert [p["predicted_ns"] for p in copies["whatif"]["steps"]] == \
        [predicted[n]["predicted_ns"] for n in sorted(predicted)]
    # Every host synchronisation removed gains the blocking steps at least as much.
    all_syncs = json.loads(strato("whatif", str(profile), "--no-sync", "all", "--json").stdout)
    for p in all_syncs["whatif"]["steps"]:
        if ran[p["number"] - 1] == "upload-blocking":
            assert p["gain_ns"] >= predicted[p["number"]]["gain_ns"] - 1000, p

    # `advise` names the blocking writes as host stalls, one per blocking step.
    advice = json.loads(strato("advise", str(profile), "--all", "--floor", "0", "--json").stdout)
    stalls = [f for f in advice["findings"] if f["rule"] == "host-sync"]
    assert len(stalls) == 1, [f["rule"] for f in advice["findings"]]
    assert "blocking OpenCL transfer" in stalls[0]["message"], stalls[0]["message"]


@pytest.mark.skipif(not (LAYER.exists() and DEMO.exists()), reason=NOT_BUILT)
def test_the_recordings_chrome_export_reads_back_with_the_same_answers(tmp_path):
    """The recording's categories (`opencl`, `opencl_kernel`, `opencl_copy`, ...) have level
    rules for the recorder's format only: exported to Chrome JSON (to share it, or to open it
    in Perfetto UI) and read back as Kineto, each event keeps its level through the
    `args.level` the export writes, so the critical path and the what-if see the same graph
    (before, they came back `Other` and every gain was 0)."""
    profile, _ = _record(tmp_path, "upload-blocking/upload-second-queue", 4)
    exported = tmp_path / "rec.json"
    strato("export", str(profile), "--chrome", str(exported))
    for args in (["--no-sync", "all"], ["--async-copies", "all"]):
        a = json.loads(strato("whatif", str(profile), *args, "--json").stdout)
        b = json.loads(strato("whatif", str(exported), *args, "--json").stdout)
        gains = [[(p["number"], p["gain_ns"]) for p in d["whatif"]["steps"]] for d in (a, b)]
        assert gains[0] == gains[1], (args, gains)
        assert any(g > 0 for _, g in gains[1]), (args, gains)
    info = strato("info", str(exported)).stdout
    assert "DeviceKernel" in info and "AcceleratorApi" in info, info
