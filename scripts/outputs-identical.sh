#!/usr/bin/env bash
# Byte-identical check of strato's outputs (issue 14: "outputs byte-identical before/after").
#
# Runs every output-producing command of two strato binaries on every file and directory of
# ../shared/data that imports, and compares what they wrote: stdout, stderr, exit code, and every
# file written (HTML report, Perfetto/Chrome exports, the imported profile's Parquet tables and
# metadata.json). Only metadata.json's creation time and version strings ("strato 0.1.0",
# "stratoscope 0.1.0") are normalised before comparing; everything else must be equal byte for
# byte. Exits 1 when any output differs (or is missing on one side), 0 when all are equal.
#
# Usage:
#   scripts/outputs-identical.sh run BIN OUT         outputs of one binary into directory OUT
#   scripts/outputs-identical.sh compare OUT_A OUT_B compare two such directories
#   scripts/outputs-identical.sh bins BIN_A BIN_B    run both (into $TMPDIR) and compare
#   scripts/outputs-identical.sh revs REV_A REV_B    build both git revisions (debug, in temporary
#                                                    worktrees sharing one target dir), then bins
# Environment:
#   STRATO_DATA      the sample data (default: ../shared/data of the repository, resolved)
#   JOBS             parallel commands (default 2)
#   ALL_RAW=1        run RAW_COMMANDS on the raw HEAVY inputs too (slow in a debug build)
#   RESUME=1         let `run` continue into an existing OUT (jobs with an exit code are kept)
#
# What runs (the job list is fixed, so two runs are comparable):
# - every input (file or directory of ranks; rocprof/ is skipped: not imported yet, issue 16):
#   `import -o prof` (from the raw input), then every command of COMMANDS on the imported
#   profile (UNIONS, the directories that merely gather other inputs, get RAW_COMMANDS only);
# - RAW_COMMANDS on the raw input (the import path of every command: `report` runs most
#   analyses), except for the HEAVY inputs (their import takes seconds in a debug build);
# - `diff` (text and JSON) and `report --baseline` on pairs of related files.
# Commands that need a program to run (record, validate, measure, overhead) are not covered.
# Both sides must run with the same data path and the same ALL_RAW: outputs mention the input
# paths, which are absolute and resolved (realpath). ~1900 commands: ~15 min on 2 idle cores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
DATA=$(realpath "${STRATO_DATA:-$repo/../shared/data}")
JOBS=${JOBS:-2}
ALL_RAW=${ALL_RAW:-0}

# Inputs that do not import (yet): skipped by name, with the reason.
SKIP=(
  rocprof                               # rocprofv3 JSON: not a Chrome trace (issue 16)
  rocprof/tracelens_908_results.json.gz # same file
)
# Directories that only gather inputs already listed: RAW_COMMANDS only, on their profile.
UNIONS=(kineto kineto/tracelens)
# Inputs whose commands run on their imported profile only (raw import takes > 1 s in debug).
HEAVY=(
  kineto
  kineto/tracelens
  kineto/hta_df_index_resolver.json.gz
  kineto/hta_nccl_data.json.gz
  kineto/hta_ns_resolution_rank-0.pt.trace.json.gz
  kineto/kineto2021_resnet50_worker0.pt.trace.json.gz
  kineto/tracelens/b200_eager_trace.json.gz
  kineto/tracelens/mi300_resnet_act_checkpoint.json.gz
  kineto/tracelens/vllm_decode_full_graph_capture_rank_0.pt.trace.json.gz
)
# Every command that writes an analysis, run on each input (IN is replaced by the input).
COMMANDS=(
  "info IN"
  "info --json IN"
  "gpu-time IN"
  "gpu-time --json IN"
  "gpu-time --window hta --json IN"
  "breakdown IN"
  "breakdown --json IN"
  "breakdown --csv IN"
  "breakdown --per-step --json IN"
  "hierarchy IN"
  "hierarchy --json IN"
  "tree IN"
  "tree --json IN"
  "layers IN"
  "layers --json IN"
  "layers --kernels --csv IN"
  "layers --steps IN"
  "layers --by annotation --json IN"
  "roofline IN"
  "roofline --json IN"
  "util IN"
  "util --json IN"
  "iterations IN"
  "iterations --json IN"
  "iterations --csv IN"
  "kernels IN"
  "kernels --json IN"
  "kernels --csv IN"
  "memory IN"
  "memory --json IN"
  "memory --csv IN"
  "ops IN"
  "ops --json IN"
  "ops --csv IN"
  "collectives IN"
  "collectives --json IN"
  "queue-length --json IN"
  "critical-path --json IN"
  "critical-path --step all --json IN"
  "whatif --json IN"
  "advise --json IN"
  "report IN -o report.html"
  "export IN --perfetto out.pftrace"
  "export IN --perfetto out.pftrace --raw"
  "export IN --perfetto out.pftrace --iterations"
  "export IN --chrome out.json"
)
# Commands also run on the raw inputs (a subset of COMMANDS).
RAW_COMMANDS=(
  "info IN"
  "info --json IN"
  "gpu-time --json IN"
  "breakdown --json IN"
  "report IN -o report.html"
)
# Pairs compared with `diff` and `report --baseline` (A then B).
PAIRS=(
  "kineto/hta_trace_compare/base.json.gz kineto/hta_trace_compare/test.json.gz"
  "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz"
  "kineto/hta_trace_filter/sampled_rank-0.json.gz kineto/hta_trace_filter/sampled_rank-1.json.gz"
  "kineto/param_dlrm8/worker0_step_12.1694128201545.pt.trace.json.gz kineto/param_dlrm8/worker1_step_12.1694128201556.pt.trace.json.gz"
)

