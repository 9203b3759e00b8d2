#!/usr/bin/env bash
# The shipped cross-rank SQL on Apache Spark (local mode) over a partitioned store of every
# rank of a job (default: the 8 ranks of param_dlrm8), compared number by number with
# `strato` (python -m stratoscope.spark_check); prints the store import and Spark times.
# CI runs a 3-rank case (python/tests/test_sql_spark.py). Needs pyspark and Java
# (scripts/setup.sh) and a built strato (pip install . or cargo build -p strato-cli).
#   scripts/spark-check.sh [RANK_DIR] [SPARK_MASTER]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-../shared/data/kineto/param_dlrm8}
master=${2:-local[2]}
python=${PYTHON:-python3}
store=$(mktemp -d)/store
trap 'rm -rf "$(dirname "$store")"' EXIT
start=$(date +%s.%N)
$python -m stratoscope import --partitioned --job check "$ranks" -o "$store"
echo "import: $(echo "$(date +%s.%N) - $start" | bc) s"
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} $python -m stratoscope.spark_check "$store" --master "$master"
