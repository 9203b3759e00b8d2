"""torch.profiler alongside stratoscope: Kineto's events are merged into the recording on the
recorder's clock (CLOCK_MONOTONIC).

Kineto's timestamps are on its own base: wall-clock (CLOCK_REALTIME) in current releases, read
through an approximate (TSC) clock and written as microseconds since ``baseTimeNanoseconds``.
The offset to our clock is measured with markers: each marker is a ``record_function`` range
entered and exited between two reads of our clock (``b``, ``a``). Kineto stamps it ``S`` .. ``E``
on its clock; since ``b <= S + offset`` and ``E + offset <= a``, the offset lies in
``[b - S, a - E]``. Several markers are taken when the profiler starts and several when it
stops; the intervals of a group are intersected. If the start and stop estimates agree (their
intervals overlap) the offset is their common interval's midpoint and the error half its width;
if they do not, the two are joined by a linear drift. The estimate is stored as a CLOCK record
named ``kineto`` (domain ``realtime``) and, with counts of what was merged and what was not, as
metadata ``kineto:<pid>``. The Kineto trace itself is kept in the profile directory as
``<pid>.kineto.json``.

Kineto events are written as spans with category ``kineto:<cat>``: CPU ops as Backend, user
annotations (``record_function``) as Operation, Python functions as Python, runtime calls as
AcceleratorApi, device kernels / copies / sets on device-queue tracks. Not merged (counted in the
metadata): the markers; events not of this process (Kineto's own ``Trace`` span); instants and
other non-span records. CPU events of other threads of this process (torch runs ops on threads
of its own, e.g. the autograd engine's device threads) go on those threads' tracks.

The profiler's own start and stop (Kineto set-up, trace export, this merge) run with the profile
hook suspended and are recorded as Overhead spans (category ``kineto_overhead``), so they are not
counted as Backend time of the workload."""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
import warnings
from decimal import Decimal
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
#: Markers per group (start / stop). The first of a run is slow (warm-up); the intersection of
#: the others' intervals is typically 2-3 us wide on a 2-core machine.
MARKERS = 8
OVERHEAD_CATEGORY = "kineto_overhead"


class TorchSession:
    """A running ``torch.profiler.profile`` whose events go into the recording on ``stop``."""

    def __init__(self, prof: Any, out_dir: str | None) -> None:
        self.prof = prof
        self.out_dir = out_dir
        self.pid = os.getpid()
        #: (group, marker name, our clock before enter, our clock after exit)
        self.markers: list[tuple[str, str, int, int]] = []

    @classmethod
    def start(cls) -> "TorchSession":
        t0 = _native.now_ns()
        _native.uninstall_hook()  # the profiler's set-up is not the workload's Backend time
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            prof = profile(activities=activities)
            prof.__enter__()
            session = cls(prof, os.environ.get("STRATOSCOPE_OUT"))
            session.mark("start")
            _register_exit()
        finally:
            _native.record_span(t0, _native.now_ns(), "Overhead", OVERHEAD_CATEGORY,
                                "torch.profiler start")
            _native.install_hook()
        return session

    def mark(self, group: str, n: int = MARKERS) -> None:
        """Takes ``n`` clock markers (see the module doc)."""
        from torch.autograd.profiler import record_function

        now = _native.now_ns
        for _ in range(n):
            name = f"{MARKER}{len(self.markers)}"
            rf = record_function(name)
            before = now()
            rf.__enter__()
            rf.__exit__(None, None, None)
            after = now()
            self.markers.append((group, name, before, after))

    def stop(self) -> int:
        """Stops the profiler and merges its events; returns how many were merged. The profile
        hook stays off on this thread afterwards (recording is about to stop)."""
        if os.getpid() != self.pid:  # a forked child: the profiler is the parent's
            return 0
        atexit.unregister(_stop_at_exit)  # (a threading exit hook cannot be removed: no-op)
        t0 = _native.now_ns()
        _native.uninstall_hook()
        try:
            self.mark("stop")
            self.prof.__exit__(None, None, None)
            if self.out_dir:
                path = os.path.join(self.out_dir, f"{self.pid}.kineto.json")
                keep = True
            else:  # pragma: no cover - start() always sets STRATOSCOPE_OUT
                import tempfile

                fd, path = tempfile.mkstemp(suffix=".kineto.json")
                os.close(fd)
                keep = False
            try:
                self.prof.export_chrome_trace(path)
                with open(path) as f:
                    doc = json.load(f, parse_float=Decimal)
            finally:
                if not keep:
                    os.unlink(path)
            summary = merge(doc, self.markers, threading.get_native_id())
            summary["trace"] = os.path.basename(path) if keep else None
            summary["torch"] = _torch_version()
            _native.metadata(f"kineto:{self.pid}", json.dumps(summary))
            return int(summary["merged"])
        except Exception as e:  # the recording must still stop
            warnings.warn(f"stratoscope: torch.profiler events not merged: {e!r}",
                          stacklevel=2)
            return 0
        finally:
            _native.record_span(t0, _native.now_ns(), "Overhead", OVERHEAD_CATEGORY,
                                "torch.profiler stop + merge")


