"""Runs the shipped cross-rank SQL analyses on Apache Spark over a partitioned profile store
and compares every number with ``strato sql`` on the same store (and ``strato kernels`` /
``strato gpu-time``). Used by ``python/tests/test_sql_spark.py`` (a small case) and
``scripts/spark-check.sh`` (every rank of a job); ``docs/sql.md`` says how to run the same
SQL on a real cluster.

    python -m stratoscope.spark_check STORE [--master local[2]]

Needs ``pyspark`` and a Java runtime (scripts/setup.sh installs both).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from decimal import Decimal
from typing import Any

from .cli import strato_binary

#: The shipped analyses compared (every one of ``strato sql --list``).
ANALYSES = ("kernel_time_per_rank", "kernel_stats", "gpu_busy")


def _strato(*args: str) -> str:
    proc = subprocess.run([strato_binary(), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"strato {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def spark_session(master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("stratoscope-sql-check")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "1g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def register_store(spark: Any, store: str) -> None:
    """Defines ``spans`` (the store's spans.parquet files, with the partition columns job,
    host, rank) and the shipped store views under their names without ``store_``."""
    spans = (spark.read.option("basePath", store)
             .parquet(f"{store}/job=*/host=*/rank=*/spans.parquet"))
    spans.createOrReplaceTempView("spans")
    for name in ("kernels", "device_events"):
        text = _strato("sql", "--show", f"store_{name}")
        spark.sql(text).createOrReplaceTempView(name)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def compare(spark: Any, store: str) -> dict[str, dict]:
    """Runs every analysis on Spark and with ``strato sql``; returns per analysis the row
    count and Spark's time. Raises AssertionError at the first difference."""
    report = {}
    for name in ANALYSES:
        text = _strato("sql", "--show", name)
        start = time.perf_counter()
        spark_rows = [{k: _plain(v) for k, v in row.asDict().items()}
                      for row in spark.sql(text).collect()]
        spark_s = time.perf_counter() - start
        strato_rows = json.loads(_strato("sql", "--analysis", name, store, "--format", "json"))
        assert len(spark_rows) == len(strato_rows), (name, len(spark_rows), len(strato_rows))
        assert spark_rows, f"{name}: no rows"
        for a, b in zip(spark_rows, strato_rows):
            assert a.keys() == b.keys(), (name, a.keys(), b.keys())
            for key in a:
                if isinstance(a[key], float) or isinstance(b[key], float):
                    assert abs(a[key] - b[key]) <= 1e-12 * max(1.0, abs(b[key])), (name, key, a, b)
                else:
                    assert a[key] == b[key], (name, key, a, b)
        report[name] = {"rows": len(spark_rows), "spark_s": round(spark_s, 3)}
    # And against the commands themselves.
    kernels = json.loads(_strato("kernels", "--json", "--top", "0", store))
    per_rank = {r["rank"]: (r["device_ops"], r["device_time_ns"]) for r in kernels["ranks"]}
    for row in spark.sql(_strato("sql", "--show", "kernel_time_per_rank")).collect():
        assert per_rank[row["rank"]] == (row["device_ops"], row["device_time_ns"]), row
    gpu = json.loads(_strato("gpu-time", "--json", store))
    idle = {r["rank"]: r["idle_us"] for r in gpu["ranks"]}
    for row in spark.sql(_strato("sql", "--show", "gpu_busy")).collect():
        assert abs(row["idle_ns"] / 1000 - idle[row["rank"]]) < 1e-6, row
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    start = time.perf_counter()
    spark = spark_session(args.master)
    started = time.perf_counter() - start
    register_store(spark, args.store)
    report = compare(spark, args.store)
    spark.stop()
    print(json.dumps({"spark_start_s": round(started, 1), "analyses": report,
                      "total_s": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    sys.exit(main())
