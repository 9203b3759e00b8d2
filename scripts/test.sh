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

# Clippy runs inside the test build: clippy-driver as the workspace's compiler wrapper, with
# `-D warnings`, exactly as `cargo clippy` sets it up (RUSTC_WORKSPACE_WRAPPER, CLIPPY_ARGS) but
# compiling instead of only checking. A separate `cargo clippy` type-checked every dependency a
# second time (DataFusion above all): 687 s of CPU cold, measured 2026-11-30. Exported for every
# later cargo call of this script (`cargo test`, the package's build, maturin's), so they reuse
# these artifacts: the wrapper is part of the workspace crates' fingerprints. Dependencies build
# with plain rustc. docs/benchmarks.md, "CI time".
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" || {
  echo "scripts/test.sh: clippy-driver not found (rustup component add clippy)" >&2
  exit 2
}
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

step "cargo build of every target with clippy (warnings are errors; the test build)"
cargo build --profile test --workspace --all-targets --locked

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
