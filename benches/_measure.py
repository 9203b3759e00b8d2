"""Process measurement shared by the benchmark scripts in this directory (run them as
`python3 benches/NAME.py`: this directory is then on sys.path)."""

import os
import statistics
import subprocess
import time

def measure(cmd, runs):
    """Runs cmd `runs` times; returns (median wall s, min wall s, max peak RSS MiB, last stdout)."""
    walls, rss, out = [], [], b""
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}")
        rss.append(usage.ru_maxrss / 1024.0)
    return statistics.median(walls), min(walls), max(rss), out.decode(errors="replace")
