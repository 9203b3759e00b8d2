"""The registry of analyses (strato_engine::registry) through every front end, generically:
for every registered analysis (`stratoscope.analyses()`) and every input in ../shared/data,
each of its tables from Python (`Profile.analysis(NAME, table=T)`) holds the rows of
`strato NAME INPUT --json` at the table's path, value for value (the rows derived here from
the JSON by the documented flattening rule, independently of the Rust side); an input the
command refuses is refused by Python too. Also: `strato NAME --csv --table T` has the table's
columns and rows, `strato sql` sees the table as a view, and `profile.NAME()` is the method
form. A new registered analysis is covered by adding it, with no change here."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pytest

import stratoscope
from conftest import REPO, strato
from test_analysis_api import columns_of, expected_rows, same

DATA = REPO.parent / "shared" / "data"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared data not present")


def inputs() -> list[Path]:
    """Every trace in ../shared/data (files and the rank directories, each as one job)."""
    if not DATA.is_dir():
        return []
    out: list[Path] = []
    for path in sorted(DATA.rglob("*")):
        if path.name.endswith(".md") or path.parent.name in {"param_dlrm8", "hta_trace_filter"}:
            continue
        if path.is_file():
            out.append(path)
    out += [DATA / "kineto" / "param_dlrm8", DATA / "kineto" / "hta_trace_filter"]
    return out


ANALYSES = stratoscope.analyses()


def test_the_registry_lists_what_the_command_offers() -> None:
    for a in ANALYSES:
        help_text = strato(a["name"], "--help").stdout
        assert a["summary"].split(":")[0][:40] in " ".join(help_text.split())
        for option in a["options"]:
            assert "--" + option[0].replace("_", "-") in help_text
        for table in a["tables"]:
            assert table["name"] in help_text
        assert (REPO / a["doc"]).is_file(), f"{a['name']}: no doc page {a['doc']}"


@pytest.fixture(scope="module")
def opened() -> dict:
    """Each input opened once (or the error it raised)."""
    out: dict = {}
    for path in inputs():
        try:
            out[path] = stratoscope.open(str(path))
        except stratoscope.StratoscopeError as e:
            out[path] = e
    return out


def table_flags(table: dict) -> list[str]:
    """The command-line flags of the options a table is computed with (`critical_path_steps`:
    `--step all`; `diff_ops`: `--by-op`)."""
    flags: list[str] = []
    for name, value in table["options"]:
        flag = "--" + name.replace("_", "-")
        if value in ("true", "false"):
            # A flag: given for true, left out for false (its default).
            flags += [flag] if value == "true" else []
        else:
            flags += [flag, value]
    return flags


@pytest.mark.parametrize("analysis", [a["name"] for a in ANALYSES])
def test_python_tables_equal_the_commands_json_on_every_input(analysis: str, opened: dict) -> None:
    spec = next(a for a in ANALYSES if a["name"] == analysis)
    rows_seen = 0
    for path, profile in opened.items():
        runs: dict = {}
        for table in spec["tables"]:
            flags = tuple(table_flags(table))
            if flags not in runs:
                runs[flags] = strato(analysis, str(path), *flags, "--json", check=False)
            proc = runs[flags]
            if isinstance(profile, Exception):
                assert proc.returncode == 2, f"{path}: Python refused it ({profile}), the command did not"
                continue
            if proc.returncode != 0:
                # The analysis cannot run on this input with these options (a step window
                # without steps): one line, and Python refuses it too.
                assert proc.returncode == 2 and proc.stderr.count("\n") == 1, f"{path}: {proc.stderr}"
                with pytest.raises(stratoscope.AnalysisError):
                    profile.analysis(analysis, table=table["name"])
                continue
            doc = json.loads(proc.stdout)
            expected = expected_rows(doc, table["path"], table["inherit"])
            got = pa.table(profile.analysis(analysis, table=table["name"])).to_pylist()
            assert len(got) == len(expected), f"{path} {table['name']}: {len(got)} != {len(expected)}"
            columns = columns_of(expected)
            for i, (g, e) in enumerate(zip(got, expected)):
                assert set(g) == columns, f"{path} {table['name']} row {i}: {sorted(set(g) ^ columns)}"
                for k in columns:
                    assert same(g[k], e.get(k)), f"{path} {table['name']} row {i} {k}: {g[k]!r} != {e.get(k)!r}"
            rows_seen += len(got)
    assert rows_seen > 0, f"{analysis}: no rows on any input: the comparison proved nothing"


# Inputs tried in turn for a table with rows: a multi-rank job, then single files that hold
# what it lacks (nn.Module spans, memory events, language transitions).
WITH_ROWS = [
    DATA / "kineto" / "param_dlrm8",
    DATA / "kineto" / "tracelens" / "h100_Falconsai_nsfw_image_detection.json.gz",
    DATA / "kineto" / "hta_alexnet_trace.json.gz",
    DATA / "kineto" / "hta_trace_compare" / "test.json.gz",
]


@pytest.mark.parametrize("analysis", [a["name"] for a in ANALYSES])
def test_csv_sql_and_the_method_form_show_the_same_table(analysis: str) -> None:
    spec = next(a for a in ANALYSES if a["name"] == analysis)
    profiles = {path: stratoscope.open(str(path)) for path in WITH_ROWS}
    for table in spec["tables"]:
        # The first input where the table has rows (an empty table would prove nothing).
        found = []
        for path, p in profiles.items():
            try:
                t = pa.table(p.analysis(analysis, table=table["name"]))
            except stratoscope.AnalysisError:
                continue  # the table cannot be computed here (a step window without steps)
            if t.num_rows > 0:
                found.append((path, t))
        if not found:
            pytest.fail(f"{analysis} {table['name']}: no rows on any of {WITH_ROWS}")
        job, want = found[0]
        text = strato(analysis, str(job), "--csv", "--table", table["name"]).stdout
        rows = list(csv.reader(io.StringIO(text)))
        assert rows[0] == want.column_names
        assert len(rows) - 1 == want.num_rows
        counted = strato("sql", f"SELECT count(*) AS n FROM {table['name']}", str(job),
                         "--format", "json").stdout
        assert json.loads(counted)[0]["n"] == want.num_rows
        # The table's name reaches the method form too (`profile.kernel_ops()`).
        by_table = getattr(profiles[job], table["name"])
        assert pa.table(by_table()).equals(want)
    profile = profiles[WITH_ROWS[0]]
    method = getattr(profile, spec["method"])
    assert pa.table(method()).equals(pa.table(profile.analysis(analysis)))


def test_unknown_analyses_options_and_tables_are_one_clear_error() -> None:
    profile = stratoscope.open(str(DATA / "kineto" / "hta_alexnet_trace.json.gz"))
    with pytest.raises(stratoscope.InvalidOption, match="no analysis"):
        profile.analysis("no-such-analysis")
    with pytest.raises(stratoscope.InvalidOption, match="no option"):
        profile.analysis("queue-length", limmit=3)
    with pytest.raises(stratoscope.InvalidOption, match="at least 1"):
        profile.analysis("queue-length", limit=0)
    with pytest.raises(stratoscope.InvalidOption, match="no table"):
        profile.analysis("queue-length", table="nope")
    with pytest.raises(AttributeError):
        profile.no_such_method()
    proc = strato("queue-length", str(DATA / "kineto" / "hta_alexnet_trace.json.gz"),
                  "--limit", "0", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


COMPARISONS = stratoscope.comparisons()

# Pairs of profiles compared, A then B: one run against another (a fix), the same model on
# two devices (by-op tables have rows), two unrelated traces (everything added or removed),
# and a job of ranks against one file.
PAIRS = [
    (DATA / "kineto" / "hta_trace_compare" / "base.json.gz",
     DATA / "kineto" / "hta_trace_compare" / "test.json.gz"),
    (DATA / "kineto" / "tracelens" / "h100_Falconsai_nsfw_image_detection.json.gz",
     DATA / "kineto" / "tracelens" / "mi300_Falconsai_nsfw_image_detection.json.gz"),
    (DATA / "kineto" / "hta_alexnet_trace.json.gz", DATA / "kineto" / "hta_triton_example.json.gz"),
    (DATA / "kineto" / "param_dlrm8", DATA / "kineto" / "hta_alexnet_trace.json.gz"),
]


@pytest.mark.parametrize("comparison", [c["name"] for c in COMPARISONS])
def test_comparison_tables_equal_the_commands_json_and_csv(comparison: str) -> None:
    spec = next(c for c in COMPARISONS if c["name"] == comparison)
    assert spec["tables"], f"{comparison}: no table"
    help_text = strato(comparison, "--help").stdout
    for option in spec["options"]:
        assert "--" + option[0].replace("_", "-") in help_text
    assert (REPO / spec["doc"]).is_file()
    profiles = {path: stratoscope.open(str(path)) for pair in PAIRS for path in pair}
    for table in spec["tables"]:
        rows_seen = 0
        flags = table_flags(table)
        for a, b in PAIRS:
            doc = json.loads(strato(comparison, str(a), str(b), *flags, "--json").stdout)
            expected = expected_rows(doc, table["path"], table["inherit"])
            got_table = pa.table(profiles[a].compare(comparison, profiles[b], table=table["name"]))
            got = got_table.to_pylist()
            assert len(got) == len(expected), f"{a} {b} {table['name']}: {len(got)} != {len(expected)}"
            columns = columns_of(expected)
            for i, (g, e) in enumerate(zip(got, expected)):
                assert set(g) == columns, f"{table['name']} row {i}: {sorted(set(g) ^ columns)}"
                for k in columns:
                    assert same(g[k], e.get(k)), f"{a} {b} {table['name']} row {i} {k}"
            text = strato(comparison, str(a), str(b), "--csv", "--table", table["name"]).stdout
            rows = list(csv.reader(io.StringIO(text)))
            if got_table.num_rows:
                assert rows[0] == got_table.column_names
                assert len(rows) - 1 == got_table.num_rows
            rows_seen += len(got)
        assert rows_seen > 0, f"{comparison} {table['name']}: no rows on any pair"


def test_a_comparisons_main_table_follows_its_options() -> None:
    a, b = PAIRS[1]
    pa_, pb = stratoscope.open(str(a)), stratoscope.open(str(b))
    # `--by-op` computes the op tables: the main table is then `diff_ops`, not an empty `diff`.
    by_op = pa.table(pa_.compare("diff", pb, by_op=True))
    assert by_op.num_rows > 0 and by_op.equals(pa.table(pa_.compare("diff", pb, table="diff_ops")))
    text = strato("diff", str(a), str(b), "--by-op", "--csv").stdout
    assert list(csv.reader(io.StringIO(text)))[0] == by_op.column_names
    assert pa.table(pa_.compare("diff", pb)).equals(pa.table(pa_.diff(pb)))
    with pytest.raises(stratoscope.InvalidOption, match="no comparison"):
        pa_.compare("no-such-comparison", pb)
    with pytest.raises(stratoscope.InvalidOption, match="no option"):
        pa_.compare("diff", pb, by_opp=True)
    with pytest.raises(stratoscope.InvalidOption, match="no table"):
        pa_.compare("diff", pb, table="nope")
