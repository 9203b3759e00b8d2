#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this) and as a developer runs it:
#   bash scripts/test.sh
# Installs what the tests need (scripts/setup.sh), checks formatting and lints, runs every Rust
# test, then installs the Python package from this checkout and runs its tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --workspace --locked

echo "== job-scale benchmark, bounded (the full run: benches/job_scale.py, docs/benchmarks.md)"
python3 benches/job_scale.py --ci

if [[ -f pyproject.toml ]]; then
  echo "== pip install . (the stratoscope Python package and the strato command)"
  python3 -m pip install --quiet --disable-pip-version-check .
  echo "== cargo build: the OpenCL layer and demo the Python recording tests run"
  cargo build -p strato-opencl-layer -p strato-opencl-examples --locked
  echo "== pytest"
  # -rs lists every skipped test with its reason.
  python3 -m pytest -q -rs python/tests
fi
