"""torch.profiler alongside stratoscope: Kineto's events merged into the recording on the
recorder's clock (CLOCK_MONOTONIC). The torch tests are skipped, with a message, where torch is
not installed (run them with `bash scripts/test-torch.sh`, which makes a venv with CPU torch);
the offset estimator's tests need no torch."""

from __future__ import annotations

import json
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import run_script, spans, strato

from stratoscope import _torch

NO_TORCH = "torch is not installed: the Kineto merge is not tested (bash scripts/test-torch.sh)"

# The workload: three matmul / add rounds in operations, and a probe op bracketed by the
# program's own CLOCK_MONOTONIC reads (an independent check of the clock mapping).
PROGRAM = """
    import json, os, sys, threading, time
    import torch
    import stratoscope as rls

    def mono():
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def work():
        for _ in range(3):
            with rls.operation("matmul"):
                x, y = torch.ones(64, 64), torch.ones(64, 64)
                x @ y
            with rls.operation("add"):
                torch.ones(64) + 1
        with rls.operation("probe"):
            z = torch.ones(16)
            before = mono()
            torch.sin(z)
            after = mono()
        side = {}

        def side_thread():  # an op on another thread: Kineto sees it, it goes on that track
            side["tid"] = threading.get_native_id()
            with rls.operation("side"):
                torch.cos(torch.ones(8))

        t = threading.Thread(target=side_thread)
        t.start()
        t.join()
        return before, after, side["tid"]

    if os.environ.get("STRATOSCOPE_OUT"):  # under `strato record --torch`
        before, after, side_tid = work()
    else:
        with rls.profile(sys.argv[2], torch=True):
            before, after, side_tid = work()
    with open(sys.argv[1], "w") as f:
        json.dump({"pid": os.getpid(), "tid": threading.get_native_id(),
                   "probe": [before, after], "side_tid": side_tid}, f)
"""


def _key(e: dict) -> tuple:
    args = e.get("args") or {}
    return (e["name"], args.get("External id"), args.get("Ev Idx"))


def _inside(inner: dict, outer: dict, slack_ns: int = 0) -> bool:
    """``inner`` lies in ``outer`` (exported spans, us), give or take ``slack_ns``."""
    slack = slack_ns / 1000
    return (outer["ts"] - slack <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + slack)