def _register_exit() -> None:
    """At interpreter exit the profiler must stop before torch's own exit handlers run (they
    are registered with atexit, some lazily during the run, so registration order cannot put
    ours first): threading's exit hooks run when the main thread has finished, before atexit.
    Falls back on atexit where that private hook is missing."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(_stop_at_exit)
            return
    except RuntimeError:  # pragma: no cover - interpreter already shutting down
        pass
    atexit.register(_stop_at_exit)


def _stop_at_exit() -> None:
    """Stops the torch session (not the recording) when the program ends; a no-op if it was
    stopped already."""
    import stratoscope

    with stratoscope._lock:
        stratoscope._stop_torch()


def _torch_version() -> str | None:
    try:
        import torch

        return str(torch.__version__)
    except ImportError:  # pragma: no cover
        return None


def _ns(us: Any) -> int:
    """Kineto microseconds (a Decimal from ``parse_float=Decimal``, or a number) -> ns. Floats
    lose nanoseconds on absolute bases (1.8e15 us has a 0.25 us step), hence Decimal."""
    return int(Decimal(str(us)) * 1000)


def _group_interval(intervals: list[tuple[int, int]]) -> tuple[int, int, bool]:
    """Offset bounds of one marker group: the intersection of its intervals, or, if they do not
    all intersect (Kineto's approximate clock jittered), the hull of their midpoints widened by
    the tightest interval's half width. Returns (lo, hi, consistent)."""
    lo = max(i[0] for i in intervals)
    hi = min(i[1] for i in intervals)
    if lo <= hi:
        return lo, hi, True
    mids = sorted((a + b) // 2 for a, b in intervals)
    half = min(b - a for a, b in intervals) // 2
    return mids[0] - half, mids[-1] + half, False


def estimate_offset(doc: Any, markers: list[tuple[str, str, int, int]]) -> dict[str, Any]:
    """The Kineto -> CLOCK_MONOTONIC mapping from the markers found in ``doc``:
    ``{"offset_ns", "error_ns", "drift_ppb", "anchor_ns", "method", ...}`` with
    ``mono = kineto + offset_ns + drift_ppb * (kineto - anchor_ns) / 1e9`` (``kineto`` in ns on
    Kineto's absolute base). ``offset_ns`` is None when no marker is in the trace."""
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    base = int(doc.get("baseTimeNanoseconds", 0) or 0) if isinstance(doc, dict) else 0
    found = {e.get("name"): e for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith(MARKER)}
    groups: dict[str, list[tuple[int, int, int]]] = {}  # group -> (lo, hi, kineto start)
    for group, name, before, after in markers:
        e = found.get(name)
        if e is None:
            continue
        start = base + _ns(e["ts"])
        end = start + _ns(e.get("dur", 0))
        groups.setdefault(group, []).append((before - start, after - end, start))
    out: dict[str, Any] = {"markers": sum(len(g) for g in groups.values()),
                           "markers_taken": len(markers), "groups": {}}
    ests = []
    for group, items in groups.items():
        lo, hi, consistent = _group_interval([(a, b) for a, b, _ in items])
        at = min(k for _, _, k in items)
        out["groups"][group] = {"lo_ns": lo, "hi_ns": hi, "markers": len(items),
                                "consistent": consistent, "kineto_ns": at}
        ests.append((at, lo, hi))
    if not ests:
        out.update(offset_ns=None, error_ns=None, drift_ppb=0.0, anchor_ns=0)
        return out
    ests.sort()
    lo = max(e[1] for e in ests)
    hi = min(e[2] for e in ests)
    if lo <= hi:  # one constant offset is consistent with every group
        out.update(offset_ns=(lo + hi) // 2, error_ns=(hi - lo + 1) // 2, drift_ppb=0.0,
                   anchor_ns=0,
                   method="marker record_function ranges bracketed by CLOCK_MONOTONIC reads "
                          f"({out['markers']} markers; offset interval intersection)")
        return out
    (t_s, lo_s, hi_s), (t_e, lo_e, hi_e) = ests[0], ests[-1]
    o_s, o_e = (lo_s + hi_s) // 2, (lo_e + hi_e) // 2
    drift = (o_e - o_s) / max(t_e - t_s, 1) * 1e9
    out.update(offset_ns=o_s, error_ns=(max(hi_s - lo_s, hi_e - lo_e) + 1) // 2, drift_ppb=drift,
               anchor_ns=t_s,
               method="marker record_function ranges bracketed by CLOCK_MONOTONIC reads "
                      f"({out['markers']} markers; start and stop estimates joined by drift)")
    return out


def merge(doc: Any, markers: list[tuple[str, str, int, int]], tid: int | None = None,
          pid: int | None = None) -> dict[str, Any]:
    """Writes the Kineto events of ``doc`` (a parsed chrome trace, preferably parsed with
    ``parse_float=Decimal``) into the running recording on the recorder's clock; CPU events of
    thread ``tid`` (default: the calling thread) of process ``pid`` (default: this one) go on the
    calling thread's track, those of other threads of the process on their own threads' tracks.
    Returns a summary: the clock estimate, ``merged`` and counts by category (and
    ``other_threads``: how many went to other threads) and of what was skipped, by reason."""
    tid = threading.get_native_id() if tid is None else tid
    pid = os.getpid() if pid is None else pid
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    base = int(doc.get("baseTimeNanoseconds", 0) or 0) if isinstance(doc, dict) else 0
    clock = estimate_offset(doc, markers)
    if clock["offset_ns"] is None:  # no marker in the trace: Kineto's base is the wall clock
        clock.update(offset_ns=_native.now_ns() - time.time_ns(), error_ns=None,
                     method="wall clock minus CLOCK_MONOTONIC, read back to back (no marker "
                            "in the Kineto trace; error unknown)")
    offset, drift, anchor = clock["offset_ns"], clock["drift_ppb"], clock["anchor_ns"]
    _native.clock_sync("kineto", "realtime", offset, clock["error_ns"], clock["method"],
                       drift, anchor)

    def mono(kineto_ns: int) -> int:
        if drift:
            return kineto_ns + offset + round(drift * (kineto_ns - anchor) / 1e9)
        return kineto_ns + offset

    merged: dict[str, int] = {}
    skipped: dict[str, int] = {}
    other_threads = 0
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            continue
        if ph != "X":
            skipped["not a span"] = skipped.get("not a span", 0) + 1
            continue
        name = str(e.get("name", ""))
        if name.startswith(MARKER):
            skipped["clock marker"] = skipped.get("clock marker", 0) + 1
            continue
        cat = str(e.get("cat", ""))
        if "ts" not in e:
            skipped["not a span"] = skipped.get("not a span", 0) + 1
            continue
        k_start = base + _ns(e["ts"])
        start = mono(k_start)
        end = mono(k_start + _ns(e.get("dur", 0)))
        args = e.get("args") or None
        args_json = json.dumps(args, default=str) if args else None
        level = _LEVELS.get(cat, "Other")
        if cat in _DEVICE:
            device, queue = e.get("pid"), e.get("tid")
            if not isinstance(device, int) or not isinstance(queue, int):
                skipped["device event without numeric device/stream"] = \
                    skipped.get("device event without numeric device/stream", 0) + 1
                continue
            corr = (args or {}).get("correlation")
            _native.record_device_span(device, queue, f"kineto stream {queue}", start, end,
                                       level, f"kineto:{cat}", name,
                                       int(corr) if corr is not None else None, args_json)
        elif e.get("pid") != pid:
            skipped["not this process"] = skipped.get("not this process", 0) + 1
            continue
        elif e.get("tid") != tid:
            if not isinstance(e.get("tid"), int):
                skipped["thread id not numeric"] = skipped.get("thread id not numeric", 0) + 1
                continue
            _native.record_span(start, end, level, f"kineto:{cat}", name, args_json,
                                tid=e["tid"])
            other_threads += 1
        else:
            _native.record_span(start, end, level, f"kineto:{cat}", name, args_json)
        merged[cat] = merged.get(cat, 0) + 1
    clock.update(merged=sum(merged.values()), by_category=merged, skipped=skipped,
                 other_threads=other_threads)
    return clock
