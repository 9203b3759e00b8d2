"""The Python half of ``strato record --sample`` (issue 19, item 3): a daemon thread that
samples every thread's Python stack and records it (``_native.record_python_stack``) as a
``python_stack`` instant on that thread's track, stamped with the recorder's clock.

Python 3.11 has no perf trampoline, so the native samples the launcher takes through perf
events cannot see Python frames; the analysis joins each native sample with the Python stack
this sampler saw on the same thread, inside the same operation, nearest in time
(``docs/recording.md`` states the alignment). The sampler reads ``sys._current_frames()``,
which needs the GIL: a thread running Python is seen at its next GIL hand-over (at most
``sys.getswitchinterval()``, 5 ms, late); a thread in native code that released the GIL
(numpy's BLAS) is seen at once. Its rate is the native rate capped at ``MAX_HZ`` (each sample
costs tens of microseconds of interpreter time, measured in ``python/benchmarks/bench_sample.py``).
"""

from __future__ import annotations

import os
import sys
import threading
from types import CodeType

from . import _native

ENV_SAMPLE_HZ = "STRATOSCOPE_SAMPLE_HZ"
MAX_HZ = 200

_thread: threading.Thread | None = None
_stop = threading.Event()


def _label(code: CodeType, cache: dict[CodeType, str]) -> str:
    text = cache.get(code)
    if text is None:
        name = getattr(code, "co_qualname", code.co_name)
        text = f"{name} ({os.path.basename(code.co_filename)})".replace(";", ":")
        cache[code] = text
    return text


def _run(period: float) -> None:
    sys.setprofile(None)  # the recorder's hook has nothing to say about this thread
    me = threading.get_ident()
    cache: dict[CodeType, str] = {}
    record = _native.record_python_stack
    now_ns = _native.now_ns
    while not _stop.wait(period):
        if not _native.is_recording():
            return
        native_ids = {t.ident: t.native_id for t in threading.enumerate()}
        frames = sys._current_frames()
        ts = now_ns()
        for ident, frame in frames.items():
            if ident == me:
                continue
            tid = native_ids.get(ident)
            if tid is None:
                continue
            labels = []
            f = frame
            while f is not None:
                labels.append(_label(f.f_code, cache))
                f = f.f_back
            labels.reverse()
            record(tid, ts, ";".join(labels))
        del frames


def start_if_asked() -> None:
    """Starts the stack sampler when ``$STRATOSCOPE_SAMPLE_HZ`` asks for it (once per
    process; forked children start their own)."""
    global _thread
    text = os.environ.get(ENV_SAMPLE_HZ)
    if not text or (_thread is not None and _thread.is_alive()):
        return
    try:
        hz = min(max(int(text), 1), MAX_HZ)
    except ValueError:
        return
    _stop.clear()
    _thread = threading.Thread(target=_run, args=(1.0 / hz,), name="strato-stacks", daemon=True)
    _thread.start()


def stop() -> None:
    """Stops the sampler (recording stops)."""
    global _thread
    _stop.set()
    t, _thread = _thread, None
    if t is not None and t is not threading.current_thread():
        t.join(timeout=1.0)


def _after_fork_child() -> None:
    global _thread
    _thread = None
    start_if_asked()


__all__ = ["start_if_asked", "stop", "ENV_SAMPLE_HZ", "MAX_HZ"]
