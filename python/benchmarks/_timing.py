"""What the recording benchmarks share (bench_levels.py, bench_os.py, bench_sample.py): one
timed run of a command, its wall time and the CPU time of it and all its children."""

from __future__ import annotations

import resource
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd: list[str]) -> tuple[float, float]:
    """Runs `cmd` (output discarded, failure raised); returns (wall s, CPU s of its tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu
