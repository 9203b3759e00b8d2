#!/usr/bin/env bash
# The measurement benchmark (docs/measure.md, "Benchmark"): the serial harness, the engine
# pinned to parallelism 1 and the engine with REACT, each run RUNS times in a row on each
# workload, every pick judged against the true best (re-measured alone, interleaved, to +-1%).
# Prints one summary line per workload and keeps the full JSON:
#
#   bash scripts/bench-measure.sh                 # 5 runs each of opencl-matmul, opencl-reduce
#   RUNS=2 WORKLOADS=opencl-reduce bash scripts/bench-measure.sh
#
# Takes about 7 min per matmul run and 3 min per reduction run on 2 idle cores (the serial
# harness is most of it). Run it on an idle machine: the load average is recorded with every
# run, and other processes on the cores distort every latency a CPU device measures.
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
print(f"{'run':>4} {'load1':>6} {'time red.':>10} {'engine':>9} {'dp 1':>9} {'serial':>9}  true best")
for k, s in enumerate(r["runs"], 1):
    la = s.get("load_average") or [float("nan")]
    print(f"{k:>4} {la[0]:>6.2f} {s['time_reduction_pct']:>9.1f}% {g(s['best_gap_pct']):>9} "
          f"{g(s['pinned_best_gap_pct']):>9} {g(s['serial_best_gap_pct']):>9}  {s['true_best']}")
print(f"median time reduction {r['median_time_reduction_pct']:.1f}%; worst gap: engine "
      f"{g(r['worst_gap_pct'])}, dp 1 {g(r.get('worst_pinned_gap_pct'))}, "
      f"serial {g(r.get('worst_serial_gap_pct'))}")
ok = r["median_time_reduction_pct"] >= 40 and r["worst_gap_pct"] is not None and r["worst_gap_pct"] <= 2
print("target (worst engine gap <= 2%, median time reduction >= 40%):", "met" if ok else "NOT met")
EOF
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
