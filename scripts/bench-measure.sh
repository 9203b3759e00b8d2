#!/usr/bin/env bash
# The measurement benchmark (docs/measure.md, "Benchmark"): the serial harness, the engine
# pinned to parallelism 1 and the engine with REACT, each run RUNS times in a row on each
# workload, every pick judged against the true best (re-measured alone, interleaved, to +-1%).
# Prints, per workload, one line per run (load average at its start and end; the durations
# of the serial harness, the engine pinned to dp 1, the engine, the truth and the whole run;
# the time reduction; each method's gap to the true best), the total time, the median and
# the worst, and whether the target (engine's worst gap <= 2%, median time reduction >= 40%)
# is met. The full JSON stays in $OUT/<workload>.json.
#
#   bash scripts/bench-measure.sh                 # 5 runs each of opencl-matmul, opencl-reduce
#   RUNS=1 bash scripts/bench-measure.sh          # a quick check of both
#   RUNS=2 WORKLOADS=opencl-reduce bash scripts/bench-measure.sh
#
# Duration on 2 idle cores (release build; the serial harness, a fresh process and a cold
# compiler per candidate, is most of it): about 6 min per matmul run and 2.5 min per
# reduction run, so about 45 min for RUNS=5 (see docs/measure.md, "Benchmark"), plus the
# release build on a fresh checkout. Run it on an idle machine: other processes on the
# cores distort every latency a CPU device measures.
# Environment: RUNS (5), WORKLOADS ("opencl-matmul opencl-reduce"), OUT (target/bench-measure),
# STRATO (the strato binary; default: a release build of this checkout), EXTRA (more
# `strato measure` options, e.g. '--params {"max_dp":2}').
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-5}"
WORKLOADS="${WORKLOADS:-opencl-matmul opencl-reduce}"
OUT="${OUT:-target/bench-measure}"
# Every build is a real build: PoCL's kernel cache would hide compile times from the serial
# harness and the engine alike.
export POCL_KERNEL_CACHE=0

if [[ -z "${STRATO:-}" ]]; then
  cargo build --release --locked -p strato-cli
  STRATO=target/release/strato
fi
mkdir -p "$OUT"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
for w in $WORKLOADS; do
  json="$OUT/$w.json"
  echo "== $w: $RUNS run(s) -> $json"
  # shellcheck disable=SC2086
  "$STRATO" measure --compare-serial --example "$w" --runs "$RUNS" --json ${EXTRA:-} >"$json"
  python3 - "$json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
g = lambda v: "-" if v is None else f"{v:+.2f}%"
t = lambda v: "-" if v is None else f"{v:.0f}s"
la = lambda v: "-" if not v else f"{v[0]:.2f}"
print(f"{'run':>3} {'load1':>11} {'serial':>7} {'dp 1':>6} {'engine':>6} {'truth':>6} {'run':>6} "
      f"{'time red.':>9} {'engine':>8} {'dp 1':>8} {'serial':>8}  true best")
for k, s in enumerate(r["runs"], 1):
    load = f"{la(s.get('load_average'))}-{la(s.get('load_average_end'))}"
    print(f"{k:>3} {load:>11} {t(s['serial_time_s']):>7} {t(s.get('pinned_time_s')):>6} "
          f"{t(s['parallel_time_s']):>6} {t(s.get('truth_time_s')):>6} {t(s.get('run_time_s')):>6} "
          f"{s['time_reduction_pct']:>8.1f}% {g(s['best_gap_pct']):>8} "
          f"{g(s['pinned_best_gap_pct']):>8} {g(s['serial_best_gap_pct']):>8}  {s['true_best']}")
total = sum(s.get("run_time_s") or 0 for s in r["runs"])
print(f"{len(r['runs'])} run(s) in {total / 60:.1f} min; median time reduction "
      f"{r['median_time_reduction_pct']:.1f}%; worst gap: engine {g(r['worst_gap_pct'])}, "
      f"dp 1 {g(r.get('worst_pinned_gap_pct'))}, serial {g(r.get('worst_serial_gap_pct'))}")
ok = r["median_time_reduction_pct"] >= 40 and r["worst_gap_pct"] is not None and r["worst_gap_pct"] <= 2
print("target (worst engine gap <= 2%, median time reduction >= 40%):", "met" if ok else "NOT met")
EOF
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $SECONDS s in all"
