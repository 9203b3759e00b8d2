#!/usr/bin/env python3
"""`strato view` latency and memory: starts the server on a trace, times how long until it
prints its URL (import + index) beside `strato info` on the same file, then asks windows as a
user's pans and zooms would (the whole job, then random windows from 1/2 to 1/100,000 of it,
for the lanes a screen shows and for every lane) and reports the answers' p50/p95/max, their
size, and the server's peak RSS (VmHWM).

    python3 benches/view_latency.py TRACE [--strato BIN] [--requests N] [--px N] [--json OUT]
    python3 benches/view_latency.py --ci          # bounded: the 8-rank DLRM job, 60 requests

Figures go in docs/benchmarks.md ("strato view"); nothing here asserts a time, except --ci,
which fails when a window's answer takes more than 2 s (a level of detail that stopped
working, not a slow machine).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def rss_peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--strato", default=str(REPO / "target" / "release" / "strato"))
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--px", type=int, default=1400)
    ap.add_argument("--json")
    ap.add_argument("--ci", action="store_true")
    args = ap.parse_args()
    if args.ci:
        args.trace = args.trace or str(REPO.parent / "shared" / "data" / "kineto" / "param_dlrm8")
        args.requests = 60
        if not Path(args.strato).exists():
            args.strato = str(REPO / "target" / "debug" / "strato")
    if not args.trace:
        ap.error("a trace is needed (or --ci)")
    if not Path(args.trace).exists():
        print(f"view_latency: {args.trace}: not found", file=sys.stderr)
        return 2 if not args.ci else 0

    t = time.perf_counter()
    subprocess.run([args.strato, "info", args.trace], check=True, capture_output=True)
    info_s = time.perf_counter() - t

    t = time.perf_counter()
    proc = subprocess.Popen([args.strato, "view", args.trace, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        ready_s = time.perf_counter() - t
        if not url.startswith("http://"):
            print(f"view_latency: no URL: {proc.stderr.read()}", file=sys.stderr)
            return 1
        base, token = url.split("/?token=")

        def get(path: str) -> tuple[float, int, dict]:
            sep = "&" if "?" in path else "?"
            began = time.perf_counter()
            with urllib.request.urlopen(f"{base}{path}{sep}token={token}", timeout=600) as r:
                body = r.read()
            return time.perf_counter() - began, len(body), json.loads(body)

        _, _, lanes = get("/api/lanes")
        end = lanes["end_ns"] + 1
        ids = [l["id"] for l in lanes["lanes"]]
        rng = random.Random(7)
        # What a screen shows: ~50 lanes from somewhere in the list; and every lane.
        times: dict[str, list[float]] = {"screen": [], "all lanes": []}
        sizes: dict[str, list[int]] = {"screen": [], "all lanes": []}
        first, _, _ = get(f"/api/range?t0=0&t1={end}&px={args.px}&lanes={','.join(map(str, ids[:50]))}")
        for i in range(args.requests):
            scale = 10 ** rng.uniform(-5, -0.3)
            span = max(10, int(end * scale))
            t0 = rng.randrange(0, max(1, end - span))
            kind = "all lanes" if i % 4 == 3 else "screen"
            if kind == "screen":
                at = rng.randrange(0, max(1, len(ids) - 50 + 1))
                sel = ids[at:at + 50]
            else:
                sel = ids
            s, n, _ = get(f"/api/range?t0={t0}&t1={t0 + span}&px={args.px}&lanes={','.join(map(str, sel))}")
            times[kind].append(s)
            sizes[kind].append(n)
        rss_kb = rss_peak_kb(proc.pid)
    finally:
        proc.kill()
        proc.wait()

    def q(v: list[float], p: float) -> float:
        v = sorted(v)
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))] if v else 0.0

    size = Path(args.trace).stat().st_size if Path(args.trace).is_file() else sum(
        f.stat().st_size for f in Path(args.trace).rglob("*") if f.is_file())
    result = {
        "trace": args.trace,
        "file_mb": round(size / 1e6, 1),
        "events": lanes["events"],
        "lanes": len(ids),
        "info_s": round(info_s, 2),
        "url_after_s": round(ready_s, 2),
        "url_after_over_info": round(ready_s / info_s, 2),
        "first_window_s": round(first, 3),
        "peak_rss_mb": round(rss_kb * 1024 / 1e6, 1),
        "peak_rss_over_file": round(rss_kb * 1024 / max(size, 1), 3),
    }
    for kind in times:
        result[kind] = {
            "requests": len(times[kind]),
            "p50_ms": round(statistics.median(times[kind]) * 1000, 1) if times[kind] else None,
            "p95_ms": round(q(times[kind], 0.95) * 1000, 1),
            "max_ms": round(max(times[kind], default=0) * 1000, 1),
            "median_kb": round(statistics.median(sizes[kind]) / 1024, 1) if sizes[kind] else None,
        }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.ci and max(max(t, default=0) for t in times.values()) > 2.0:
        print("view_latency: a window took more than 2 s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
