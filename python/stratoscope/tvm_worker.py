"""A ``strato-measure`` worker that measures TVM MetaSchedule build artifacts.

Run by the engine as ``python .../tvm_worker.py`` (a script, so that it does not import the
``stratoscope`` package and its native module). It speaks the engine's framed protocol on
stdin/stdout (u32 little-endian length + JSON): it imports TVM once (the warm-up), says
``ready``, then answers ``measure`` requests whose candidate ``payload`` is
``{"artifact_path", "device_type", "args_info", "number", "min_repeat_ms"}`` with TVM's own
``time_evaluator`` (``repeats`` -> ``repeat``), exactly as MetaSchedule's ``LocalRunner`` does,
plus the CPU-side duration of the evaluator call for the calibrator.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
import traceback


def _read(stream):
    header = stream.read(4)
    if len(header) < 4:
        return None
    (length,) = struct.unpack("<I", header)
    return json.loads(stream.read(length))


def _write(stream, message):
    body = json.dumps(message).encode()
    stream.write(struct.pack("<I", len(body)) + body)
    stream.flush()


class _DeviceLock:
    """The engine's device lock (see crates/strato-measure/src/devlock.rs): shared while loading
    and allocating, exclusive (behind the turnstile) for the timed runs."""

    def __init__(self, path):
        import fcntl

        self.fcntl = fcntl
        self.dev = open(path, "a+")
        self.turnstile = open(path + ".turnstile", "a+")

    def shared(self):
        f = self.fcntl
        f.flock(self.turnstile, f.LOCK_EX)
        f.flock(self.dev, f.LOCK_SH)
        f.flock(self.turnstile, f.LOCK_UN)

    def exclusive(self):
        f = self.fcntl
        f.flock(self.dev, f.LOCK_UN)
        f.flock(self.turnstile, f.LOCK_EX)
        f.flock(self.dev, f.LOCK_EX)
        f.flock(self.turnstile, f.LOCK_UN)

    def release(self):
        self.fcntl.flock(self.dev, self.fcntl.LOCK_UN)


def main() -> int:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # frames only on the real stdout
    t0 = time.perf_counter()
    try:
        import tvm  # noqa: F401
        from tvm.s_tir.meta_schedule.runner.config import EvaluatorConfig
        from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument
        from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common
    except Exception as exc:  # pragma: no cover - depends on the environment
        _write(out, {"type": "fatal", "error": f"cannot import tvm: {exc}"})
        return 1
    _write(out, {"type": "ready", "pid": os.getpid(), "device": "tvm cpu", "init_ns": (time.perf_counter() - t0) * 1e9})
    modules = {}
    lock_path = os.environ.get("STRATO_DEVICE_LOCK")
    lock = _DeviceLock(lock_path) if lock_path else None
    while True:
        request = _read(inp)
        if request is None or request.get("type") == "shutdown":
            return 0
        if request.get("type") != "measure":
            continue
        start = time.perf_counter()
        if lock:
            lock.shared()
        candidate = request["candidate"]
        payload = candidate.get("payload") or {}
        try:
            path = payload["artifact_path"]
            rt_mod = modules.get(path)
            cached = rt_mod is not None
            if rt_mod is None:
                rt_mod = tvm.runtime.load_module(path)
                modules[path] = rt_mod
            device = tvm.runtime.device(payload.get("device_type", "cpu"), 0)
            args = default_alloc_argument(device, payload.get("args_info", []), 1)
            config = EvaluatorConfig(
                number=int(payload.get("number", 1)),
                repeat=max(1, int(request.get("repeats", 1))),
                min_repeat_ms=int(payload.get("min_repeat_ms", 0)),
                enable_cpu_cache_flush=bool(payload.get("enable_cpu_cache_flush", False)),
            )
            if lock:
                lock.exclusive()
            t_run = time.perf_counter()
            costs = run_evaluator_common(rt_mod, device, config, args)
            duration = time.perf_counter() - t_run
            runs = [c * 1e9 for c in costs]
            outcome = {
                "status": "ok",
                "latency_ns": sum(runs) / len(runs),
                "min_ns": min(runs),
                "runs_ns": runs,
                "duration_ns": duration * 1e9,
                "total_ns": (time.perf_counter() - start) * 1e9,
                "cached": cached,
            }
        except MemoryError as exc:
            outcome = {"status": "out_of_memory", "error": str(exc)}
        except Exception as exc:  # a candidate's failure, reported as such
            outcome = {"status": "run_failed", "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()}
        if lock:
            lock.release()
        _write(out, {"type": "result", "id": request["id"], "outcome": outcome})


if __name__ == "__main__":
    sys.exit(main())
