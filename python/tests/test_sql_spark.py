"""`strato sql` from Python (`stratoscope.sql` returns a pyarrow Table), and the shipped
cross-rank SQL run on Apache Spark (local mode) over a partitioned store of real ranks,
agreeing with `strato`. The larger case (all 8 ranks) is scripts/spark-check.sh."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, strato

import stratoscope

DLRM = REPO.parent / "shared" / "data" / "kineto" / "param_dlrm8"


def _ranks(n: int) -> list[str]:
    return [str(p) for p in sorted(DLRM.glob("worker*.json.gz"))[:n]]


def test_sql_returns_a_pyarrow_table():
    pa = pytest.importorskip("pyarrow")
    files = _ranks(2)
    table = stratoscope.sql(
        "SELECT rank, COUNT(*) AS n, SUM(end_ns - start_ns) AS ns FROM kernels "
        "GROUP BY rank ORDER BY rank", *files)
    assert isinstance(table, pa.Table)
    assert table.column_names == ["rank", "n", "ns"]
    assert table.schema.field("ns").type == pa.int64()
    kernels = json.loads(strato("kernels", "--json", "--top", "0", *files).stdout)
    assert table.to_pylist() == [
        {"rank": r["rank"], "n": r["device_ops"], "ns": r["device_time_ns"]}
        for r in kernels["ranks"]]
    busy = stratoscope.sql(None, *files, analysis="gpu_busy")
    assert busy.num_rows == 2
    # Dictionary-encoded text columns stay dictionaries (pandas: category).
    names = stratoscope.sql("SELECT name FROM spans LIMIT 3", files[0])
    assert pa.types.is_dictionary(names.schema.field("name").type)


def test_sql_errors_are_named():
    with pytest.raises(stratoscope.SqlError, match="query"):
        stratoscope.sql("SELEC 1", *_ranks(1))
    with pytest.raises(stratoscope.SqlError, match="no such file"):
        stratoscope.sql("SELECT 1", "/no/such/trace.json")


def test_shipped_sql_on_spark_equals_strato(tmp_path: Path):
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime (scripts/setup.sh installs openjdk-17-jre-headless)")
    from stratoscope import spark_check

    store = tmp_path / "store"
    strato("import", "--partitioned", "--job", "dlrm", *_ranks(3), "-o", str(store))
    spark = spark_check.spark_session("local[2]")
    try:
        spark_check.register_store(spark, str(store))
        report = spark_check.compare(spark, str(store))
    finally:
        spark.stop()
    assert report["kernel_time_per_rank"]["rows"] == 3
    assert report["gpu_busy"]["rows"] == 3
    assert report["kernel_stats"]["rows"] > 3
