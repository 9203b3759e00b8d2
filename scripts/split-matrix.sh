#!/usr/bin/env bash
# The full splitter matrix of issue 11 (deliverable 1), too slow for CI in debug: every
# Chrome-trace file in ../shared/data, whole, in 5 layouts (compact, indent 1/4, LF/CRLF) x
# shifts 0..STRATO_SPLIT_SHIFTS (default 3) x read sizes 1, 2, 3, 7, 64, 4093, 1 MiB, each
# compared with the compact file's import. CI runs a bounded version of the same checks
# (crates/strato-io/tests/split_real.rs). Usage: scripts/split-matrix.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --locked -p strato-io --test split_real \
    every_variant_of_every_file_whole -- --ignored --nocapture
