#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this) and as a developer runs it:
#   bash scripts/test.sh
# Installs what the tests need (scripts/setup.sh), checks formatting and lints, runs every Rust
# test, then installs the Python package from this checkout and runs its tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it starts (seconds since this script began): CI's time budget is read off these.
step() { echo "== $* [at ${SECONDS} s]"; }

bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all --check

step "no import circles between modules (scripts/module-cycles.py)"
python3 scripts/module-cycles.py

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

step "job-scale benchmark, bounded (the full run: benches/job_scale.py, docs/benchmarks.md)"
python3 benches/job_scale.py --ci

step "strato view's latency, bounded: the 8-rank DLRM job, 60 windows (the full run: benches/view_latency.py, docs/view.md)"
python3 benches/view_latency.py --ci --strato target/debug/strato

if [[ -f pyproject.toml ]]; then
  # The package from the test build above (STRATOSCOPE_WHEEL_PROFILE=test,
  # scripts/wheel_backend.py): the same wheel layout, staging and checks as the release wheel,
  # its programs and extensions from `cargo test`'s build, stripped; about a minute instead of
  # a second, release build of every dependency (~17 min in CI). The release wheel, as users
  # get it, is built and checked by scripts/check-wheel.sh (docs/benchmarks.md, "CI time").
  step "pip install . from the test build (the stratoscope Python package and the strato command)"
  STRATOSCOPE_WHEEL_PROFILE=test python3 -m pip install --quiet --disable-pip-version-check .
  step "cargo build: the OpenCL layer and demo the Python recording tests run"
  cargo build -p strato-opencl-layer -p strato-opencl-examples --locked
  step "whatif against reality, bounded: A/B pairs on PoCL (the full run: benches/whatif_pairs.py, docs/analyses/whatif.md)"
  python3 benches/whatif_pairs.py --ci --strato target/debug/strato
  step "pytest"
  # -rs lists every skipped test with its reason.
  python3 -m pytest -q -rs python/tests
fi
step "done"
