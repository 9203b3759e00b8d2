#!/usr/bin/env python3
"""`strato whatif` against reality (issue 29 item 4): A/B pairs on the OpenCL device (PoCL),
where B is A with exactly one change, both run and recorded; B's step time is predicted from
A's trace alone and compared with B's measured step time.

The program is `strato-opencl-demo pair VARIANT STEPS` (crates/strato-opencl-examples): per
`ProfilerStep#N`, `prepare` on the host (3 ms of busy work, a framework-level op), a
non-blocking 8 MiB host-to-device copy, `matmul` (N = 192) on the device, `postprocess` on the
host (1 ms, overlapping the device), `clFinish`. Each B variant and the change that predicts it:

  A         B             the change                                 predicted with
  base      kernel-half   matmul over half the rows (half its work)  --scale kernel:matmul=0.5
  base      host-half     prepare 1.5 ms instead of 3                --scale cpu:prepare=0.5
  base      copy-half     4 MiB copied instead of 8                   --scale category:copy=0.5
  base      both-half     kernel-half and host-half together          both scales
  sync-mid  base          A waits for the device (clFinish in an op   --no-sync wait_result
                          `wait_result`) before postprocess; B does
                          not (postprocess overlaps the device)
  base      post-half     postprocess 0.5 ms instead of 1 (it         --scale cpu:postprocess=0.5
                          overlaps the device)
  base      host-double   prepare 6 ms instead of 3                   --scale cpu:prepare=2
  sync-mid  sync-mid-     sync-mid with matmul over half the rows     --scale kernel:matmul=0.5
            kernel-half
  base      no-finish     no clFinish at the end of each step: the   --no-sync all --across-steps
                          host runs ahead while the device works
  upload-   upload-       after matmul's launch, an op `upload`      --async-copies all
  blocking  second-queue  writes the next step's input (8 MiB):
                          A blocking on the step's queue (the host
                          waits for matmul and the copy before
                          postprocess), B non-blocking on a second
                          queue (postprocess overlaps the device)

And on a recorded Python program, `examples/env_pool.py pair VARIANT STEPS` (recorded by the
stratoscope package: its operations and the threads that run them): per `ProfilerStep#N` the
main thread's `act` (4 units of SHA-256 work, a unit per MiB, about 0.75 ms), one `env_step`
handed to each of two worker threads `env-0` and `env-1` (8 units each, side by side: the
hashing releases the GIL, each worker pinned to its own core), the main thread waiting for both,
then `learn` (4 units):

  A         B             the change                                 predicted with
  slow-env  base          A's env-1 does 16 units (one slow worker);  --scale thread:env-1=0.5
                          B's does 8, as env-0 (the pool made even)
  base      act-half      act 2 units instead of 4                    --scale cpu:act=0.5
  base      env-half      both workers 4 units instead of 8           --scale cpu:env_step=0.5
  base      learn-double  learn 8 units instead of 4                  --scale cpu:learn=2

and the first pair again with `--rollout-op` (`python-rollout`): the main thread hands the work
over and waits inside an operation of its own, `rollout`.

A and B run in one program, alternating (`strato-opencl-demo pair A/B STEPS`): step by step,
or by blocks of 6 steps when B's steps overlap the next (`no-finish`). Alternating is what
makes the check fair on a shared VM: its speed moves by 20 % over seconds (`base` measures
8.6 ms a step, then 10.7 ms), so A and B run one after the other differed by that much where
the change was worth nothing, and the check measured the VM, not the model. The OpenCL program runs
under the stratoscope OpenCL layer (`OPENCL_LAYERS`), with PoCL on one worker thread
(`POCL_MAX_PTHREAD_COUNT=1`, so the device owns one of the two cores and the host the other).
A step's time, measured and predicted alike, is what `strato whatif` calls a window: from the
`ProfilerStep#N` annotation's start to the end of the step's last op (here `clFinish`'s). For
`no-finish`, whose steps overlap (the device still works on a step while the host runs the
next), steps are read across the whole trace (`--across-steps`), measured and predicted
alike: a step's time runs from the previous step's end to the end of its own work, so the
steps add up to the run and a step's time is the pace the job keeps. B's step time is
predicted from A's steps of the same program. Per pair and run (a round): the median over
steps of A's measured time, of B's measured time and of B's predicted time; the round's error
|predicted - measured| / measured. Per pair: the round whose error is the median (the lower
one of an even number), its three times and its error, and the noise: the spread of B's
medians over the rounds ((max - min) / median), and the interquartile range of B's steps over
their median — a prediction cannot be judged more finely than these.

Usage:
  python3 benches/whatif_pairs.py [--runs 3] [--steps 30] [--strato PATH] [--demo PATH]
         [--layer PATH] [--json OUT] [--only B,...]
  python3 benches/whatif_pairs.py --ci     bounded check CI runs (5 rounds of 12 steps of each
      variant): fails (exit 1) when the same pair's error exceeds both 10 % (issue 29's
      worst-case target) and the interquartile range of B's steps (its noise) in two fresh
      measurements in a row.
Paths default to this checkout's target/debug build (`cargo build -p strato-opencl-layer -p
strato-opencl-examples`) and `strato` on PATH; the Python pairs need the stratoscope package
(`pip install .`).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (the program, A, B, the change that predicts B from A's trace, how steps are read: [] each
# step's graph alone, ["--across-steps"] from one simulation of the whole trace, for measured
# and predicted alike). Programs: "opencl" the demo on PoCL, "python" examples/env_pool.py,
# "python-rollout" the same with the hand-off and the wait inside the main thread's `rollout`
# operation (`--rollout-op`).
PAIRS = [
    ("opencl", "base", "kernel-half", ["--scale", "kernel:matmul=0.5"], []),
    ("opencl", "base", "host-half", ["--scale", "cpu:prepare=0.5"], []),
    ("opencl", "base", "copy-half", ["--scale", "category:copy=0.5"], []),
    ("opencl", "base", "both-half", ["--scale", "kernel:matmul=0.5", "--scale", "cpu:prepare=0.5"], []),
    ("opencl", "sync-mid", "base", ["--no-sync", "wait_result"], []),
    ("opencl", "base", "post-half", ["--scale", "cpu:postprocess=0.5"], []),
    ("opencl", "base", "host-double", ["--scale", "cpu:prepare=2"], []),
    ("opencl", "sync-mid", "sync-mid-kernel-half", ["--scale", "kernel:matmul=0.5"], []),
    ("opencl", "base", "no-finish", ["--no-sync", "all"], ["--across-steps"]),
    ("opencl", "upload-blocking", "upload-second-queue", ["--async-copies", "all"], []),
    ("python", "slow-env", "base", ["--scale", "thread:env-1=0.5"], []),
    ("python", "base", "act-half", ["--scale", "cpu:act=0.5"], []),
    ("python", "base", "env-half", ["--scale", "cpu:env_step=0.5"], []),
    ("python", "base", "learn-double", ["--scale", "cpu:learn=2"], []),
    ("python-rollout", "slow-env", "base", ["--scale", "thread:env-1=0.5"], []),
]

ENV_POOL = os.path.join(ROOT, "examples", "env_pool.py")


def record(program, demo, layer, variant, steps, out):
    env = dict(os.environ)
    env.update(STRATOSCOPE_OUT=out)
    if program == "opencl":
        env.update(
            OPENCL_LAYERS=layer,
            POCL_MAX_PTHREAD_COUNT="1",  # PoCL before 5.0
            POCL_CPU_MAX_CU_COUNT="1",  # PoCL 5.0 and later
        )
        cmd = [demo, "pair", variant, str(steps)]
    else:
        # Recorded by the stratoscope package (STRATOSCOPE_OUT starts it): the operations and
        # the threads that run them.
        cmd = [sys.executable, ENV_POOL, "pair", variant, str(steps)]
        if program == "python-rollout":
            cmd.append("--rollout-op")
    done = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True)
    # The program's last line: which variant ran each step (and each step's wall time).
    return json.loads(done.stdout.strip().splitlines()[-1])["step_variant"]


def whatif(strato, profile, change):
    cmd = [strato, "whatif", profile, "--json"] + change
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def median_of(values):
    return statistics.median(values) if values else 0.0


def iqr_over_median(values):
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / statistics.median(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--strato", default=shutil.which("strato") or os.path.join(ROOT, "target/debug/strato"))
    ap.add_argument("--demo", default=os.path.join(ROOT, "target/debug/strato-opencl-demo"))
    ap.add_argument("--layer", default=os.path.join(ROOT, "target/debug/libstrato_opencl_layer.so"))
    ap.add_argument("--json")
    ap.add_argument("--ci", action="store_true")
    ap.add_argument("--only", help="the pairs whose B is one of these variants (comma-separated)")
    args = ap.parse_args()
    pairs = [p for p in PAIRS if not args.only or p[2] in args.only.split(",")]
    if not pairs:
        sys.exit(f"whatif_pairs: no pair has B in {args.only!r}")
    if args.ci:
        args.runs, args.steps = 5, 12
    needed = [("strato", args.strato)]
    if any(p[0] == "opencl" for p in pairs):
        needed += [("demo", args.demo), ("layer", args.layer)]
    for what, path in needed:
        if not os.path.exists(path):
            sys.exit(f"whatif_pairs: {what} not found at {path} (build it first)")
    if any(p[0].startswith("python") for p in pairs):
        try:
            import stratoscope  # noqa: F401  (records the Python pairs)
        except ImportError:
            sys.exit("whatif_pairs: the Python pairs need the stratoscope package (pip install .)")

    def measure_all():
        rows = []
        replay_worst = 0.0
        with tempfile.TemporaryDirectory() as tmp:
            for program, a, b, change, reading in pairs:
                rounds = []  # per round: (A's median, B's median, B predicted's median, B's steps)
                for r in range(args.runs):
                    # One program alternating A's and B's steps (step by step, or by blocks when
                    # B's steps overlap the next), so both meet the same machine: a shared VM
                    # changes speed by 20 % over seconds, more than most changes here are
                    # worth when A and B run one after the other.
                    out = os.path.join(tmp, f"{program}-{a}-{b}-{r}")
                    ran = record(program, args.demo, args.layer, f"{a}/{b}", 2 * args.steps, out)
                    replay = whatif(args.strato, out, reading)["replay"]
                    predicted = whatif(args.strato, out, change + reading)["whatif"]["steps"]

                    def of(variant, windows, key):
                        return [w[key] for w in windows if ran[w["number"] - 1] == variant]

                    a_steps = of(a, replay["steps"], "measured_ns")
                    b_steps = of(b, replay["steps"], "measured_ns")
                    p_steps = of(a, predicted, "predicted_ns")
                    replay_worst = max(replay_worst, replay["worst_error_pct"])
                    rounds.append((median_of(a_steps), median_of(b_steps), median_of(p_steps), b_steps))
                measured_runs = [m for _, m, _, _ in rounds]
                measured = median_of(measured_runs)
                # The row shows one real round, the median one by its error (each round's
                # prediction is judged against the same round's B: a round taken while the
                # machine was slower judges its own pair), so its figures agree with its error.
                error_of = lambda r: abs(r[2] - r[1]) / r[1]
                a_ns, b_ns, p_ns, _ = sorted(rounds, key=error_of)[(len(rounds) - 1) // 2]
                rows.append({
                    "program": program,
                    "a": a,
                    "b": b,
                    "change": " ".join(change + reading),
                    "a_measured_ms": a_ns / 1e6,
                    "b_measured_ms": b_ns / 1e6,
                    "b_predicted_ms": p_ns / 1e6,
                    "error_pct": 100.0 * abs(p_ns - b_ns) / b_ns,
                    "noise_runs_pct": 100.0 * (max(measured_runs) - min(measured_runs)) / measured,
                    "noise_steps_iqr_pct": 100.0 * iqr_over_median([s for *_, steps in rounds for s in steps]),
                })
        print(f"runs {args.runs} x {args.steps} steps; replay error of A, worst window: {replay_worst:.3f} %")
        print("| program | A | B | predicted with | A measured | B measured | B predicted | error | noise: B runs | noise: B steps (IQR) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['program']} | {r['a']} | {r['b']} | `{r['change']}` | {r['a_measured_ms']:.3f} ms | {r['b_measured_ms']:.3f} ms | "
                  f"{r['b_predicted_ms']:.3f} ms | {r['error_pct']:.2f} % | {r['noise_runs_pct']:.2f} % | "
                  f"{r['noise_steps_iqr_pct']:.2f} % |")
        errors = [r["error_pct"] for r in rows]
        print(f"median error {statistics.median(errors):.2f} %, worst {max(errors):.2f} %")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"runs": args.runs, "steps": args.steps, "pairs": rows}, f, indent=1)
        return rows

    def bound(row):
        # A prediction cannot be judged more finely than B's own step-to-step spread.
        return max(10.0, row["noise_steps_iqr_pct"])

    rows = measure_all()
    off = {i for i, r in enumerate(rows) if r["error_pct"] > bound(r)}
    if args.ci and off:
        # One noisy run on a shared 2-core machine is not a wrong model: measure every pair
        # again, afresh, and fail only when the same pair is off twice.
        print(f"whatif_pairs: off by more than 10 % and their noise: "
              f"{', '.join(rows[i]['b'] for i in sorted(off))}; measuring again")
        again = measure_all()
        twice = sorted(i for i in off if again[i]["error_pct"] > bound(again[i]))
        if twice:
            sys.exit("whatif_pairs: off by more than 10 % and their noise twice: " + ", ".join(
                f"{again[i]['a']} -> {again[i]['b']} ({rows[i]['error_pct']:.2f} %, "
                f"{again[i]['error_pct']:.2f} %)" for i in twice))


if __name__ == "__main__":
    main()
