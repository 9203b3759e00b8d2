"""What `strato record --os` accounts for about itself (issue 19 item 5), on a live run of a
tight loop of one-byte reads from /dev/zero (hundreds of thousands of system calls a second,
the collector's heaviest load, on a busy 2-core machine):

- every system call of the program is counted in its thread's OS-event counter
  (`os_events/<tid>`, the input of the OS level's calibration), even when the collector falls
  behind: the counter's last value is at least the number of reads the program made (it
  prints it);
- every system call is in its process's per-call counts too (`strato.os` `syscalls`, counted
  at entry; `strato info` shows the process's total): at least the reads the program made,
  with `timed` (exit matched) of them having their time;
- the time the program's threads were runnable behind strato's collectors is measured from
  the scheduler records, per thread (`collector_wait_ns/<tid>` counters), and reported on the
  launcher's summary line and, per process, by `strato info`: the figures agree;
- `strato info` lists what the kernel dropped or throttled as import notes (none here: the
  kernel does not throttle tracepoints sampled at every event, and the ring buffers keep up;
  the notes themselves are checked on synthetic metadata in strato-io's tests)."""

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
    # One event per system call (and per switch out): every read is there.
    assert os_events >= reads, (os_events, reads)
    waited_ms = sum(v for k, v in last.items() if k.startswith("collector_wait_ns/")) / 1e6
    assert waited_ms == pytest.approx(float(summary.group(1)), abs=0.11)
    info = json.loads(strato("info", str(prof), "--json").stdout)
    notes = [n for p in info["processes"] for n in p["notes"]]
    if waited_ms >= 0.05:
        note = next(n for n in notes if "strato's collectors held their CPU" in n)
        assert f"{waited_ms:.1f} ms" in note, (note, waited_ms)
    assert "os_throttled" not in info["sources"][0]["import_notes"]["counts"]
    # Per-call counts: every read is counted at its entry (an earlier version counted only the
    # calls whose exit it matched, and lost most of them under this load).
    main = next(p for p in info["processes"] if p.get("os") and p["os"]["syscalls"] >= reads)
    assert main["os"]["syscall_time_ns"] > 0, main
    calls = {c["name"]: c for c in doc_os_metadata(prof, main["pid"])["syscalls"]}
    assert calls["read"]["count"] >= reads, (calls["read"], reads)
    assert 0 < calls["read"]["timed"] <= calls["read"]["count"], calls["read"]
