"""The ``strato`` console command: runs the Rust CLI (``strato_cli``) in-process."""

from __future__ import annotations

import os
import sys

from . import _native


def main() -> None:
    # `strato record` puts this directory on the recorded program's PYTHONPATH.
    os.environ.setdefault(
        "STRATOSCOPE_BOOTSTRAP", os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bootstrap")
    )
    os.environ.setdefault("STRATOSCOPE_PYTHON", sys.executable)
    sys.stdout.flush()
    # The Rust CLI's exit status, unchanged: 0, 2 for strato's own failures, or the recorded
    # program's status for `strato record` (128 + N when signal N ended it).
    code = _native.cli_main(["strato", *sys.argv[1:]])
    sys.exit(code)


if __name__ == "__main__":
    main()
