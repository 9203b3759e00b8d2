"""stratoscope: a cross-stack profiler for ML workloads.

Annotate algorithmic operations, and stratoscope records where their time goes across the
stack: Python, ML backends, simulators and other native libraries. Transitions from Python
into native code are recorded without code changes by a C-level profile hook; events are
written by a native recorder (per-thread buffers, a background writer, crash-safe chunks) into a
profile directory that ``strato`` analyses.

    import stratoscope
    stratoscope.start("prof")            # or run under `strato record -o prof -- python x.py`
    stratoscope.set_phase("training")
    with stratoscope.operation("inference"):
        ...
    @stratoscope.operation("backpropagation")
    def train_step(batch): ...
    stratoscope.stop()

Recording starts by itself when ``STRATOSCOPE_OUT`` is set in the environment (that is how
``strato record`` and processes started by ``multiprocessing`` record): each process writes its
own ``<pid>.strato`` file into the same profile directory.

Every way out of a process that can be caught writes the recording's end (STOP record, last
chunk): normal exit and uncaught exceptions (``atexit``), ``os._exit`` (wrapped), forked
children (``os.register_at_fork``, multiprocessing finalisers), and termination signals whose
action is the default (SIGTERM, SIGHUP; SIGINT when set to the default), which the native
recorder handles by flushing and then ending the process by the same signal. What cannot be
caught (SIGKILL, a crash) loses at most the events since the last flush (docs/recording.md).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import signal
import sys
import threading
from typing import Any, Callable, Iterable, TypeVar

from . import _native
from . import _stacks
from ._native import (  # noqa: F401  (re-exported API)
    flush,
    is_recording,
    level_of_module,
    level_table,
    now_ns,
    set_process_name,
    set_thread_name,
)

__all__ = [
    "operation",
    "set_phase",
    "set_process_name",
    "set_thread_name",
    "start",
    "stop",
    "flush",
    "is_recording",
    "wrap_module",
    "wrap_env",
    "unwrap_all",
    "set_level_table",
    "level_table",
    "level_of_module",
    "profile",
    "now_ns",
    "LEVELS",
]

ENV_OUT = "STRATOSCOPE_OUT"
ENV_LEVEL = "STRATOSCOPE_LEVEL"
ENV_TORCH = "STRATOSCOPE_TORCH"
ENV_WRAP = "STRATOSCOPE_WRAP"
ENV_FLUSH_INTERVAL_MS = "STRATOSCOPE_FLUSH_INTERVAL_MS"

#: Collection levels: 0 timing only (uninstrumented baseline), 1 annotations, 2 hook installed
#: but recording nothing (calibration), 3 annotations + interception, 4 full (+ wrappers,
#: framework profilers).
LEVELS = {0: "uninstrumented", 1: "annotations", 2: "hook-silent", 3: "interception", 4: "full"}

F = TypeVar("F", bound=Callable[..., Any])


#: An algorithmic operation (RL-Scope's ``rls.operation``): a context manager
#: (``with operation("inference"): ...``) or a decorator (``@operation("backpropagation")``).
#: Operations nest; each thread has its own nesting. It is the native class itself: a Python
#: subclass would cost a Python-level construction on every ``with operation(name):``.
operation = _native.Operation


def _decorate(op: Any, func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with op:
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


_native._set_decorator(_decorate)


def set_phase(name: str) -> None:
    """Enters training phase ``name`` for this process (ending the previous phase)."""
    _native.set_phase(name)


_lock = threading.Lock()
_registered = False
_after_fork_anchor: Any = None
_torch_session: Any = None


def _thread_bootstrap(frame: Any, event: str, arg: Any) -> None:
    # Runs once in each new thread (threading.setprofile); replaces itself with the C hook.
    _native.install_hook()
    try:
        _native.set_thread_name(threading.current_thread().name)
    except Exception:  # pragma: no cover - naming is best effort
        pass


def _child_after_fork() -> None:
    _native.after_fork_child()
    if _native.is_recording():
        _stacks._after_fork_child()


def _register_mp_finalizer(_anchor: Any) -> None:
    # In a multiprocessing child (fork start method), which leaves through os._exit without
    # running atexit handlers: stop (and flush) from multiprocessing's own exit finalizers.
    try:
        from multiprocessing import util

        util.Finalize(None, stop, exitpriority=-100)
    except Exception:  # pragma: no cover
        pass


class _Anchor:
    pass


#: Signals whose default action ends the process without running ``atexit``: while their
#: disposition is the default, the recorder flushes before the process ends by them.
_TERMINATION_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name)
)
_real_os_exit: Callable[[int], Any] | None = None
_real_signal: Any = None


def _stop_for_exit() -> None:
    # The process is about to end without atexit (os._exit). The module lock is taken with a
    # timeout: a forked child may have inherited it held by a thread that does not exist there.
    if not _native.is_recording():
        return
    locked = _lock.acquire(timeout=2.0)
    try:
        threading.setprofile(None)  # type: ignore[arg-type]
        try:
            _stop_torch()
        except Exception:  # pragma: no cover - the recording matters more here
            pass
        _native.stop()
    finally:
        if locked:
            _lock.release()


def _os_exit(status: int) -> None:
    """``os._exit`` under stratoscope: stops (flushes) the recording, then exits."""
    try:
        _stop_for_exit()
    finally:
        assert _real_os_exit is not None
        _real_os_exit(status)


def _signal(signalnum: Any, handler: Any) -> Any:
    """``signal.signal`` under stratoscope: setting a termination signal back to its default
    action hands it to the recorder again (flush, then end by the signal)."""
    previous = _real_signal(signalnum, handler)
    default = isinstance(handler, int) and handler == signal.SIG_DFL
    if default and signalnum in _TERMINATION_SIGNALS and _native.is_recording():
        _native.catch_termination_signal(int(signalnum))
    return previous


def _install_exit_hooks() -> None:
    global _real_os_exit, _real_signal
    if _real_os_exit is None:
        _real_os_exit = os._exit
        functools.update_wrapper(_os_exit, _real_os_exit)
        os._exit = _os_exit
    if _real_signal is None:
        _real_signal = signal.signal
        functools.update_wrapper(_signal, _real_signal)
        signal.signal = _signal
    for signum in _TERMINATION_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            _native.catch_termination_signal(int(signum))


def start(dir: str | os.PathLike[str] | None = None, level: int | None = None, *,
          flush_interval_ms: int | None = None, torch: bool | None = None) -> None:
    """Starts recording into profile directory ``dir`` (default: ``$STRATOSCOPE_OUT`` or
    ``strato-profile``) at collection ``level`` (default ``$STRATOSCOPE_LEVEL`` or 4). The
    writer appends a chunk every ``flush_interval_ms`` (default
    ``$STRATOSCOPE_FLUSH_INTERVAL_MS`` or 50): what a SIGKILL or a crash can lose at most.

    Child processes inherit the settings through the environment: forked children record to
    their own file at once, spawned ones when they import stratoscope (or, under
    ``strato record``, at interpreter start)."""
    global _registered, _after_fork_anchor
    with _lock:
        if _native.is_recording():
            return
        out = os.path.abspath(os.fspath(dir or os.environ.get(ENV_OUT) or "strato-profile"))
        lvl = int(level if level is not None else os.environ.get(ENV_LEVEL, "4"))
        os.environ[ENV_OUT] = out
        os.environ[ENV_LEVEL] = str(lvl)
        if flush_interval_ms is None:
            flush_interval_ms = int(os.environ.get(ENV_FLUSH_INTERVAL_MS) or 50)
        # Termination handlers first: a SIGTERM that comes while the recorder starts (a pool
        # worker terminated during its start-up) then either finds no file yet or flushes it.
        _install_exit_hooks()
        _native.start(out, lvl, flush_interval_ms, json.dumps(sys.argv))
        if lvl >= 2:
            threading.setprofile(_thread_bootstrap)
        if not _registered:
            _registered = True
            atexit.register(stop)
            os.register_at_fork(after_in_child=_child_after_fork)
            try:
                from multiprocessing import util

                _after_fork_anchor = _Anchor()
                util.register_after_fork(_after_fork_anchor, _register_mp_finalizer)
            except Exception:  # pragma: no cover
                pass
    if lvl >= 1:
        _stacks.start_if_asked()
    if lvl >= 4:
        for name in filter(None, os.environ.get(ENV_WRAP, "").split(",")):
            mod_name, _, lvl_name = name.partition(":")
            try:
                module = __import__(mod_name.strip())
                wrap_module(module, lvl_name.strip() or None)
            except ImportError:
                pass
        want_torch = torch if torch is not None else os.environ.get(ENV_TORCH) == "1"
        if want_torch:
            _start_torch()


def stop() -> str | None:
    """Stops recording, writes the last chunk and returns the file written."""
    with _lock:
        threading.setprofile(None)  # type: ignore[arg-type]
        _stacks.stop()
        _stop_torch()
        path = _native.stop()
    return None if path is None else os.fspath(path)


def set_level_table(entries: Iterable[tuple[str, str]] | dict[str, str]) -> None:
    """Replaces the module-prefix -> level table the profile hook classifies callees with,
    e.g. ``{"torch": "Backend", "mysim": "Simulator", "numpy": "Library"}``. The longest
    matching prefix (at a dot boundary) wins; modules no prefix names are not recorded."""
    items = entries.items() if isinstance(entries, dict) else entries
    _native.set_level_table([(str(p), str(l)) for p, l in items])


_wrapped: list[tuple[Any, str, Any]] = []


def _default_level(module_name: str) -> str:
    return level_of_module(module_name) or "Library"


def wrap_module(module: Any, level: str | None = None, names: Iterable[str] | None = None) -> int:
    """Wraps the public callables of ``module`` (functions, builtins, numpy ufuncs and
    dispatchers; not classes) so each call through the module is recorded as a span of
    ``level`` (default: the module's level in the table, else Library). Covers what the
    profile hook cannot see (ufuncs and other non-builtin callables). Returns how many were
    wrapped. ``unwrap_all()`` undoes it."""
    mod_name = getattr(module, "__name__", str(module))
    lvl = level or _default_level(mod_name)
    count = 0
    # The module's own namespace, not dir()/getattr: a module-level __getattr__ (numpy's lazy
    # submodules) would import more modules half-way through the wrapping.
    namespace = getattr(module, "__dict__", {})
    for attr in list(names) if names is not None else sorted(namespace):
        if attr.startswith("_"):
            continue
        try:
            obj = namespace[attr] if attr in namespace else getattr(module, attr)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails to load is skipped
            continue
        if isinstance(obj, (type, _native.Wrapped)) or type(obj).__name__ == "module":
            continue
        if not callable(obj):
            continue
        try:
            setattr(module, attr, _native.Wrapped(obj, lvl, f"{mod_name}.{attr}"))
        except (AttributeError, TypeError):
            continue
        _wrapped.append((module, attr, obj))
        count += 1
    return count


def wrap_env(env: Any, level: str = "Simulator") -> Any:
    """Records ``env.step`` / ``env.reset`` of a gymnasium-style environment as ``level``
    spans (for pure-Python simulators, such as CartPole, whose time should count as
    simulation). Returns ``env``."""
    inner = getattr(env, "unwrapped", env)
    name = type(inner).__name__
    for attr in ("step", "reset"):
        method = getattr(env, attr, None)
        if method is not None and not isinstance(method, _native.Wrapped):
            setattr(env, attr, _native.Wrapped(method, level, f"{name}.{attr}"))
            _wrapped.append((env, attr, None))
    return env


def unwrap_all() -> None:
    """Undoes every ``wrap_module`` and ``wrap_env``."""
    while _wrapped:
        owner, attr, original = _wrapped.pop()
        try:
            if original is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)
        except AttributeError:
            pass


def _start_torch() -> None:
    global _torch_session
    from . import _torch

    _torch_session = _torch.TorchSession.start()


def _stop_torch() -> None:
    global _torch_session
    if _torch_session is not None:
        session, _torch_session = _torch_session, None
        session.stop()


class profile:
    """Context manager: records the block (``start`` / ``stop``), optionally with
    torch.profiler running alongside (``torch=True``), its Kineto events merged into the
    recording on one clock."""

    def __init__(self, dir: str | os.PathLike[str] | None = None, level: int | None = None,
                 torch: bool = False) -> None:
        self.dir, self.level, self.torch = dir, level, torch
        self.path: str | None = None

    def __enter__(self) -> "profile":
        start(self.dir, self.level, torch=self.torch)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.path = stop()


#: The analysis API (docs/python-api.md), in its own extension module (``_analysis``: the
#: importers and analyses), loaded on first use so that a recorded process, which imports
#: stratoscope, never loads it.
_ANALYSIS_NAMES = frozenset({
    "open", "analyses", "comparisons", "Profile", "Table", "StratoscopeError", "InputNotFound", "TraceFormatError",
    "ProfileStoreError", "MemoryBudgetError", "InvalidOption", "AnalysisError", "ReadError",
})


def __getattr__(name: str) -> Any:
    if name in _ANALYSIS_NAMES:
        from . import _analysis

        return getattr(_analysis, name)
    raise AttributeError(f"module 'stratoscope' has no attribute {name!r}")


def _autostart() -> None:
    """Starts recording if the environment asks for it (``STRATOSCOPE_OUT``)."""
    if os.environ.get(ENV_OUT) and not _native.is_recording():
        start()


_autostart()


def sql(query: str | None, *paths: str | os.PathLike[str], analysis: str | None = None) -> Any:
    """SQL over a profile as a ``pyarrow.Table`` (runs the packaged ``strato sql``; see
    ``docs/sql.md`` and :mod:`stratoscope._sql`)."""
    from ._sql import sql as _sql

    return _sql(query, *paths, analysis=analysis)


from ._sql import SqlError  # noqa: E402  (re-exported; importing it loads no engine)
