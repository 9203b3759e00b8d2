#!/usr/bin/env bash
# Coverage-guided fuzzing campaigns (AFL++ through afl.rs, on the stable toolchain); see
# docs/fuzzing.md.
#
#   bash scripts/fuzz.sh TARGET [SECONDS]   one campaign (default 600 s) on one core
#   bash scripts/fuzz.sh all [SECONDS]      every target in turn, SECONDS each
#   bash scripts/fuzz.sh install            cargo-afl (builds AFL++ from the crate, offline)
#   bash scripts/fuzz.sh seeds              regenerate fuzz/corpus/ (../shared/data; perf: recorded here)
#   bash scripts/fuzz.sh replay TARGET FILE...   run inputs through a target (triage)
#
# Targets: chrome chrome_chunked tf xplane nsys ncu recording store rocprof perfetto perf_data
# perf_script rules device_spec level_map sql.
# A campaign resumes from its queue (target/fuzz/TARGET/) when run again. Afterwards the
# script prints executions, crashes and hangs, replays each crash through the (uninstrumented)
# target to show what broke, and copies crashes and hangs to fuzz/findings/TARGET/ (ignored by
# git): fix the parser, then move the input to fuzz/regressions/TARGET/ so CI replays it.
#
# Environment: FUZZ_TIMEOUT_MS (per run, default 5000), FUZZ_MEMORY_MB (default 4096),
# FUZZ_JOBS (cargo build jobs, default 1), AFL_OPT_LEVEL (optimisation of the instrumented
# build, default 3; 1 builds several times faster on a busy machine and runs a little slower),
# FUZZ_NO_BUILD=1 (use the drivers already built).
#
# Two drivers are built (in target/afl/, sharing their dependencies): strato-fuzz-afl-core
# (every target but store and sql: no parquet or arrow to instrument), strato-fuzz-afl-store and
# strato-fuzz-afl-sql (DataFusion).
set -euo pipefail
cd "$(dirname "$0")/.."

AFL_VERSION=0.18.2
TARGETS=(chrome chrome_chunked tf xplane nsys ncu recording store rocprof perfetto perf_data perf_script rules device_spec level_map sql)
AFL_TARGET_DIR="$PWD/target/afl"
# The uninstrumented tool (replay, seeds), where cargo puts it (CARGO_TARGET_DIR honoured).
TOOL="${CARGO_TARGET_DIR:-target}/debug/strato-fuzz"
driver_of() {
  case $1 in
    store) echo "$AFL_TARGET_DIR/strato-fuzz-afl-store" ;;
    sql) echo "$AFL_TARGET_DIR/strato-fuzz-afl-sql" ;;
    *) echo "$AFL_TARGET_DIR/strato-fuzz-afl-core" ;;
  esac
}

install() {
  # AFL++ is built from the sources inside the cargo-afl crate by its build script (make and a
  # C compiler; nothing is fetched but the crate). Debian's afl++ package is not needed.
  local missing=()
  for p in make gcc; do command -v "$p" >/dev/null || missing+=("$p"); done
  if ((${#missing[@]})); then
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make gcc
  fi
  if ! cargo afl --version 2>/dev/null | grep -q "$AFL_VERSION"; then
    cargo install cargo-afl --version "$AFL_VERSION" --locked
  fi
}

build() {
  if [[ -n ${FUZZ_NO_BUILD:-} && -x $(driver_of "$1") ]]; then return; fi
  install
  local features=(--no-default-features --features afl)
  [[ $1 == store ]] && features=(--features afl,store)
  [[ $1 == sql ]] && features=(--features afl,sql)
  CARGO_TARGET_DIR=$AFL_TARGET_DIR cargo afl build --release --locked -j "${FUZZ_JOBS:-1}" -p strato-fuzz "${features[@]}" \
    --bin strato-fuzz-afl
  cp "$AFL_TARGET_DIR/release/strato-fuzz-afl" "$(driver_of "$1")"
}

seeds() {
  python3 scripts/fuzz-seeds.py "$@"
  cargo build --locked -p strato-fuzz --bin strato-fuzz
  local tool=$TOOL
  mkdir -p fuzz/corpus/recording fuzz/corpus/store
  "$tool" seed-recording fuzz/corpus/recording/seed.strato
  "$tool" seed-store fuzz/corpus/chrome/hta_cuda_event_sync_trace.json \
    fuzz/corpus/store/hta_cuda_event_sync_trace.profile
  "$tool" seed-store fuzz/corpus/recording/seed.strato fuzz/corpus/store/recording.profile
  # A second Perfetto writer: stratoscope's exporter, on a Kineto seed.
  cargo run --locked -q -p strato-cli --bin strato -- export --raw \
    fuzz/corpus/chrome/hta_cuda_event_sync_trace.json \
    --perfetto fuzz/corpus/perfetto/hta_cuda_event_sync_trace.pftrace
}

corpus_of() {
  case "$1" in
    chrome_chunked) echo fuzz/corpus/chrome ;;
    *) echo "fuzz/corpus/$1" ;;
  esac
}

dictionary_of() {
  # Ours (fuzz/dict/TARGET.dict), else AFL++'s own token dictionaries, shipped with it.
  if [[ -f fuzz/dict/$1.dict ]]; then echo "fuzz/dict/$1.dict" && return; fi
  local dicts
  dicts=$(dirname "$(dirname "$(command -v afl-fuzz 2>/dev/null || echo /x/x)")")
  for d in "$HOME/.local/share/afl.rs/AFLplusplus/dictionaries" "$dicts/share/afl/dictionaries"; do
    case "$1" in
      chrome | chrome_chunked | tf | store | rocprof) [[ -f $d/json.dict ]] && echo "$d/json.dict" && return ;;
      ncu) [[ -f $d/csv.dict ]] && echo "$d/csv.dict" && return ;;
      nsys) [[ -f $d/sql.dict ]] && echo "$d/sql.dict" && return ;;
    esac
  done
}

