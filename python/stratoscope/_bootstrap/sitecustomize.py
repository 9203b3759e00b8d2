# Put on PYTHONPATH by `strato record`: starts stratoscope's recorder in every Python process
# of the recorded run (spawned multiprocessing workers included), then runs any other
# sitecustomize module that this one shadows.
import os as _os
import sys as _sys

if _os.environ.get("STRATOSCOPE_OUT"):
    try:
        import stratoscope as _stratoscope  # noqa: F401  (starts recording on import)
    except Exception as _e:  # pragma: no cover
        print(f"stratoscope: recording not started: {_e}", file=_sys.stderr)


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    path = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
