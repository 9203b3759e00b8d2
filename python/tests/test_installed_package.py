"""The installed package is complete (issue 14, item 5): `pip install .` ships the `strato`
program, the measurement worker and the OpenCL layer in `stratoscope/_bin/`, and a recorder
extension that links only the recorder; and `strato record --opencl` works with nothing but the
installed package: the console script that pip wrote, no cargo target dir, no
STRATOSCOPE_OPENCL_LAYER or STRATO_BIN.

These tests need the package installed from a wheel (scripts/test.sh runs `pip install .`);
they are skipped when `stratoscope` is imported from this source checkout. The same check in a
fresh virtual environment, with the wheel's size and contents: scripts/check-wheel.sh."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stratoscope
from conftest import REPO

PACKAGE = Path(stratoscope.__file__).resolve().parent
PROGRAMS = ["strato", "strato-measure-worker", "libstrato_opencl_layer.so"]
# The recorder extension is loaded into every recorded process (issue 14: <= 4 MB).
NATIVE_LIMIT_BYTES = 4 * 1024 * 1024

pytestmark = pytest.mark.skipif(
    PACKAGE == REPO / "python" / "stratoscope",
    reason=f"stratoscope is imported from the source checkout ({PACKAGE}), not installed")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STRATOSCOPE_") and k not in ("STRATO_BIN", "CARGO_TARGET_DIR",
                                                              "STRATO_MEASURE_WORKER")}
    # Only the interpreter's own bin directory and the system's: no cargo target dir.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin",
                                   "/bin"])
    return env


def _console_script() -> str:
    script = Path(sys.executable).parent / "strato"
    if not script.exists():
        found = shutil.which("strato")
        assert found, "pip installed no `strato` console script"
        return found
    return str(script)


def _section_names(path: Path) -> set[str]:
    """The section names of an ELF64 little-endian file (x86_64 Linux, what the wheel targets)."""
    data = path.read_bytes()
    assert data[:6] == b"\x7fELF\x02\x01", f"{path} is not a 64-bit little-endian ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<I4xQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    _, _, _, names_offset, _ = headers[shstrndx]
    names = set()
    for name_offset, *_ in headers:
        start = names_offset + name_offset
        names.add(data[start:data.index(b"\0", start)].decode())
    return names


def test_package_ships_programs_layer_and_small_recorder():
    for name in PROGRAMS:
        path = PACKAGE / "_bin" / name
        assert path.is_file(), f"{path} missing from the installed package"
        if not name.endswith(".so"):
            assert os.access(path, os.X_OK), f"{path} is not executable"
    natives = list(PACKAGE.glob("_native*.so"))
    assert len(natives) == 1, natives
    native = natives[0].read_bytes()
    assert len(native) <= NATIVE_LIMIT_BYTES, f"{natives[0]} is {len(native)} bytes"
    # It links the recorder only: none of the CLI, clap, Parquet or SQLite code, whose strings
    # (panic locations, messages, SQLite's file header) the `strato` program does contain.
    strato = (PACKAGE / "_bin" / "strato").read_bytes()
    for marker in (b"crates/strato-cli/", b"clap_builder", b"parquet", b"SQLite format 3"):
        assert marker in strato, f"the strato program lacks {marker!r}: not a marker"
        assert marker not in native, f"{natives[0]} contains {marker!r}"
    # Release builds without debug info (`strip = true` in the Cargo profile `wheel`).
    for path in [natives[0], *(PACKAGE / "_bin" / name for name in PROGRAMS)]:
        debug = sorted(n for n in _section_names(path) if n.startswith(".debug"))
        assert not debug, f"{path} carries debug info: {debug}"
        assert ".symtab" not in _section_names(path), f"{path} is not stripped"


def test_strato_runs_the_packaged_program():
    proc = subprocess.run([_console_script(), "--version"], capture_output=True, text=True,
                          env=_clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("strato "), proc.stdout


PYOPENCL_PROGRAM = """
    import numpy as np
    import pyopencl as cl
    import stratoscope

    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, '''
        __kernel void scale(__global float *x, float a) {
            size_t i = get_global_id(0);
            for (int k = 0; k < 64; k++) x[i] = x[i] * a + 1.0f;
        }''').build()
    host = np.ones(1 << 18, dtype=np.float32)
    buffer = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    with stratoscope.operation("scale"):
        for _ in range(20):
            program.scale(queue, host.shape, None, buffer, np.float32(0.5))
        cl.enqueue_copy(queue, host, buffer)
        queue.finish()
    assert abs(host[0] - 2.0) < 1e-3, host[0]
"""


def test_record_opencl_with_the_installed_package_only(tmp_path):
    pytest.importorskip("pyopencl")
    script = tmp_path / "scale.py"
    script.write_text(textwrap.dedent(PYOPENCL_PROGRAM))
    profile = tmp_path / "prof"
    proc = subprocess.run([_console_script(), "record", "--opencl", "--json", "-o", str(profile),
                           "--", sys.executable, str(script)],
                          capture_output=True, text=True, env=_clean_env(), timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    files = sorted(p.name for p in profile.iterdir() if p.suffix == ".strato")
    assert any(f.endswith("-opencl.strato") for f in files), files
    process = json.loads(proc.stdout)["processes"][0]
    device = sum(row["time_ns"] for row in process["rows"]
                 if row["operation"] == "scale" and "GPU" in row["resource"])
    # 20 kernels of 2^18 work items x 64 iterations, and a 1 MiB copy, on PoCL: device time.
    assert device > 0, process["rows"]