campaign() {
  local target=$1 seconds=${2:-600}
  local out="target/fuzz/$target" input
  input=$(corpus_of "$target")
  mkdir -p "$out"
  local args=(-V "$seconds" -t "${FUZZ_TIMEOUT_MS:-5000}" -m "${FUZZ_MEMORY_MB:-4096}" -o "$out")
  if [[ -d $out/default/queue ]]; then
    args+=(-i -) # resume
  else
    args+=(-i "$input")
  fi
  local dict bin
  dict=$(dictionary_of "$target")
  bin=$(driver_of "$target")
  [[ -n $dict ]] && args+=(-x "$dict")
  echo "== fuzz $target for ${seconds}s (corpus $input${dict:+, dictionary $dict})"
  AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
    AFL_SKIP_CRASHES=1 AFL_IGNORE_SEED_PROBLEMS=1 \
    cargo afl fuzz "${args[@]}" -- "$bin" "$target" >"$out/afl.log" 2>&1 || {
    echo "afl-fuzz failed; its log:" >&2
    tail -30 "$out/afl.log" >&2
    return 1
  }
  report "$target"
}

report() {
  local target=$1 out="target/fuzz/$1/default"
  local stats="$out/fuzzer_stats"
  [[ -f $stats ]] || return 0
  awk -F' *: *' -v t="$target" '
    $1=="execs_done"{e=$2} $1=="run_time"{r=$2} $1=="corpus_count"{q=$2}
    $1=="saved_crashes"{c=$2} $1=="saved_hangs"{h=$2} $1=="execs_per_sec"{s=$2}
    $1=="bitmap_cvg"{b=$2}
    END{printf "%s: %s execs in %ss (%s/s), queue %s, coverage %s, crashes %s, hangs %s\n", t,e,r,s,q,b,c,h}' "$stats"
  local found=()
  for f in "$out"/crashes/id:* "$out"/hangs/id:*; do [[ -e $f ]] && found+=("$f"); done
  if ((${#found[@]})); then
    mkdir -p "fuzz/findings/$target"
    cp "${found[@]}" "fuzz/findings/$target/"
    cargo build --locked -q -p strato-fuzz --bin strato-fuzz
    "$TOOL" replay "$target" "${found[@]}" || true
  fi
}

case "${1:-}" in
  install) install ;;
  seeds) shift; seeds "$@" ;;
  replay)
    shift
    cargo build --locked -q -p strato-fuzz --bin strato-fuzz
    "$TOOL" replay "$@"
    ;;
  all)
    for t in "${TARGETS[@]}"; do
      build "$t"
      campaign "$t" "${2:-600}"
    done
    ;;
  report) report "$2" ;;
  "" | -h | --help)
    sed -n '2,24p' "$0"
    exit 2
    ;;
  *)
    if [[ " ${TARGETS[*]} " != *" $1 "* ]]; then
      echo "fuzz.sh: unknown target '$1' (one of: ${TARGETS[*]})" >&2
      exit 2
    fi
    build "$1"
    campaign "$1" "${2:-600}"
    ;;
esac
