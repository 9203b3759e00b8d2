"""A reinforcement-learning loop over a pool of environment workers, in plain Python: the
program of `strato whatif`'s Python A/B pairs (benches/whatif_pairs.py, docs/analyses/whatif.md).

Each step (a `ProfilerStep#N` operation) runs on the main thread `act` (the policy's
inference), hands one `env_step` to each worker thread (`env-0`, `env-1`, one environment
each) and waits for both, then runs `learn`. The work is SHA-256 over a 1 MiB buffer, a unit
per MiB: it is real CPU work that releases the GIL, so the two workers run side by side on two
cores as native simulators do; each worker is pinned to its own core.

    python3 examples/env_pool.py pair VARIANT[/VARIANT] STEPS [--rollout-op]

Variants (units of work: act, env-0, env-1, learn):

    base          4, 8, 8, 4
    slow-env      4, 8, 16, 4    one worker twice as slow as the other
    act-half      2, 8, 8, 4     the policy's inference twice as fast
    env-half      4, 4, 4, 4     both environments twice as fast
    learn-double  4, 8, 8, 8     learning twice as slow

With `--rollout-op` the main thread hands the work over and waits for it inside an operation
of its own, `rollout` (as `with operation("rollout"): pool.map(...)` would), instead of between
`act` and `learn`.

With two variants `A/B` their steps alternate (A, B, A, ...) in one program, so both meet the
same machine. The last line printed is JSON: `{"step_variant": [...], "step_ms": [...]}`, the
variant and the wall time of each step in order. Record it with `STRATOSCOPE_OUT=DIR` in the
environment (or `strato record -o DIR -- python3 examples/env_pool.py ...`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import sys
import threading
import time

try:
    import stratoscope
except ImportError:  # the program runs without stratoscope too
    stratoscope = None

VARIANTS = {
    "base": (4, 8, 8, 4),
    "slow-env": (4, 8, 16, 4),
    "act-half": (2, 8, 8, 4),
    "env-half": (4, 4, 4, 4),
    "learn-double": (4, 8, 8, 8),
}

BUFFER = b"\x5a" * (1 << 20)


def operation(name: str):
    return stratoscope.operation(name) if stratoscope is not None else contextlib.nullcontext()


def work(units: int) -> bytes:
    """`units` MiB through SHA-256 (the GIL is released while it hashes)."""
    digest = hashlib.sha256()
    for _ in range(units):
        digest.update(BUFFER)
    return digest.digest()


def worker(k: int, inbox: queue.Queue, outbox: queue.Queue) -> None:
    # Each worker on its own core: woken by the main thread, both would otherwise start on
    # the main thread's core (the scheduler's wake-up placement) and share it for
    # milliseconds before one moves, which makes a step's time a matter of luck.
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[k % len(cores)]})
    while (units := inbox.get()) is not None:
        with operation("env_step"):
            work(units)
        outbox.put(units)


def main(argv: list[str]) -> int:
    rollout_op = argv[3:] == ["--rollout-op"]
    if len(argv) != 3 + rollout_op or argv[0] != "pair":
        print(__doc__, file=sys.stderr)
        return 2
    names = argv[1].split("/")
    if any(n not in VARIANTS for n in names) or len(names) > 2:
        print(f"env_pool: variants are {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    steps = int(argv[2])
    inboxes = [queue.Queue() for _ in range(2)]
    outbox: queue.Queue = queue.Queue()
    workers = [
        threading.Thread(target=worker, args=(k, inboxes[k], outbox), name=f"env-{k}")
        for k in range(2)
    ]
    for t in workers:
        t.start()
    ran: list[str] = []
    step_ms: list[float] = []
    for n in range(1, steps + 1):
        variant = names[(n - 1) % len(names)]
        act, env0, env1, learn = VARIANTS[variant]
        began = time.perf_counter()
        with operation(f"ProfilerStep#{n}"):
            with operation("act"):
                work(act)
            with operation("rollout") if rollout_op else contextlib.nullcontext():
                inboxes[0].put(env0)
                inboxes[1].put(env1)
                for _ in workers:
                    outbox.get()
            with operation("learn"):
                work(learn)
        step_ms.append((time.perf_counter() - began) * 1e3)
        ran.append(variant)
    for box in inboxes:
        box.put(None)
    for t in workers:
        t.join()
    print(json.dumps({"step_variant": ran, "step_ms": step_ms}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