die() { echo "outputs-identical: $*" >&2; exit 2; }
in_list() { local x=$1; shift; local y; for y in "$@"; do [[ $x == "$y" ]] && return 0; done; return 1; }
slug() { local s=${1//\//_}; echo "${s// /_}"; }

job_name() {
  local c=${1/ IN/}
  c=${c// -o report.html/}
  slug "${c// out.pftrace/}"
}

inputs() {
  (cd "$DATA" && find . -mindepth 1 \( -type f -o -type d \) ! -name '*.md' | sed 's|^\./||' | LC_ALL=C sort) |
    while read -r rel; do
      in_list "$rel" "${SKIP[@]}" || echo "$rel"
    done
}

# One job per line: `NAME ARG...` (no argument holds a space; asserted for the data paths).
# Phase 1 (imports) must finish before phase 2 (which reads ../import.X/prof).
jobs_phase1() {
  local rel
  while read -r rel; do
    [[ $rel != *" "* ]] || die "a data path holds a space: $rel"
    echo "import.$(slug "$rel") import $DATA/$rel -o prof"
  done < <(inputs)
}
jobs_phase2() {
  local rel cmd c
  while read -r rel; do
    local s
    s=$(slug "$rel")
    local -a on_profile=("${COMMANDS[@]}")
    in_list "$rel" "${UNIONS[@]}" && on_profile=("${RAW_COMMANDS[@]}")
    for cmd in "${on_profile[@]}"; do
      printf '%s %s\n' "prof.$s.$(job_name "$cmd")" "${cmd/IN/../import.$s/prof}"
    done
    if [[ $ALL_RAW == 1 ]] || ! in_list "$rel" "${HEAVY[@]}"; then
      for cmd in "${RAW_COMMANDS[@]}"; do
        printf '%s %s\n' "raw.$s.$(job_name "$cmd")" "${cmd/IN/$DATA/$rel}"
      done
    fi
  done < <(inputs)
  local pair a b
  for pair in "${PAIRS[@]}"; do
    read -r a b <<<"$pair"
    s="$(slug "$a").vs.$(basename "$b")"
    echo "diff.$s.text diff $DATA/$a $DATA/$b"
    echo "diff.$s.json diff --json $DATA/$a $DATA/$b"
    echo "diff.$s.report report $DATA/$b --baseline $DATA/$a -o report.html"
  done
}

run_line() {
  local -a words
  read -r -a words <<<"$1"
  local name=${words[0]} dir="$OUT/${words[0]}"
  [[ ! -f $dir/rc ]] || return 0 # RESUME: done already
  rm -rf "$dir"
  mkdir -p "$dir"
  local rc=0
  (cd "$dir" && timeout 900 "$BIN" "${words[@]:1}" >stdout 2>stderr) || rc=$?
  # Interrupted (SIGINT/SIGTERM: this script stopped): no exit code, so RESUME=1 runs it again.
  [[ $rc != 130 && $rc != 143 ]] || return 0
  echo "$rc" >"$dir/rc"
  echo "${words[*]:1}" >"$dir/command"
  [[ $rc == 0 ]] || echo "  $name: exit $rc" >&2
}

cmd_run() {
  BIN=$(realpath "$1")
  OUT=$2
  [[ -x $BIN ]] || die "not an executable: $1"
  [[ -d $DATA ]] || die "no data directory: $DATA"
  [[ ! -e $OUT || ${RESUME:-0} == 1 ]] || die "$OUT exists: remove it first (or RESUME=1)"
  mkdir -p "$OUT"
  OUT=$(realpath "$OUT")
  export BIN OUT
  export -f run_line
  local t0=$SECONDS n1 n2
  n1=$(jobs_phase1 | wc -l)
  n2=$(jobs_phase2 | wc -l)
  echo "outputs-identical: $BIN -> $OUT: $n1 imports then $n2 commands on $(inputs | wc -l) inputs, $JOBS in parallel" >&2
  jobs_phase1 | xargs -d '\n' -P "$JOBS" -n 1 bash -c 'run_line "$1"' _
  jobs_phase2 | xargs -d '\n' -P "$JOBS" -n 1 bash -c 'run_line "$1"' _
  "$BIN" --version >"$OUT/version"
  echo "outputs-identical: done in $((SECONDS - t0)) s" >&2
}

# Prints the file as compared: version strings masked everywhere, creation time in metadata.json.
normalised() {
  if [[ $(basename "$1") == metadata.json ]]; then
    perl -0777 -pe 's/"created_utc": "[^"]*"/"created_utc": "<time>"/g;
      s/"created_unix_ns": \d+/"created_unix_ns": 0/g;
      s/\b(strato(?:scope)?) \d+\.\d+\.\d+[-+.0-9A-Za-z]*/$1 <version>/g' "$1"
  else
    perl -0777 -pe 's/\b(strato(?:scope)?) \d+\.\d+\.\d+[-+.0-9A-Za-z]*/$1 <version>/g' "$1"
  fi
}

cmd_compare() {
  local a=$1 b=$2
  [[ -d $a && -d $b ]] || die "compare needs two output directories"
  local n=0 m=0 shown=0 rel
  local -a differ=()
  while read -r rel; do
    [[ $rel == version ]] && continue
    n=$((n + 1))
    if [[ ! -f $a/$rel || ! -f $b/$rel ]]; then
      differ+=("$rel (only in $([[ -f $a/$rel ]] && echo A || echo B))")
      m=$((m + 1))
    elif cmp -s "$a/$rel" "$b/$rel"; then
      : # equal as written (the usual case: normalising is only needed when they differ)
    elif ! cmp -s <(normalised "$a/$rel") <(normalised "$b/$rel"); then
      differ+=("$rel")
      m=$((m + 1))
      if ((shown < 5)) && grep -Iq . "$a/$rel" 2>/dev/null; then
        shown=$((shown + 1))
        echo "--- $rel" >&2
        diff <(normalised "$a/$rel") <(normalised "$b/$rel") | head -20 >&2 || true
      fi
    fi
  done < <( (cd "$a" && find . -type f; cd "$b" && find . -type f) | sed 's|^\./||' | LC_ALL=C sort -u)
  local cmds
  cmds=$(find "$a" -name command | wc -l)
  echo "outputs-identical: A=$a ($(cat "$a/version" 2>/dev/null)) B=$b ($(cat "$b/version" 2>/dev/null))"
  echo "outputs-identical: $n outputs compared ($cmds commands), $m differ"
  if ((m > 0)); then
    printf '  differs: %s\n' "${differ[@]:0:50}"
    ((m <= 50)) || echo "  ... and $((m - 50)) more"
    return 1
  fi
  ((n > 0)) || die "nothing compared"
}

cmd_bins() {
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/outputs-identical.XXXXXX")
  cmd_run "$1" "$tmp/a"
  (cmd_run "$2" "$tmp/b")
  echo "outputs-identical: outputs kept in $tmp" >&2
  cmd_compare "$tmp/a" "$tmp/b"
}

cmd_revs() {
  local tmp target rev i
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/outputs-identical-revs.XXXXXX")
  target=${CARGO_TARGET_DIR:-$repo/target/outputs-identical}
  i=0
  for rev in "$1" "$2"; do
    i=$((i + 1))
    git -C "$repo" worktree add --detach "$tmp/src$i" "$rev" >&2
    (cd "$tmp/src$i" && CARGO_TARGET_DIR=$target cargo build -p strato-cli --bin strato --locked) >&2
    cp "$target/debug/strato" "$tmp/strato$i"
    git -C "$repo" worktree remove --force "$tmp/src$i"
  done
  cmd_bins "$tmp/strato1" "$tmp/strato2"
}

case "${1:-}" in
  run) [[ $# == 3 ]] || die "usage: run BIN OUT"; cmd_run "$2" "$3" ;;
  compare) [[ $# == 3 ]] || die "usage: compare OUT_A OUT_B"; cmd_compare "$2" "$3" ;;
  bins) [[ $# == 3 ]] || die "usage: bins BIN_A BIN_B"; cmd_bins "$2" "$3" ;;
  revs) [[ $# == 3 ]] || die "usage: revs REV_A REV_B"; cmd_revs "$2" "$3" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
