#!/usr/bin/env python3
"""Benchmark: peak memory and time of each command against the size of the trace it reads.

For each trace size, generates (or reuses) a Kineto trace with `benches/gen_kineto.py` and
runs the release `strato` on it in fresh processes: `info`, `gpu-time`, `kernels`,
`breakdown`, `import -o`, `report -o`, and `info`, `gpu-time`, `kernels` and `breakdown` on the
stored profile that `import -o` wrote. Peak RSS is `wait4`'s `ru_maxrss` (the figure `/usr/bin/time -v` prints as
"Maximum resident set size"); wall time from a monotonic clock. Prints a Markdown table with
the ratio peak RSS / trace size (the uncompressed JSON), the figure issue 11 bounds
(target <= 0.15x for import and single-pass analyses).

Usage: python3 benches/memory.py [--events N ...] [--dir /tmp/strato-mem] [--strato PATH]
                                 [--only info,gpu-time,...] [--keep]
Default sizes: 250k, 1M and 4M events (about 70 MB, 280 MB and 1.1 GB). The long runs of
docs/benchmarks.md: `--events 7000000 --decimal-times` (about 2 GB, every command) and
`--events 36000000 --decimal-times --only "import -o"` (about 10 GB; needs ~12 GB of disk). Generated files are kept in --dir for the
next run (delete them yourself); profiles written by `import -o` are removed unless --keep.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def commands(trace, store, html):
    return [
        ("info", ["info", trace]),
        ("gpu-time", ["gpu-time", trace]),
        ("kernels", ["kernels", trace]),
        ("breakdown", ["breakdown", trace]),
        ("import -o", ["import", trace, "-o", store]),
        ("report", ["report", trace, "-o", html]),
        ("info (profile)", ["info", store]),
        ("gpu-time (profile)", ["gpu-time", store]),
        ("kernels (profile)", ["kernels", store]),
        ("breakdown (profile)", ["breakdown", store]),
    ]


def run(cmd):
    """Runs cmd; returns (wall s, peak RSS bytes). Exits on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err.decode(errors='replace')}")
    return wall, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--dir", default="/tmp/strato-mem")
    parser.add_argument("--strato", default=os.path.join(ROOT, "target", "release", "strato"))
    parser.add_argument("--only", help="comma-separated command labels to run")
    parser.add_argument("--keep", action="store_true", help="keep the written profiles")
    parser.add_argument("--decimal-times", action="store_true",
                        help="generate decimal timestamps (Kineto's current layout; needs the "
                             "splitter fix of issue 11 item 1 at large sizes)")
    args = parser.parse_args()
    if not os.path.exists(args.strato):
        raise SystemExit(f"{args.strato}: build it first (cargo build --release -p strato-cli)")
    os.makedirs(args.dir, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    print(f"strato: {args.strato}; load average {os.getloadavg()[0]:.1f} at start", file=sys.stderr)
    print("| events | JSON MB | command | wall s | peak RSS MB | RSS / JSON size |")
    print("|---|---|---|---|---|---|")
    for events in args.events:
        trace = os.path.join(args.dir, f"kineto-{events}.json")
        if not os.path.exists(trace):
            gen = [sys.executable, os.path.join(HERE, "gen_kineto.py"), trace, "--events", str(events)]
            if not args.decimal_times:
                gen.append("--integer-numbers")
            subprocess.run(gen, check=True, stdout=subprocess.DEVNULL)
        size = os.path.getsize(trace)
        store = os.path.join(args.dir, f"kineto-{events}.profile")
        html = os.path.join(args.dir, f"kineto-{events}.html")
        for label, cmd in commands(trace, store, html):
            if only and label not in only:
                continue
            if "(profile)" in label and not os.path.exists(store):
                run([args.strato, "import", trace, "-o", store])
            wall, rss = run([args.strato] + cmd)
            print(f"| {events:,} | {size / 1e6:,.0f} | `{label}` | {wall:.2f} | {rss / 1e6:,.0f} | "
                  f"{rss / size:.3f}x |", flush=True)
        if not args.keep:
            shutil.rmtree(store, ignore_errors=True)
        if os.path.exists(html):
            os.remove(html)
    print(f"load average {os.getloadavg()[0]:.1f} at end", file=sys.stderr)


if __name__ == "__main__":
    main()
