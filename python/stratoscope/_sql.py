"""``stratoscope.sql``: SQL over a profile, answered by the packaged ``strato sql`` (an
embedded Apache DataFusion) and returned as a ``pyarrow.Table``.

The query runs in the ``strato`` program, not in this process: DataFusion stays out of the
Python extension modules (the recorder's is loaded into every recorded process). The result
comes back as an Arrow IPC stream on the program's stdout. The tables, views and shipped
analyses are those of ``docs/sql.md``.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow


class SqlError(RuntimeError):
    """``strato sql`` refused the query or an input (the message is its one-line error)."""


def sql(query: str | None, *paths: str | os.PathLike[str],
        analysis: str | None = None) -> "pyarrow.Table":
    """Runs the read-only SQL ``query`` (or, with ``analysis=NAME``, the shipped analysis NAME,
    ``query`` then being None) over ``paths`` (trace files, rank directories, a profile
    directory or store, a recording) and returns the result as a ``pyarrow.Table``, types
    kept. Raises SqlError with strato's message when the query or an input is bad."""
    import pyarrow.ipc

    from .cli import strato_binary

    if not paths:
        raise SqlError("no inputs: sql(query, path, ...)")
    cmd = [strato_binary(), "sql", "--format", "arrow"]
    if analysis is not None:
        if query is not None:
            raise SqlError("give a query or analysis=NAME, not both")
        cmd += ["--analysis", analysis]
    else:
        if not query:
            raise SqlError("no query")
        cmd.append(query)
    cmd += [os.fspath(p) for p in paths]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        message = lines[-1] if lines else f"strato sql exited with status {proc.returncode}"
        raise SqlError(message.removeprefix("strato: "))
    return pyarrow.ipc.open_stream(proc.stdout).read_all()
