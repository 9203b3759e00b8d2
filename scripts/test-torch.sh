#!/usr/bin/env bash
# Tests the torch.profiler (Kineto) merge where torch is installed, without putting torch into
# the Python that CI and the other tests use (it is several GB: PyPI's Linux torch wheel pulls
# the nvidia-* CUDA packages, and PyPI has no CPU-only Linux wheel). Not part of CI.
#   bash scripts/test-torch.sh            # venv at /opt/torch-venv (TORCH_VENV=... to move it)
#   bash scripts/test-torch.sh --no-bench # tests only
# Creates the venv if missing, installs torch, numpy, pytest, maturin, pyarrow and this
# checkout's stratoscope package into it, then runs python/tests/test_torch.py (which must not
# skip there) and python/benchmarks/bench_annotations.py (record_function rows included).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${TORCH_VENV:-/opt/torch-venv}
python=${PYTHON:-python3}
bench=1
for arg in "$@"; do
  case $arg in
    --no-bench) bench=0 ;;
    *) echo "usage: $0 [--no-bench]" >&2; exit 2 ;;
  esac
done

if [[ ! -x $venv/bin/python ]]; then
  echo "== creating $venv"
  "$python" -m venv "$venv"
fi
py=$venv/bin/python
pip=("$py" -m pip install --quiet --disable-pip-version-check)

echo "== installing torch, numpy, pytest, maturin, pyarrow into $venv"
"${pip[@]}" torch numpy pytest maturin pyarrow
"$py" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available())'

echo "== pip install . (stratoscope, built from this checkout)"
"${pip[@]}" .

echo "== pytest python/tests/test_torch.py"
# -s shows the clock estimate each merge test prints; -rs lists skips (there must be none).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$py" -m pytest -q -s -rs python/tests/test_torch.py 2>&1 | tee "$log"
if grep -Eq '[0-9]+ skipped' "$log"; then
  echo "test-torch: tests were skipped although torch is installed" >&2
  exit 1
fi

if ((bench)); then
  echo "== python/benchmarks/bench_annotations.py"
  "$py" python/benchmarks/bench_annotations.py
fi
