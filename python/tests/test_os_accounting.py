"""What `strato record --os` accounts for about itself (issue 19 item 5), on a live run of a
tight loop of one-byte reads from /dev/zero (hundreds of thousands of system calls a second,
the collector's heaviest load, on a busy 2-core machine):

- every system call of the program is counted in its thread's OS-event counter
  (`os_events/<tid>`, the input of the OS level's calibration), even when the collector falls
  behind: the counter's last value is at least the number of reads the program made (it
  prints it) less the records the kernel reported dropped;
- every system call is in its process's per-call counts too (`strato.os` `syscalls`, counted
  at entry; `strato info` shows the process's total): at least the reads the program made,
  with `timed` (exit matched) of them having their time;
- the time the program's threads were runnable behind strato's collectors is measured from
  the scheduler records, per thread (`collector_wait_ns/<tid>` counters), and reported on the
  launcher's summary line and, per process, by `strato info`: the figures agree;
- `strato info` lists what the kernel dropped or throttled as import notes. Throttled: none
  here (the kernel does not throttle tracepoints sampled at every event). Dropped: on a busy
  machine the ring buffers kept up; on a quiet one the loop makes 1.6 million calls a second
  and the kernel drops records, which are counted (`os_lost_records`) and warned about, and
  the counts above are checked net of them (the notes themselves are checked on synthetic
  metadata in strato-io's tests)."""

from __future__ import annotations

import json
import re
import sys

import pytest

from conftest import strato
from test_os import perf_permitted

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not perf_permitted(),
    reason="system-wide perf events need root, CAP_PERFMON or perf_event_paranoid=-1")

TIGHT_LOOP = (
    "import os, time\n"
    "fd = os.open('/dev/zero', os.O_RDONLY)\n"
    "end = time.monotonic() + 1.0\n"
    "n = 0\n"
    "while time.monotonic() < end:\n"
    "    for _ in range(1000):\n"
    "        os.read(fd, 1)\n"
    "    n += 1000\n"
    "print(n)\n"
)


def doc_os_metadata(prof, pid: int) -> dict:
    """Process `pid`'s `strato.os` metadata, read from its OS file by the importer (the rank
    metadata's `processes[].metadata`, in `strato export --chrome`'s `otherData`)."""
    out = prof.parent / "meta.json"
    strato("export", str(prof), "--chrome", str(out))
    doc = json.loads(out.read_text())
    for rank in doc["otherData"]["ranks"]:
        for p in rank["metadata"]["processes"]:
            if p["pid"] == pid and "strato.os" in p.get("metadata", {}):
                return p["metadata"]["strato.os"]
    raise AssertionError(f"no strato.os metadata for process {pid}")


def test_system_calls_and_collector_wait_are_accounted(tmp_path):
    prof = tmp_path / "prof"
    proc = strato("record", "--os", "--level", "1", "-o", str(prof), "--", sys.executable,
                  "-c", TIGHT_LOOP)
    reads = int(re.search(r"^(\d+)$", proc.stdout, re.M).group(1))
    assert reads >= 10_000, proc.stdout
    summary = re.search(r"runnable behind strato's collectors ([0-9.]+) ms", proc.stderr)
    assert summary, proc.stderr
    out = tmp_path / "trace.json"
    strato("export", str(prof), "--chrome", str(out))
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    last: dict[str, float] = {}
    for e in events:
        if e.get("ph") == "C":
            last[e["name"]] = max(last.get(e["name"], 0.0), e["args"]["value"])
    os_events = max(v for k, v in last.items() if k.startswith("os_events/"))
    info = json.loads(strato("info", str(prof), "--json").stdout)
    # What the kernel dropped (ring buffers full: a fast quiet machine makes 1.6 million reads a
    # second here, 3.3 million records) is counted and warned about, never silent.
    lost = info["sources"][0]["import_notes"]["counts"].get("os_lost_records", 0)
    if lost:
        assert "the kernel dropped" in proc.stderr + strato("info", str(prof)).stderr
    # One event per system call (and per switch out): every read is there, but for the records
    # the kernel said it dropped.
    assert os_events >= reads - lost, (os_events, reads, lost)
    waited_ms = sum(v for k, v in last.items() if k.startswith("collector_wait_ns/")) / 1e6
    assert waited_ms == pytest.approx(float(summary.group(1)), abs=0.11)
    notes = [n for p in info["processes"] for n in p.get("notes", [])]
    if waited_ms >= 0.05:
        note = next(n for n in notes if "strato's collectors held their CPU" in n)
        assert f"{waited_ms:.1f} ms" in note, (note, waited_ms)
    assert "os_throttled" not in info["sources"][0]["import_notes"]["counts"]
    # Per-call counts: every read is counted at its entry (an earlier version counted only the
    # calls whose exit it matched, and lost most of them under this load), but for dropped ones.
    main = max(info["processes"], key=lambda p: p.get("os", {}).get("syscalls", 0))
    calls = {c["name"]: c for c in doc_os_metadata(prof, main["pid"])["syscalls"]}
    assert calls["read"]["count"] >= reads - lost, (calls["read"], reads, lost)
    assert 0 < calls["read"]["timed"] <= calls["read"]["count"], calls["read"]
    # Timed calls are matched exits: their summed time fits in the recording once per thread of
    # the process (an exit matched with an entry from before dropped records would span the
    # gap). Per process, not per thread: a helper thread blocked in one read for the whole run
    # (seen: one read of 1.05 s beside the loop's 0.4 s of reads) is counted too.
    recorded_ns = (info["end_ns"] - info["start_ns"])
    threads = max(1, main.get("threads", 1))
    assert 0 < calls["read"]["time_ns"] <= recorded_ns * threads, (
        calls["read"], recorded_ns, threads)
