"""A workload whose operations each spend their time in one OS thread state, to see (and test)
`strato record --os` (issue 19):

- ``sleep``: ``time.sleep`` in a loop -> blocked:sleep;
- ``io``: 4 MiB O_DIRECT writes, each followed by ``os.fsync``, on a real disk -> blocked:io;
- ``lock``: the main thread takes a lock a second thread holds most of the time -> blocked:lock;
- ``oversubscribe``: pure-Python spinning while more spinning processes than cores run ->
  runnable (waiting for a core).

Run it under stratoscope:

    strato record --os -o prof -- python examples/os_states.py
    strato breakdown prof --json   # rows keyed by operation and thread_state

Each operation lasts about ``--seconds`` (default 0.6 s). The annotations are no-ops when
stratoscope is not installed or not recording.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import os
import subprocess
import sys
import tempfile
import threading
import time

try:
    import stratoscope as rls
except ImportError:  # the example runs without stratoscope too
    rls = None


def operation(name):
    return rls.operation(name) if rls is not None else contextlib.nullcontext()


def sleep_op(seconds: float) -> None:
    end = time.monotonic() + seconds
    with operation("sleep"):
        while time.monotonic() < end:
            time.sleep(0.01)


def io_op(seconds: float, directory: str) -> None:
    # O_DIRECT (where the file system allows it): the data goes from this page-aligned buffer
    # to the disk with no page-cache copy, so the thread spends its time waiting for the disk,
    # not copying (CPU work would be preempted on a busy machine and read as runnable).
    size = 4 * 1024 * 1024
    block = mmap.mmap(-1, size)
    block.write(os.urandom(size))
    path = os.path.join(directory, "os_states.bin")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(path, flags | getattr(os, "O_DIRECT", 0), 0o600)
    except OSError:
        fd = os.open(path, flags, 0o600)
    try:
        end = time.monotonic() + seconds
        with operation("io"):
            while time.monotonic() < end:
                os.pwrite(fd, block, 0)
                os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(path)
        block.close()


def lock_op(seconds: float) -> None:
    lock = threading.Lock()
    done = threading.Event()

    def holder() -> None:
        # Holds the lock 20 ms at a time and takes it back at once: the main thread, woken by
        # each release, mostly finds it taken again and waits on.
        while not done.is_set():
            with lock:
                time.sleep(0.02)

    t = threading.Thread(target=holder, name="lock-holder")
    t.start()
    time.sleep(0.02)
    end = time.monotonic() + seconds
    try:
        with operation("lock"):
            while time.monotonic() < end:
                if lock.acquire(timeout=0.05):
                    lock.release()
    finally:
        done.set()
        t.join()


SPIN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"


def oversubscribe_op(seconds: float, spinners: int) -> None:
    # -I: the spinners are plain Python (not recorded), so they only compete for the cores.
    procs = [
        subprocess.Popen([sys.executable, "-I", "-c", SPIN.format(s=seconds + 1.0)])
        for _ in range(spinners)
    ]
    try:
        time.sleep(0.3)  # the spinners are up and spinning
        end = time.monotonic() + seconds
        with operation("oversubscribe"):
            x = 0
            while time.monotonic() < end:
                x += 1
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=0.6, help="length of each operation")
    p.add_argument("--spinners", type=int, default=3 * (os.cpu_count() or 2),
                   help="spinning processes during `oversubscribe` (default 3 per core)")
    p.add_argument("--dir", default=None,
                   help="directory of the fsync'd file (default: a temporary directory; it "
                        "must be on a real disk, not tmpfs)")
    args = p.parse_args()
    sleep_op(args.seconds)
    if args.dir is None:
        with tempfile.TemporaryDirectory(dir=os.getcwd()) as d:
            io_op(args.seconds, d)
    else:
        io_op(args.seconds, args.dir)
    lock_op(args.seconds)
    oversubscribe_op(args.seconds, args.spinners)


if __name__ == "__main__":
    main()
