"""The ``strato`` console command: executes the ``strato`` program (crate strato-cli).

The wheel ships the program in ``stratoscope/_bin/`` next to the measurement worker and the
OpenCL layer, which the program finds next to itself. [`strato_binary`] says where it is looked
for; [`main`] sets what the program needs to know about this Python (the interpreter and the
bootstrap directory `strato record` puts on the recorded program's PYTHONPATH) and replaces
this process with it, so that signals, the exit status and the terminal are the program's own.
"""

from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def packaged_binary(name: str) -> str | None:
    """``stratoscope/_bin/NAME`` when the installed package ships it (wheels do; editable
    installs and source checkouts do not)."""
    path = os.path.join(_PACKAGE, "_bin", name)
    return path if os.path.isfile(path) else None


def strato_binary() -> str:
    """The ``strato`` program: ``$STRATO_BIN``; else the one in the installed package; else the
    newest build in this source checkout's cargo target dir (``$CARGO_TARGET_DIR`` or
    ``target/``, profiles ``debug`` and ``release``). Raises FileNotFoundError naming the
    places looked at."""
    env = os.environ.get("STRATO_BIN")
    if env:
        return env
    packaged = packaged_binary("strato")
    if packaged:
        return packaged
    repo = os.path.dirname(os.path.dirname(_PACKAGE))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    builds = [os.path.join(target, profile, "strato") for profile in ("debug", "release")]
    builds = [p for p in builds if os.path.isfile(p) and os.access(p, os.X_OK)]
    if builds:
        return max(builds, key=os.path.getmtime)
    raise FileNotFoundError(
        f"no `strato` program: not in {os.path.join(_PACKAGE, '_bin')} (pip install . builds it "
        f"there), nor in {target}/{{debug,release}} (cargo build -p strato-cli); or set STRATO_BIN")


def main() -> None:
    # `strato record` puts this directory on the recorded program's PYTHONPATH.
    os.environ.setdefault("STRATOSCOPE_BOOTSTRAP", os.path.join(_PACKAGE, "_bootstrap"))
    os.environ.setdefault("STRATOSCOPE_PYTHON", sys.executable)
    try:
        program = strato_binary()
    except FileNotFoundError as e:
        print(f"strato: {e}", file=sys.stderr)
        sys.exit(2)
    sys.stdout.flush()
    sys.stderr.flush()
    # The program's exit status is the command's: 0, 2 for strato's own failures, or the
    # recorded program's status for `strato record` (128 + N when signal N ended it).
    os.execv(program, ["strato", *sys.argv[1:]])


if __name__ == "__main__":
    main()
