"""stratoscope.measure: parallel, accurate measurement of auto-tuning candidates from Python.

Drives the ``strato-measure`` engine (warm worker pool, device-side timing, calibrator, REACT
parallelism, adaptive timeout, rank selection; see ``docs/measure.md``) through the ``strato``
command, so it needs no native bindings: one-shot calls run ``strato measure ... --json``;
a :class:`MeasureServer` keeps one engine alive across tuner batches with
``strato measure --serve`` (JSON lines on stdin/stdout), so REACT's parallelism carries over
from batch to batch as it does inside a tuner.

    from stratoscope.measure import MeasureServer, measure, compare_serial
    with MeasureServer(parallelism="auto") as server:
        results = server.measure(batch)        # list of candidate dicts -> list of result dicts
        report = server.finish()               # rank selection; report["best"]

A candidate is a dict in the candidate-list format (``docs/measure.md``): ``name``, ``source``,
``kernel``, ``build_options``, ``global``, ``local``, ``args``, ``params``; or ``payload`` for
workers other than the OpenCL one (e.g. :mod:`stratoscope.tvm_worker`).

This module imports only the standard library; it can also be loaded by file path.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
from typing import Any, BinaryIO, Iterable, Optional, Sequence

__all__ = [
    "MeasureError",
    "MeasureServer",
    "compare_serial",
    "find_strato",
    "measure",
    "read_frame",
    "write_frame",
]


class MeasureError(RuntimeError):
    """The engine failed (not a candidate: failed candidates are results with a status)."""


def find_strato() -> str:
    """The ``strato`` program: ``$STRATO_BIN``; the one in the installed package
    (``stratoscope/_bin/strato``, what wheels ship); the newest build in this source checkout's
    cargo target dir; else ``strato`` on PATH. (``stratoscope.cli.strato_binary`` looks the
    same way; this module stays loadable by file path, so it does not import it.)"""
    env = os.environ.get("STRATO_BIN")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    packaged = os.path.join(here, "_bin", "strato")
    if os.path.isfile(packaged):
        return packaged
    repo = os.path.dirname(os.path.dirname(here))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    builds = [os.path.join(target, profile, "strato") for profile in ("release", "debug")]
    builds = [p for p in builds if os.path.isfile(p) and os.access(p, os.X_OK)]
    if builds:
        return max(builds, key=os.path.getmtime)  # the most recent build
    found = shutil.which("strato")
    if found:
        return found
    raise MeasureError("no `strato` program: set STRATO_BIN or build it (cargo build -p strato-cli)")


def _options(
    parallelism: "str | int" = "auto",
    repeats: int = 10,
    warmup: int = 1,
    params: Optional[dict] = None,
    worker_cmd: Optional[Sequence[str]] = None,
    log: Optional[str] = None,
    pocl_cache: bool = False,
) -> list[str]:
    args = ["--parallelism", str(parallelism), "--repeats", str(repeats), "--warmup", str(warmup)]
    if params:
        args += ["--params", json.dumps(params)]
    if worker_cmd:
        args += ["--worker-cmd", " ".join(worker_cmd)]
    if log:
        args += ["--log", log]
    if pocl_cache:
        args.append("--pocl-cache")
    return args


def _run_json(args: list[str], timeout: Optional[float]) -> dict:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise MeasureError(proc.stderr.strip() or f"strato exited with {proc.returncode}")
    return json.loads(proc.stdout)


def _with_list(candidates: Iterable[dict]):
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    with handle:
        json.dump({"candidates": list(candidates)}, handle)
    return handle.name


def measure(candidates: Iterable[dict], *, strato: Optional[str] = None, timeout: Optional[float] = None, **options: Any) -> dict:
    """Measures a candidate list with the calibrated engine; returns the run report
    (``results``, ``best``, ``rounds``, ``dp_timeline``, ``delta_by_dp``, ``log``...)."""
    path = _with_list(candidates)
    try:
        return _run_json([strato or find_strato(), "measure", path, "--json", *_options(**options)], timeout)
    finally:
        os.unlink(path)


def compare_serial(
    candidates: Optional[Iterable[dict]] = None,
    *,
    example: Optional[str] = None,
    size: int = 128,
    pinned: bool = True,
    runs: int = 1,
    strato: Optional[str] = None,
    timeout: Optional[float] = None,
    **options: Any,
) -> dict:
    """Serial harness vs engine (pinned to 1 and free), every pick judged against the true best
    (re-measured alone): ``serial``, ``parallel``, ``pinned_dp1``, ``time_reduction_pct``,
    ``best_gap_pct`` (engine vs true best), ``serial_best_gap_pct``, ``true_best``, ``runs``
    (one entry per run; with ``runs > 1`` the headline figures are medians),
    ``worst_gap_pct``, ``median_time_reduction_pct``, ..."""
    exe = strato or find_strato()
    extra = ([] if pinned else ["--no-pinned"]) + ["--runs", str(runs)]
    if example is not None:
        return _run_json(
            [exe, "measure", "--compare-serial", "--example", example, "--size", str(size), "--json", *extra, *_options(**options)],
            timeout,
        )
    if candidates is None:
        raise ValueError("give candidates or example=")
    path = _with_list(candidates)
    try:
        return _run_json([exe, "measure", "--compare-serial", path, "--json", *extra, *_options(**options)], timeout)
    finally:
        os.unlink(path)


class MeasureServer:
    """One engine kept alive across batches (``strato measure --serve``)."""

    def __init__(self, *, strato: Optional[str] = None, env: Optional[dict] = None, **options: Any) -> None:
        cmd = [strato or find_strato(), "measure", "--serve", *_options(**options)]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, **(env or {})},
        )
        self.dp: Optional[int] = None

    def _call(self, request: dict) -> dict:
        proc = self._proc
        if proc.stdin is None or proc.stdout is None or proc.poll() is not None:
            raise MeasureError("the measurement server is not running")
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise MeasureError(f"the measurement server exited ({proc.wait()})")
        reply = json.loads(line)
        if "error" in reply:
            raise MeasureError(reply["error"])
        return reply

    def measure(self, candidates: Sequence[dict]) -> list[dict]:
        """Measures one tuner batch; returns one result per candidate, in order. A result has
        ``status`` (ok, build_failed, out_of_memory, run_failed, invalid, crashed, timeout),
        ``reported_latency_ns`` (what a tuner should use), ``parallel_latency_ns``,
        ``isolated_latency_ns``, ``runs_ns``, ``dp``, ``round``..."""
        reply = self._call({"op": "measure", "candidates": list(candidates)})
        self.dp = reply.get("dp")
        return reply["results"]

    def finish(self) -> dict:
        """Rank selection over everything measured so far; returns the run report."""
        return self._call({"op": "finish"})

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            try:
                if proc.stdin:
                    proc.stdin.write(json.dumps({"op": "shutdown"}) + "\n")
                    proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()

    def __enter__(self) -> "MeasureServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


# --- the worker protocol, for workers written in Python ------------------------------------

def read_frame(stream: BinaryIO) -> Optional[dict]:
    """One frame (u32 little-endian length + JSON); None at end of input."""
    header = stream.read(4)
    if not header:
        return None
    if len(header) < 4:
        raise MeasureError("truncated frame header")
    (length,) = struct.unpack("<I", header)
    body = stream.read(length)
    if len(body) < length:
        raise MeasureError("truncated frame")
    return json.loads(body)


def write_frame(stream: BinaryIO, message: dict) -> None:
    body = json.dumps(message).encode()
    stream.write(struct.pack("<I", len(body)) + body)
    stream.flush()
