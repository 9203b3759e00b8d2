"""torch.profiler alongside stratoscope: Kineto's events are merged into the recording on the
recorder's clock (CLOCK_MONOTONIC). Kineto's timestamps are on its own base (wall-clock based
in current releases), so the offset is estimated from a marker: a ``record_function`` range
opened between two reads of the recorder's clock; offset = midpoint of the two reads - the
marker's Kineto start, error = half the bracket. The estimate is stored as a CLOCK record
(``kineto``). Events are written as spans with category ``kineto:<cat>`` (CPU ops as Backend,
user annotations as Operation, Python functions as Python, device kernels / copies on device
queue tracks)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from . import _native

_LEVELS = {
    "cpu_op": "Backend",
    "user_annotation": "Operation",
    "python_function": "Python",
    "cuda_runtime": "AcceleratorApi",
    "cuda_driver": "AcceleratorApi",
    "kernel": "DeviceKernel",
    "gpu_memcpy": "DeviceCopy",
    "gpu_memset": "DeviceSet",
}
_DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
MARKER = "__stratoscope_clock_sync__"


class TorchSession:
    def __init__(self, prof: Any) -> None:
        self.prof = prof
        self.bracket: tuple[int, int] = (0, 0)

    @classmethod
    def start(cls) -> "TorchSession":
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        prof = profile(activities=activities)
        prof.__enter__()
        session = cls(prof)
        before = _native.now_ns()
        with record_function(MARKER):
            pass
        session.bracket = (before, _native.now_ns())
        return session

    def stop(self) -> None:
        self.prof.__exit__(None, None, None)
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            self.prof.export_chrome_trace(path)
            with open(path) as f:
                doc = json.load(f)
        finally:
            os.unlink(path)
        merge(doc, self.bracket)


def merge(doc: Any, bracket: tuple[int, int]) -> int:
    """Writes Kineto events of ``doc`` into the running recording; returns how many."""
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    marker = next((e for e in events if e.get("name") == MARKER and e.get("ph") == "X"), None)
    mid = (bracket[0] + bracket[1]) // 2
    if marker is not None:
        offset = mid - int(float(marker["ts"]) * 1000)
        error = (bracket[1] - bracket[0]) // 2
        method = "marker record_function bracketed by the recorder's clock"
    else:  # fall back on wall clock - monotonic, read back to back
        offset = _native.now_ns() - time.time_ns()
        error = None
        method = "wall clock minus monotonic, read back to back"
    _native.clock_sync("kineto", "realtime", offset, error, method)
    n = 0
    for e in events:
        if e.get("ph") != "X" or e.get("name") == MARKER:
            continue
        cat = str(e.get("cat", ""))
        start = int(float(e["ts"]) * 1000) + offset
        end = start + int(float(e.get("dur", 0)) * 1000)
        args = json.dumps(e.get("args")) if e.get("args") else None
        level = _LEVELS.get(cat, "Other")
        if cat in _DEVICE:
            corr = (e.get("args") or {}).get("correlation")
            _native.record_device_span(int(e.get("pid", 0) or 0), int(e.get("tid", 0) or 0),
                                       f"kineto stream {e.get('tid')}", start, end, level,
                                       f"kineto:{cat}", str(e.get("name", "")),
                                       int(corr) if corr is not None else None, args)
        else:
            _native.record_span(start, end, level, f"kineto:{cat}", str(e.get("name", "")), args)
        n += 1
    return n