def _check_merge(prof: Path, tmp_path: Path, probe: dict) -> None:
    """Checks one recorded run of PROGRAM (see the comments)."""
    pid, tid = probe["pid"], probe["tid"]
    kineto_file = prof / f"{pid}.kineto.json"
    assert kineto_file.is_file(), f"no Kineto trace kept: {sorted(p.name for p in prof.iterdir())}"
    doc = json.loads(kineto_file.read_text(), parse_float=Decimal)
    base = int(doc.get("baseTimeNanoseconds", 0) or 0)
    # Kineto CPU events of this process, of any thread (other threads' go on their tracks).
    expected = {_key(e): e for e in doc["traceEvents"]
                if e.get("ph") == "X" and e.get("pid") == pid
                and not e["name"].startswith(_torch.MARKER)}
    tids = {e["tid"] for e in expected.values()}
    assert tid in tids, tids

    evs = spans(prof, tmp_path)
    merged = [e for e in evs if e["cat"].startswith("kineto:")]
    by_key = {_key(e): e for e in merged}
    # Every Kineto CPU event of the thread is merged once, and nothing else.
    assert len(by_key) == len(merged), "merged events are not unique"
    missing, extra = set(expected) - set(by_key), set(by_key) - set(expected)
    assert not missing and not extra, (
        f"{len(merged)} merged vs {len(expected)} in the Kineto trace; "
        f"missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}")
    assert not any(e["name"].startswith(_torch.MARKER) for e in evs)

    # The clock record, as the profile directory stores it, maps every event: mono = kineto +
    # offset + drift * (kineto - anchor) (the export is in us with 3 decimals: exact ns).
    out = tmp_path / "imported"
    strato("import", str(prof), "-o", str(out))
    sources = json.loads((out / "metadata.json").read_text())["clock"]["sources"]
    clock = next(s for s in sources if s["name"] == "kineto")
    assert clock["domain"] == "Realtime"
    error = clock["error_ns"]
    print(f"\nkineto clock: offset {clock['offset_ns']} ns, drift {clock['drift_ppb']} ppb, "
          f"error +-{error} ns ({clock['method']})")
    assert error is not None and 0 <= error <= 20_000, clock
    for key, e in by_key.items():
        k = expected[key]
        k_start = base + int(k["ts"] * 1000)
        mono = k_start + clock["offset_ns"] + round(
            clock["drift_ppb"] * (k_start - clock["anchor_ns"]) / 1e9)
        assert abs(round(Decimal(str(e["ts"])) * 1000) - mono) <= 1, (key, e["ts"], mono)
        assert abs(round(Decimal(str(e["dur"])) * 1000) - int(k["dur"] * 1000)) <= 1, key
        assert e["tid"] == k["tid"], (key, e["tid"], k["tid"])

    # The op run on another thread is on that thread's track, inside its operation there.
    side_ops = [e for e in merged if e["tid"] == probe["side_tid"]]
    if any(k["tid"] == probe["side_tid"] for k in expected.values()):
        (side,) = [e for e in evs if e["cat"] == "operation" and e["name"] == "side"]
        cos = [e for e in side_ops if e["name"] == "aten::cos"]
        assert cos and all(_inside(c, side, error) for c in cos), (cos, side)
    else:  # torch's CPU profiler follows only the thread that started it (and its own)
        print("\nKineto recorded no event of the side thread")

    # Independent check: the probe op lies within the program's own CLOCK_MONOTONIC reads.
    before, after = probe["probe"]
    sin = [e for e in merged if e["name"] == "aten::sin"]
    assert len(sin) == 1
    s_start = round(Decimal(str(sin[0]["ts"])) * 1000)
    s_end = s_start + round(Decimal(str(sin[0]["dur"])) * 1000)
    assert before - error <= s_start and s_end <= after + error, (
        f"aten::sin at [{s_start}, {s_end}] outside the program's bracket [{before}, {after}] "
        f"(error {error} ns)")

    # Kineto's ops are nested in the operations that ran them (within the clock's error: the
    # first op of an operation starts 1-3 us after it).
    ops = {name: [e for e in evs if e["cat"] == "operation" and e["name"] == name]
           for name in ("matmul", "add", "probe")}
    assert [len(v) for v in ops.values()] == [3, 3, 1]
    for op_name, aten in (("matmul", "aten::matmul"), ("matmul", "aten::mm"),
                          ("add", "aten::add"), ("probe", "aten::sin")):
        events = [e for e in merged if e["name"] == aten]
        assert len(events) == len(ops[op_name]), (aten, len(events))
        for op in ops[op_name]:
            assert sum(_inside(e, op, error) for e in events) == 1, (
                f"{aten} not inside its {op_name} operation at {op['ts']} us")
    every_op = [e for e in evs if e["cat"] == "operation"]
    assert all(any(_inside(e, op, error) for op in every_op) for e in merged
               if e["cat"] == "kineto:cpu_op"), "a Kineto op outside every operation"
    margins = [min(e["ts"] - op["ts"], op["ts"] + op["dur"] - e["ts"] - e["dur"]) * 1000
               for e in merged for op in every_op if _inside(e, op, error)]
    print(f"closest Kineto op to an edge of its operation: {min(margins):.0f} ns inside")

    # The profiler's own start/stop are Overhead, not Backend time of the workload: the profile
    # hook recorded nothing during them, and every span it recorded while the profiler ran
    # lies in an operation.
    overhead = sorted((e for e in evs if e["cat"] == "kineto_overhead"), key=lambda e: e["ts"])
    assert [e["name"] for e in overhead] == ["torch.profiler start", "torch.profiler stop + merge"]
    hook = [e for e in evs if e["cat"] in ("backend", "library", "python")]
    leaked = [e["name"] for e in hook if any(
        e["ts"] < o["ts"] + o["dur"] and o["ts"] < e["ts"] + e["dur"] for o in overhead)]
    assert not leaked, f"hook spans during the profiler's start/stop: {leaked[:5]}"
    window = {"ts": overhead[0]["ts"], "dur": overhead[1]["ts"] - overhead[0]["ts"]}
    outside = [e["name"] for e in hook if _inside(e, window)
               and not any(_inside(e, op) for op in every_op)]
    assert not outside, f"hook spans outside the operations: {outside[:5]}"

    # The summary the merge wrote.
    meta = _rank_metadata(tmp_path)
    summary = meta["metadata"][f"kineto:{pid}"]
    assert summary["merged"] == len(expected)
    assert summary["error_ns"] == error
    assert summary["skipped"].get("other thread", 0) == 0

    # `strato breakdown`: the matmul operation's Backend time includes the `@` that only Kineto
    # sees (the profile hook sees the torch.ones calls, not the operator).
    bd = json.loads(strato("breakdown", str(prof), "--json").stdout)
    proc = next(p for p in bd["processes"] if p["pid"] == pid)
    backend = sum(r["time_ns"] for r in proc["rows"]
                  if r["operation"] == "matmul" and r["cpu_level"] == "Backend")
    aten_matmul = sum(round(Decimal(str(e["dur"])) * 1000) for e in merged
                      if e["name"] == "aten::matmul")
    assert backend >= 0.95 * aten_matmul, (backend, aten_matmul)
    info = json.loads(strato("info", str(prof), "--json").stdout)
    assert info["events_by_category"]["kineto:cpu_op"] == len(expected)


