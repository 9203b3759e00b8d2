#!/usr/bin/env bash
# The shipped cross-rank SQL on Apache Spark (local mode) over a partitioned store of every
# rank of a job (default: the 8 ranks of param_dlrm8), compared number by number with
# `strato` (python -m stratoscope.spark_check); prints the store import and Spark times.
# CI runs a 3-rank case (python/tests/test_sql_spark.py). Needs pyspark and Java
# (scripts/setup.sh) and the installed package (pip install .).
#   scripts/spark-check.sh [RANK_DIR] [SPARK_MASTER]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-../shared/data/kineto/param_dlrm8}
master=${2:-local[2]}
python=${PYTHON:-python3}
if ! $python -c "import stratoscope._native" 2>/dev/null; then
  echo "spark-check: the stratoscope package is not installed for $python (pip install . first)" >&2
  exit 2
fi
store=$(mktemp -d)/store
trap 'rm -rf "$(dirname "$store")"' EXIT
start=$(date +%s.%N)
$python -m stratoscope import --partitioned --job check "$ranks" -o "$store"
echo "import: $(echo "$(date +%s.%N) - $start" | bc) s"
# The installed package (its compiled `_native` included), never the checkout's python/ put
# first on PYTHONPATH: that copy has no compiled extension.
$python -m stratoscope.spark_check "$store" --master "$master"
