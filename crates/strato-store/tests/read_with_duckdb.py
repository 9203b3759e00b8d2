#!/usr/bin/env python3
"""Reads a stratoscope profile directory with DuckDB and pyarrow, as a user would.

Usage: read_with_duckdb.py PROFILE_DIR EXPECTED_JSON

EXPECTED_JSON is {"levels": {"DeviceKernel": 12, ...}, "args_refs": N}: span counts per level
and the number of spans with attributes. Checks that every table's row count matches
metadata.json, that a GROUP BY over spans by level gives the expected counts, that spans join
to args and tracks, and that text columns are dictionary-encoded for pyarrow. Exits non-zero
with a message on the first mismatch. Needs: pip install duckdb pyarrow
"""

import json
import os
import sys

import duckdb
import pyarrow.parquet as pq


def fail(message):
    print(f"read_with_duckdb: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    profile, expected = sys.argv[1], json.loads(sys.argv[2])
    with open(os.path.join(profile, "metadata.json"), encoding="utf-8") as f:
        meta = json.load(f)
    if meta.get("format") != "stratoscope-profile" or meta.get("schema_version") != 1:
        fail(f"unexpected metadata: {meta.get('format')} v{meta.get('schema_version')}")

    con = duckdb.connect()
    for name, info in meta["tables"].items():
        path = os.path.join(profile, info["file"])
        quoted = path.replace("'", "''")
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{quoted}')")
        (rows,) = con.execute(f"SELECT count(*) FROM {name}").fetchone()
        if rows != info["rows"]:
            fail(f"{name}: duckdb counts {rows} rows, metadata.json says {info['rows']}")

    levels = dict(
        con.execute(
            "SELECT level, count(*) FROM spans GROUP BY level ORDER BY level"
        ).fetchall()
    )
    if levels != expected["levels"]:
        fail(f"spans by level: {levels} != {expected['levels']}")

    # Time per level, the query an analysis would run (sum over BIGINT is HUGEINT in DuckDB,
    # so even the extreme test durations do not overflow).
    per_level = con.execute(
        "SELECT level, sum(dur_ns), max(dur_ns) FROM spans GROUP BY ALL"
    ).fetchall()
    if len(per_level) != len(levels):
        fail(f"time per level has {len(per_level)} groups, expected {len(levels)}")

    (joined,) = con.execute(
        "SELECT count(*) FROM spans s JOIN args a ON s.args_id = a.id"
    ).fetchone()
    if joined != expected["args_refs"]:
        fail(f"spans joined to args: {joined} != {expected['args_refs']}")

    (orphans,) = con.execute(
        "SELECT count(*) FROM spans s LEFT JOIN tracks t ON s.track = t.id WHERE t.id IS NULL"
    ).fetchone()
    if orphans:
        fail(f"{orphans} spans on no track")

    (empty,) = con.execute("SELECT text FROM strings WHERE id = 0").fetchone()
    if empty != "":
        fail(f"string 0 is {empty!r}, expected ''")

    spans = pq.read_table(os.path.join(profile, "spans.parquet"))
    for column in ("name", "category", "level"):
        kind = str(spans.schema.field(column).type)
        if not kind.startswith("dictionary"):
            fail(f"spans.{column} has pyarrow type {kind}, expected a dictionary")
    if spans.num_rows != meta["tables"]["spans"]["rows"]:
        fail("pyarrow row count differs")

    print(f"read_with_duckdb: ok ({sum(levels.values())} spans, {len(levels)} levels)")


if __name__ == "__main__":
    main()