def _rank_metadata(tmp_path: Path) -> dict:
    doc = json.loads((tmp_path / "export.json").read_text())
    return doc["otherData"]["ranks"][0]["metadata"]


def test_torch_profiler_merge(tmp_path, profile_dir):
    pytest.importorskip("torch", reason=NO_TORCH)
    probe_file = tmp_path / "probe.json"
    run_script(tmp_path, PROGRAM, str(probe_file), str(profile_dir))
    _check_merge(profile_dir, tmp_path, json.loads(probe_file.read_text()))


def test_record_cli_torch(tmp_path, profile_dir):
    pytest.importorskip("torch", reason=NO_TORCH)
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(PROGRAM))
    probe_file = tmp_path / "probe.json"
    proc = strato("record", "--torch", "-o", str(profile_dir), "--", sys.executable,
                  str(script), str(probe_file))
    assert "matmul" in proc.stdout
    _check_merge(profile_dir, tmp_path, json.loads(probe_file.read_text()))


# The estimator alone (no torch): synthetic markers on a Kineto clock that runs `true` ns behind
# ours, each bracketed by reads of our clock.

def _doc(markers, kineto):
    return {"baseTimeNanoseconds": 1_000_000_000_000,
            "traceEvents": [{"ph": "X", "cat": "user_annotation", "name": name, "pid": 1,
                             "tid": 1, "ts": Decimal(s - 1_000_000_000_000) / 1000,
                             "dur": Decimal(e - s) / 1000}
                            for (_, name, _, _), (s, e) in zip(markers, kineto, strict=True)]}


def _synthetic(true_offset, drift_ppb=0.0, n=8):
    markers, kineto = [], []
    t = 5_000_000_000
    for group, at in (("start", 0), ("stop", 60_000_000_000)):
        for i in range(n):
            before = t + at + i * 100_000
            start, end = before + 700 + 37 * i, before + 3_000 + 11 * i  # ours
            after = end + 900
            k = [x - true_offset - round(drift_ppb * (x - t) / 1e9) for x in (start, end)]
            markers.append((group, f"{_torch.MARKER}{len(markers)}", before, after))
            kineto.append(tuple(k))
    return markers, kineto


def test_offset_estimate_brackets_the_true_offset():
    true = -1_795_296_243_421_293_962
    markers, kineto = _synthetic(true)
    est = _torch.estimate_offset(_doc(markers, kineto), markers)
    assert est["markers"] == 16 and est["drift_ppb"] == 0.0
    assert abs(est["offset_ns"] - true) <= est["error_ns"] <= 1_000, est


