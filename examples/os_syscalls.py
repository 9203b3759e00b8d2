"""A fixed-work program dominated by cheap system calls: the OS level's worst case for its own
overhead (every traced system call makes the kernel write two perf records in the program's
thread), used to check that `strato record --os --calibrate` measures and removes that cost
(issue 19 item 5; python/tests/test_os_calibration.py):

    strato record --os --calibrate --level 1 -o prof -- python examples/os_syscalls.py

Each step is one annotated operation that reads one byte from /dev/zero ``--reads`` times,
each read followed by a few microseconds of pure-Python work; ``--steps`` steps (default
40 x 500 reads). The work between reads keeps the calls under the kernel's sampling limit
(``kernel.perf_event_max_sample_rate``, 100,000 a second by default: denser calls are
throttled and their records lost). The annotations are no-ops when stratoscope is not
installed or not recording.
"""

from __future__ import annotations

import argparse
import contextlib
import os

try:
    import stratoscope as rls
except ImportError:  # the example runs without stratoscope too
    rls = None


def operation(name):
    return rls.operation(name) if rls is not None else contextlib.nullcontext()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--reads", type=int, default=500)
    args = p.parse_args()
    fd = os.open("/dev/zero", os.O_RDONLY)
    total = 0
    try:
        for _ in range(args.steps):
            with operation("read_bytes"):
                for _ in range(args.reads):
                    total += len(os.read(fd, 1))
                    total += sum(i * i for i in range(60)) & 1
    finally:
        os.close(fd)
    print(total)


if __name__ == "__main__":
    main()
