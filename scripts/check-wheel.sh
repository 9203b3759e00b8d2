#!/usr/bin/env bash
# The wheel as a user gets it (issue 14, item 5). Builds it (`pip wheel .`: the same build as
# `pip install .`), prints its size, the recorder extension's size and its contents, installs it
# into a fresh virtual environment WITHOUT system site packages (plus pyopencl and numpy from
# the package index), and records a pyopencl program there with `strato record --opencl`: the
# breakdown must show device time. Not part of CI (a second release build); CI's pytest run
# checks the installed package (python/tests/test_installed_package.py).
#   bash scripts/check-wheel.sh [WORK_DIR]     (default out/wheel-check)
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-out/wheel-check}"
rm -rf "$work"
mkdir -p "$work/dist"
work="$(cd "$work" && pwd)"

echo "== pip wheel ."
start=$(date +%s)
python3 -m pip wheel --quiet --no-deps --disable-pip-version-check -w "$work/dist" .
echo "built in $(($(date +%s) - start)) s"
wheel=$(ls "$work"/dist/stratoscope-*.whl)

echo "== $(basename "$wheel"): $(stat -c %s "$wheel") bytes"
unzip -l "$wheel"
python3 - "$wheel" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for info in wheel.infolist():
        if info.filename.endswith(".so") or "/_bin/" in info.filename:
            print(f"{info.filename}: {info.file_size / 2**20:.2f} MiB "
                  f"({info.compress_size / 2**20:.2f} MiB compressed)")
EOF

echo "== fresh venv (no system site packages)"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel" pyopencl numpy
cp examples/opencl/usecases.py "$work/usecases.py"
cd "$work"   # away from the checkout: nothing but the venv's package
env -u STRATOSCOPE_OPENCL_LAYER -u STRATO_BIN -u CARGO_TARGET_DIR \
  PATH="$work/venv/bin:/usr/local/bin:/usr/bin:/bin" \
  strato record --opencl -o "$work/prof" -- python usecases.py