def test_offset_estimate_fits_drift_when_start_and_stop_disagree():
    true = 123_456_789
    markers, kineto = _synthetic(true, drift_ppb=-20_000.0)  # 20 ppm: 1.2 ms over 60 s
    est = _torch.estimate_offset(_doc(markers, kineto), markers)
    assert abs(est["drift_ppb"] + 20_000.0) < 100, est
    for (_, _, before, after), (ks, _) in zip(markers, kineto, strict=True):
        mono = ks + est["offset_ns"] + est["drift_ppb"] * (ks - est["anchor_ns"]) / 1e9
        assert before - est["error_ns"] <= mono <= after + est["error_ns"]


def test_offset_estimate_without_markers():
    assert _torch.estimate_offset({"traceEvents": []}, [])["offset_ns"] is None


def test_merge_maps_and_sorts_kineto_events(tmp_path, profile_dir):
    """merge() on a synthetic Kineto trace (no torch): one marker puts Kineto 1e18 ns behind
    us; this thread's CPU events are merged at exactly that offset, the rest are counted."""
    probe = tmp_path / "probe.json"
    run_script(tmp_path, f"""
        import json, os, threading, warnings
        from decimal import Decimal
        import stratoscope as rls
        from stratoscope import _native, _torch

        pid, tid = os.getpid(), threading.get_native_id()
        true = 10**18
        with rls.profile({str(profile_dir)!r}, level=1):
            b = _native.now_ns() - 10**6
            kb = b - true + 1000  # marker: Kineto start 1 us after b, 1 us long, a = b + 3 us
            markers = [("start", _torch.MARKER + "0", b, b + 3000)]
            base = 1_700_000_000_000_000_000
            us = lambda ns: Decimal(ns - base) / 1000
            ev = lambda name, ts, **kw: {{"ph": "X", "cat": "cpu_op", "name": name, "pid": pid,
                                          "tid": tid, "ts": us(ts), "dur": Decimal("2.5"), **kw}}
            doc = {{"baseTimeNanoseconds": base, "traceEvents": [
                {{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid}},
                dict(ev(markers[0][1], kb), cat="user_annotation", dur=Decimal(1)),
                ev("aten::mm", kb + 5000),
                ev("aten::add", kb + 9000, args={{"External id": 7}}),
                ev("aten::mm", kb + 7000, tid=tid + 1),
                ev("PyTorch Profiler (0)", kb, pid="Spans", cat="Trace"),
                {{"ph": "i", "name": "x", "pid": pid, "tid": tid, "ts": us(kb)}},
            ]}}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                summary = _torch.merge(doc, markers)
        json.dump({{"summary": summary, "b": b, "tid": tid,
                    "warned": [str(w.message) for w in caught]}},
                  open({str(probe)!r}, "w"))
    """)
    out = json.loads(probe.read_text())
    summary, b = out["summary"], out["b"]
    assert summary["offset_ns"] == 10**18 and summary["error_ns"] == 1000, summary
    assert summary["merged"] == 3 and summary["by_category"] == {"cpu_op": 3}
    assert summary["other_threads"] == 1
    assert summary["skipped"] == {"clock marker": 1, "not this process": 1,
                                  "not a span": 1}, summary
    assert out["warned"] == []
    tid = out["tid"]
    cpu_ops = [e for e in spans(profile_dir, tmp_path) if e["cat"] == "kineto:cpu_op"]
    # The other thread's event is on that thread's own track, at the same offset.
    (other,) = [e for e in cpu_ops if e["tid"] == tid + 1]
    assert other["name"] == "aten::mm"
    assert round(Decimal(str(other["ts"])) * 1000) - b == 8000
    merged = sorted((e for e in cpu_ops if e["tid"] == tid), key=lambda e: e["ts"])
    assert [e["name"] for e in merged] == ["aten::mm", "aten::add"]
    # kineto start = b + 1000 - true (+5000 / +9000) -> ours b + 6000 / b + 10000, exactly.
    assert [round(Decimal(str(e["ts"])) * 1000) - b for e in merged] == [6000, 10000]
    assert all(round(Decimal(str(e["dur"])) * 1000) == 2500 for e in merged)
    assert merged[1]["args"]["External id"] == 7
