"""The Python analysis API (stratoscope.open -> Profile; docs/python-api.md) against the CLI:
every method's table must hold the rows of its `strato <command> --json` list, value for
value, on real traces (a single-rank Kineto trace and the 8-rank param_dlrm8 job). The rows
are derived from the CLI's JSON here by the documented flattening rule (nested objects as
`outer.inner`, lists left out, the named fields of enclosing objects carried), written again
independently of the Rust side."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest

import stratoscope
from conftest import REPO, strato

DATA = REPO.parent / "shared" / "data" / "kineto"
SINGLE = DATA / "kineto2021_resnet50_worker0.pt.trace.json.gz"
MULTI = DATA / "param_dlrm8"

pytestmark = pytest.mark.skipif(not MULTI.is_dir(), reason="shared data not present")


def cli(*args: str) -> dict:
    return json.loads(strato(*args, "--json").stdout)


LIST, OBJECT = object(), object()


def flatten(prefix: str, value, row: dict) -> None:
    if isinstance(value, dict):
        if prefix:
            row[prefix] = OBJECT
        for k, v in value.items():
            flatten(f"{prefix}.{k}" if prefix else k, v, row)
    elif isinstance(value, list):
        row[prefix] = LIST
    else:
        row[prefix] = value


def expected_rows(doc, path: list[str], inherit: list[str]) -> list[dict]:
    out: list[dict] = []

    def walk(node, rest, carried):
        carried = dict(carried)
        for key in inherit:
            if isinstance(node, dict) and key in node and not isinstance(node[key], (dict, list)):
                carried[key] = node[key]
        if not rest:
            own: dict = {}
            flatten("", node, own)
            out.append({**{k: v for k, v in carried.items() if k not in own}, **own})
            return
        items = (node.get(rest[0]) or []) if isinstance(node, dict) else []
        if isinstance(items, dict):
            # A segment naming an object steps into it.
            walk(items, rest[1:], carried)
            return
        if len(rest) > 1 and rest[1].startswith("[]"):
            # A list of lists: each inner list's items are rows, numbered by inner list.
            for number, inner in enumerate(items):
                for item in inner if isinstance(inner, list) else []:
                    walk(item, rest[2:], {**carried, rest[1][2:]: number})
            return
        for item in items:
            walk(item, rest[1:], carried)

    walk(doc, path, {})
    # Across rows: a field that is a list in any row is no column; a null where another row
    # has an object is only that object's fields (null here).
    lists = {k for row in out for k, v in row.items() if v is LIST}
    objects = {k for row in out for k, v in row.items() if v is OBJECT}

    def in_list(key: str) -> bool:
        return any(key == l or key.startswith(l + ".") for l in lists)

    return [{k: v for k, v in row.items()
             if v is not LIST and v is not OBJECT and not in_list(k)
             and not (v is None and k in objects)}
            for row in out]


def columns_of(rows: list[dict]) -> set:
    """The table's columns: every row's fields (a row without one has a null there)."""
    return {k for row in rows for k in row}


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) or (math.isnan(a) and math.isnan(b))
    return a == b


def assert_table_is(table, rows: list[dict]) -> None:
    got = pa.table(table).to_pylist()
    assert len(got) == len(rows), f"{table.name}: {len(got)} rows, the CLI has {len(rows)}"
    assert len(rows) > 0, f"{table.name}: the CLI has no rows here; pick an input that has"
    columns = columns_of(rows)
    for i, (g, e) in enumerate(zip(got, rows)):
        # The columns are every row's fields; a field the CLI's row lacks is null there.
        assert set(g) == columns, f"{table.name} row {i}: columns {sorted(set(g) ^ columns)} differ"
        for k in columns:
            assert same(g[k], e.get(k)), f"{table.name} row {i} {k}: {g[k]!r} != CLI {e.get(k)!r}"


@pytest.fixture(scope="module")
def multi():
    return stratoscope.open(MULTI)


@pytest.fixture(scope="module")
def single():
    return stratoscope.open(SINGLE)


# (method, kwargs, CLI arguments, path of the rows in the JSON, carried fields)
CASES = [
    ("gpu_time", {}, ["gpu-time"], ["ranks"], ["window"]),
    ("gpu_time", {"window": "hta"}, ["gpu-time", "--window", "hta"], ["ranks"], ["window"]),
    ("gpu_time_streams", {}, ["gpu-time"], ["ranks", "streams"], ["rank"]),
    ("breakdown", {}, ["breakdown"], ["processes", "rows"], ["rank", "pid"]),
    ("breakdown_processes", {}, ["breakdown"], ["processes"], []),
    ("operations", {}, ["breakdown"], ["processes", "operations"], ["rank", "pid"]),
    ("transitions", {}, ["breakdown"], ["processes", "transitions"], ["rank", "pid"]),
    ("hierarchy", {}, ["hierarchy"], ["ranks"], []),
    ("kernels", {}, ["kernels"], ["ranks", "kernels"], ["rank"]),
    ("kernels", {"top": 0}, ["kernels", "--top", "0"], ["ranks", "kernels"], ["rank"]),
    ("kernel_ops", {}, ["kernels"], ["ranks", "ops"], ["rank"]),
    ("kernel_latencies", {}, ["kernels"], ["ranks"], []),
    ("layers", {}, ["layers"], ["layers"], []),
    ("layer_kernels", {}, ["layers"], ["kernels"], []),
    ("iterations", {}, ["iterations"], ["sequences", "iterations"],
     ["rank_index", "rank", "pid", "device", "stream", "loop"]),
    ("iteration_loops", {}, ["iterations"], ["sequences"], []),
    ("memory_copies", {}, ["memory"], ["copies"], []),
    ("critical_path", {}, ["critical-path"], ["ranks"], []),
    ("critical_path_events", {}, ["critical-path"], ["ranks", "events"], []),
    ("critical_path_steps", {"step": "all"}, ["critical-path", "--step", "all"],
     ["steps", "ranks"], ["step", "number"]),
    ("findings", {}, ["advise"], ["findings"], []),
    ("findings_evidence", {"all": True}, ["advise", "--all"], ["findings", "evidence"], ["rule"]),
    ("advise_rules", {"disable": ["low-util"]}, ["advise", "--disable", "low-util"], ["rules"], []),
    ("info_sources", {}, ["info"], ["sources"], []),
    ("info_processes", {}, ["info"], ["processes"], []),
]

MULTI_ONLY = [
    ("gpu_time_exposure", {}, ["gpu-time"], ["ranks", "exposure"], ["rank"]),
    ("collectives", {}, ["collectives"], ["collectives"], []),
    ("collectives_ranks", {}, ["collectives"], ["ranks"], []),
    ("stragglers", {}, ["collectives"], ["stragglers"], []),
    ("whatif", {"even_straggler": True}, ["whatif", "--even-straggler"], ["whatif", "steps"], []),
    ("whatif", {"async_copies": "all"}, ["whatif", "--async-copies", "all"], ["whatif", "steps"], []),
    ("whatif", {"link_bw": 2.0}, ["whatif", "--link-bw", "2"], ["whatif", "steps"], []),
    ("whatif", {"overlap_comm": True}, ["whatif", "--overlap-comm"], ["whatif", "steps"], []),
    ("whatif", {"overlap_copies": True}, ["whatif", "--overlap-copies"], ["whatif", "steps"], []),
    ("whatif", {"graph_launch": "all"}, ["whatif", "--graph-launch", "all"], ["whatif", "steps"], []),
    ("whatif", {"across_steps": True, "no_sync": "all"},
     ["whatif", "--across-steps", "--no-sync", "all"], ["whatif", "steps"], []),
]


@pytest.mark.parametrize("method,kwargs,args,path,inherit", CASES + MULTI_ONLY,
                         ids=[f"{c[0]}{'-' + '-'.join(c[2][1:]) if c[2][1:] else ''}"
                              for c in CASES + MULTI_ONLY])
def test_multi_rank_tables_are_the_cli_json(multi, method, kwargs, args, path, inherit):
    doc = cli(*args, str(MULTI))
    assert_table_is(getattr(multi, method)(**kwargs), expected_rows(doc, path, inherit))


@pytest.mark.parametrize("method,kwargs,args,path,inherit", CASES,
                         ids=[f"{c[0]}{'-' + '-'.join(c[2][1:]) if c[2][1:] else ''}"
                              for c in CASES])
def test_single_rank_tables_are_the_cli_json(single, method, kwargs, args, path, inherit):
    doc = cli(*args, str(SINGLE))
    rows = expected_rows(doc, path, inherit)
    if not rows:
        # Nothing to compare on this input: the method must agree that there is nothing.
        assert pa.table(getattr(single, method)(**kwargs)).num_rows == 0
        return
    assert_table_is(getattr(single, method)(**kwargs), rows)


def test_gpu_time_parts_add_up_per_rank(multi):
    # The window is conserved: idle + compute + non-compute = 100 % on every rank.
    for row in pa.table(multi.gpu_time()).to_pylist():
        total = row["idle_pct"] + row["compute_pct"] + row["non_compute_pct"]
        assert math.isclose(total, 100.0, abs_tol=1e-6), row


def test_diff_is_the_cli_diff():
    a, b = DATA / "hta_trace_compare" / "base.json.gz", DATA / "hta_trace_compare" / "test.json.gz"
    doc = cli("diff", str(a), str(b))
    pa_, pb = stratoscope.open(a), stratoscope.open(b)
    assert_table_is(pa_.diff(pb), expected_rows(doc, ["operations"], []))
    assert_table_is(pa_.diff_kernels(pb), expected_rows(doc, ["kernels"], []))


def test_a_profile_directory_gives_the_numbers_of_its_source(tmp_path, multi):
    out = tmp_path / "prof"
    strato("import", str(MULTI), "-o", str(out))
    stored = stratoscope.open(out)
    assert pa.table(stored.gpu_time()).drop(["source"]).equals(
        pa.table(multi.gpu_time()).drop(["source"]))
    assert_table_is(stored.kernels(), expected_rows(cli("kernels", str(out)),
                                                    ["ranks", "kernels"], ["rank"]))


def test_raw_tables_join_and_count_what_the_trace_holds(multi):
    info = cli("info", str(MULTI))
    spans = pa.table(multi.spans())
    ranks = pa.table(multi.ranks())
    tracks = pa.table(multi.tracks())
    assert ranks.num_rows == 8 == multi.rank_count
    assert spans.num_rows == multi.span_count > 0
    # Every span's track is a track of the table, and its rank one of the ranks.
    assert set(spans.column("track").to_pylist()) <= set(tracks.column("track").to_pylist())
    assert set(spans.column("rank_index").to_pylist()) == set(range(8))
    # Durations are end - start.
    import pyarrow.compute as pc
    assert pc.all(pc.equal(pc.subtract(spans["end_ns"], spans["start_ns"]),
                           spans["duration_ns"])).as_py()
    # Device kernels in the spans table = the CLI's kernel count.
    kernels = spans.filter(pc.equal(spans["level"], "DeviceKernel")).num_rows
    assert kernels == cli("hierarchy", str(MULTI))["kernels"]
    flows = pa.table(multi.flows())
    assert flows.num_rows > 0
    assert info  # the CLI reads the same input


def test_tables_are_handed_over_without_copies(multi):
    t = multi.spans()
    a, b = pa.table(t), pa.table(t)
    # Both pyarrow tables point at the same Arrow buffers (owned by the Rust table).
    col_a = a.column("start_ns").chunks[0].buffers()[1]
    col_b = b.column("start_ns").chunks[0].buffers()[1]
    assert col_a.address == col_b.address
    df = t.to_pandas()
    assert len(df) == multi.span_count


def test_results_display_themselves_with_the_report_plot_and_a_table(multi):
    html = multi.gpu_time()._repr_html_()
    assert "<svg" in html and "<table" in html and "compute %" in html
    assert "<svg" in multi._repr_html_()
    assert "<table" in multi.layers()._repr_html_()


def test_errors_are_named_exceptions(tmp_path):
    with pytest.raises(stratoscope.InputNotFound, match="nope.json"):
        stratoscope.open(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\"traceEvents\": [ {\"ph\": ")
    with pytest.raises(stratoscope.TraceFormatError, match="bad.json"):
        stratoscope.open(bad)
    assert issubclass(stratoscope.TraceFormatError, stratoscope.StratoscopeError)
    out = tmp_path / "prof"
    strato("import", str(SINGLE), "-o", str(out))
    (out / "spans.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(stratoscope.ProfileStoreError, match="spans.parquet"):
        stratoscope.open(out)
    p = stratoscope.open(SINGLE)
    with pytest.raises(stratoscope.InvalidOption, match="window"):
        p.gpu_time(window="bogus")
    with pytest.raises(stratoscope.InvalidOption, match="trim"):
        p.layers(trim=0.7)
    with pytest.raises(stratoscope.InvalidOption, match="no such rule"):
        p.findings(disable=["no-such-rule"])


def test_what_opening_tells_is_a_warning_and_kept_on_the_profile(tmp_path):
    # A real trace cut in half, opened with salvage: the CLI prints a `salvaged` warning on
    # stderr; Python issues the same line as a UserWarning and keeps it on the profile.
    import gzip
    text = gzip.decompress(SINGLE.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) // 2])
    with pytest.warns(UserWarning, match="salvaged") as caught:
        p = stratoscope.open(cut, salvage=True)
    assert any("cut.json" in str(w.message) for w in caught)
    assert any("salvaged" in line for line in p.warnings)
    cli = strato("info", str(cut), "--salvage")
    assert [l for l in cli.stderr.splitlines() if "salvaged" in l] == [
        l for l in p.warnings if "salvaged" in l
    ]
    # A whole trace tells nothing.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stratoscope.open(SINGLE).warnings == []


def test_the_recorder_does_not_load_the_analysis_module(tmp_path):
    from conftest import run_script
    proc = run_script(tmp_path, """
        import sys, stratoscope
        print("_analysis" in " ".join(sys.modules))
        stratoscope.open
        print("stratoscope._analysis" in sys.modules)
    """)
    assert proc.stdout.split() == ["False", "True"]


def test_a_recording_opens_as_the_cli_opens_it(tmp_path):
    from conftest import run_script
    rec = tmp_path / "rec"
    run_script(tmp_path, f"""
        import json, stratoscope
        stratoscope.start({str(rec)!r})
        with stratoscope.operation("work"):
            json.dumps(list(range(200000)))
        stratoscope.stop()
    """)
    profile = stratoscope.open(rec)
    assert profile.rank_count >= 1
    doc = cli("breakdown", str(rec))
    assert_table_is(profile.breakdown(), expected_rows(doc, ["processes", "rows"], ["rank", "pid"]))
    assert "work" in pa.table(profile.breakdown()).column("operation").to_pylist()
