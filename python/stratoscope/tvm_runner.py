"""A TVM MetaSchedule runner backed by the ``strato-measure`` engine (DOPpler).

``StratoRunner`` is a ``tvm.s_tir.meta_schedule.runner.PyRunner``: each batch of built
candidates MetaSchedule hands it is measured by a pool of warm worker processes
(:mod:`stratoscope.tvm_worker`, TVM's own ``time_evaluator`` inside), in parallel under the
engine's calibrator and REACT policy, and every result carries the calibrated latency. Use it
wherever MetaSchedule takes a runner:

    from tvm.s_tir import meta_schedule as ms
    from stratoscope.tvm_runner import StratoRunner
    with StratoRunner(parallelism="auto") as runner:
        db = ms.tune_tir(mod, target, work_dir, max_trials_global=64, runner=runner)

Needs apache-tvm 0.27 (``pip install "apache-tvm==0.27.*" apache-tvm-ffi==0.1.14.post1``; later
tvm-ffi versions segfault when saving the tuning database). Importing this module without TVM
raises ImportError with that hint.
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any, List, Optional

try:
    import tvm  # noqa: F401
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.runner import PyRunner, RunnerFuture, RunnerInput, RunnerResult
    from tvm.s_tir.meta_schedule.runner.runner import PyRunnerFuture
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "stratoscope.tvm_runner needs TVM: pip install 'apache-tvm==0.27.*' apache-tvm-ffi==0.1.14.post1"
    ) from exc

try:
    from .measure import MeasureServer
except ImportError:  # loaded by file path, outside the package
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "_stratoscope_measure", os.path.join(os.path.dirname(os.path.abspath(__file__)), "measure.py")
    )
    assert _spec is not None and _spec.loader is not None
    _measure = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_measure)
    MeasureServer = _measure.MeasureServer  # type: ignore[misc]

__all__ = ["InProcessBuilder", "StratoRunner", "worker_command"]

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_worker.py")


def worker_command() -> List[str]:
    """The command the engine runs for each TVM worker."""
    return [sys.executable, _WORKER]


@derived_object
class InProcessBuilder(PyBuilder):
    """Builds MetaSchedule candidates in this process, one after another, the way
    ``LocalBuilder``'s default build and export do (``tvm.build`` after
    ``RemoveWeightLayoutRewriteBlock``, exported as a tar). A convenience for small machines:
    each ``LocalBuilder`` worker process imports ``tvm.s_tir.tensor_intrin`` (15 s here) and, on
    two loaded cores, its 30 s timeout fails every build. Tensor intrinsics are not registered
    (plain ``llvm`` schedules do not use them)."""

    def __init__(self) -> None:
        super().__init__()

    def build(self, build_inputs: List[BuilderInput]) -> List[BuilderResult]:
        import tempfile

        from tvm.driver import build as tvm_build
        from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
        from tvm.support.tar import tar

        results = []
        for inp in build_inputs:
            try:
                mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(inp.mod)
                rt_mod = tvm_build(mod, target=inp.target)
                path = os.path.join(tempfile.mkdtemp(), "tvm_tmp_mod." + tar.output_format)
                rt_mod.export_library(path, fcompile=tar)
                results.append(BuilderResult(path, None))
            except Exception as exc:  # a candidate's failure
                results.append(BuilderResult(None, f"InProcessBuilder: {exc}"))
        return results


@derived_object
class _DoneFuture(PyRunnerFuture):
    def __init__(self, run_secs: Optional[List[float]], error_msg: Optional[str]) -> None:
        super().__init__()
        self.run_secs = run_secs
        self.error_msg = error_msg

    def done(self) -> bool:
        return True

    def result(self) -> RunnerResult:
        return RunnerResult(self.run_secs, self.error_msg)


@derived_object
class StratoRunner(PyRunner):
    """MetaSchedule runner measuring through the strato-measure engine.

    Parameters: ``parallelism`` ("auto" for REACT, or a number), ``repeats`` (TVM evaluator
    ``repeat``), ``number`` and ``min_repeat_ms`` (evaluator settings), ``params`` (calibrator
    parameters, e.g. ``{"max_dp": 4}``), ``strato`` (path of the ``strato`` program),
    ``log`` (file for the decision log, JSON lines).
    """

    def __init__(
        self,
        parallelism: "str | int" = "auto",
        repeats: int = 3,
        number: int = 1,
        min_repeat_ms: int = 0,
        params: Optional[dict] = None,
        strato: Optional[str] = None,
        log: Optional[str] = None,
    ) -> None:
        super().__init__()
        self.number = number
        self.min_repeat_ms = min_repeat_ms
        self._ids = itertools.count()
        self.results: List[dict] = []
        self.server = MeasureServer(
            strato=strato,
            parallelism=parallelism,
            repeats=repeats,
            warmup=0,
            params=params,
            worker_cmd=worker_command(),
            log=log,
        )

    def run(self, runner_inputs: List[RunnerInput]) -> List[RunnerFuture]:
        candidates = []
        for inp in runner_inputs:
            candidates.append(
                {
                    "name": f"ms{next(self._ids)}",
                    "payload": {
                        "artifact_path": str(inp.artifact_path),
                        "device_type": str(inp.device_type),
                        "args_info": [a.as_json() for a in inp.args_info],
                        "number": self.number,
                        "min_repeat_ms": self.min_repeat_ms,
                    },
                }
            )
        results = self.server.measure(candidates)
        self.results.extend(results)
        futures: List[RunnerFuture] = []
        for r in results:
            if r.get("status") == "ok" and r.get("reported_latency_ns"):
                runs = r.get("runs_ns") or [r["reported_latency_ns"]]
                raw = sum(runs) / len(runs)
                scale = r["reported_latency_ns"] / raw if raw > 0 else 1.0
                futures.append(_DoneFuture([x * scale / 1e9 for x in runs], None))
            else:
                detail = r.get("error") or r.get("log") or r.get("detail") or ""
                futures.append(_DoneFuture(None, f"StratoRunner: {r.get('status')}: {detail}"))
        return futures  # type: ignore[return-value]

    @property
    def dp(self) -> Optional[int]:
        """Parallelism REACT chose after the last batch."""
        return self.server.dp

    def finish(self) -> dict:
        """Rank selection over everything measured; the engine's report."""
        return self.server.finish()

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> "StratoRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
