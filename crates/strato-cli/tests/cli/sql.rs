//! `strato sql` on real traces: the shipped analyses give the numbers of `strato kernels` and
//! `strato gpu-time`; every output format; profiles (schema version 1) and partitioned stores
//! (version 2) answer like the traces they were imported from; bad queries and inputs fail
//! with one line and exit code 2.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{data, fails, json, ok, s, shared_data, text};

fn sql_json(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["sql"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    match json(&all) {
        Value::Array(rows) => rows,
        other => panic!("not a JSON array: {other}"),
    }
}

fn int(v: &Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} not an integer in {v}"))
}

/// `kernel_time_per_rank` and `kernel_stats` equal `strato kernels --json --top 0`, rank by
/// rank and kernel by kernel.
fn check_kernels(input: &str) {
    let cli = json(&["kernels", "--json", "--top", "0", input]);
    let ranks = cli["ranks"].as_array().unwrap();
    let per_rank = sql_json(&["--analysis", "kernel_time_per_rank", input]);
    let with_ops: Vec<&Value> = ranks.iter().filter(|r| int(r, "device_ops") > 0).collect();
    assert_eq!(
        per_rank.len(),
        with_ops.len(),
        "{input}: ranks with device ops"
    );
    for (row, r) in per_rank.iter().zip(&with_ops) {
        assert_eq!(int(row, "rank"), int(r, "rank"), "{input}");
        assert_eq!(int(row, "device_ops"), int(r, "device_ops"), "{input}");
        assert_eq!(
            int(row, "device_time_ns"),
            int(r, "device_time_ns"),
            "{input}"
        );
    }
    let stats = sql_json(&["--analysis", "kernel_stats", input]);
    let mut sql_rows: BTreeMap<(i64, String), (i64, i64, i64, i64)> = BTreeMap::new();
    for row in &stats {
        sql_rows.insert(
            (int(row, "rank"), row["name"].as_str().unwrap().to_owned()),
            (
                int(row, "count"),
                int(row, "total_ns"),
                int(row, "min_ns"),
                int(row, "max_ns"),
            ),
        );
    }
    let mut cli_rows = BTreeMap::new();
    for r in ranks {
        for k in r["kernels"].as_array().unwrap() {
            cli_rows.insert(
                (int(r, "rank"), k["name"].as_str().unwrap().to_owned()),
                (
                    int(k, "count"),
                    int(k, "total_ns"),
                    int(k, "min_ns"),
                    int(k, "max_ns"),
                ),
            );
        }
    }
    assert!(!cli_rows.is_empty(), "{input}: no kernels");
    assert_eq!(sql_rows, cli_rows, "{input}");
}

/// `gpu_busy` equals `strato gpu-time --json`: events, window, idle.
fn check_gpu_busy(input: &str) {
    let cli = json(&["gpu-time", "--json", input]);
    let busy = sql_json(&["--analysis", "gpu_busy", input]);
    let ranks: Vec<&Value> = cli["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["device_events"].as_i64().unwrap_or(0) > 0)
        .collect();
    assert_eq!(busy.len(), ranks.len(), "{input}");
    for (row, r) in busy.iter().zip(ranks) {
        assert_eq!(int(row, "rank"), int(r, "rank"), "{input}");
        assert_eq!(
            int(row, "device_events"),
            int(r, "device_events"),
            "{input}"
        );
        assert_eq!(
            int(row, "first_start_ns"),
            int(r, "window_start_ns"),
            "{input}"
        );
        assert_eq!(int(row, "last_end_ns"), int(r, "window_end_ns"), "{input}");
        let kernel_time_us = r["kernel_time_us"].as_f64().unwrap();
        let idle_us = r["idle_us"].as_f64().unwrap();
        assert!((int(row, "window_ns") as f64 / 1000.0 - kernel_time_us).abs() < 1e-6);
        assert!(
            (int(row, "idle_ns") as f64 / 1000.0 - idle_us).abs() < 1e-6,
            "{input}: idle"
        );
        assert_eq!(
            int(row, "busy_ns") + int(row, "idle_ns"),
            int(row, "window_ns"),
            "{input}: busy + idle = window"
        );
    }
}

#[test]
fn shipped_analyses_equal_the_commands_on_real_traces() {
    if shared_data().is_none() {
        return;
    }
    for input in [
        "kineto/param_dlrm8",
        "kineto/hta_trace_filter",
        "kineto/hta_nccl_data.json.gz",
    ] {
        let path = data(input);
        check_kernels(s(&path));
        check_gpu_busy(s(&path));
    }
}

#[test]
fn kernels_view_has_one_row_per_device_op() {
    if shared_data().is_none() {
        return;
    }
    let path = data("kineto/hta_trace_filter");
    let rows = sql_json(&[
        "SELECT rank, device, stream, name, start_ns, end_ns FROM kernels ORDER BY rank, start_ns, stream LIMIT 3",
        s(&path),
    ]);
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // (serde_json's map sorts the keys.)
        assert_eq!(
            keys,
            ["device", "end_ns", "name", "rank", "start_ns", "stream"]
        );
        assert!(int(row, "end_ns") >= int(row, "start_ns"));
    }
    // The view counts what the span table holds at device levels on device queues.
    let direct = sql_json(&[
        "SELECT COUNT(*) AS n FROM spans s JOIN tracks t ON s.track = t.id \
         WHERE t.kind = 'DeviceQueue' AND s.level IN ('DeviceKernel', 'DeviceCopy', 'DeviceSet')",
        s(&path),
    ]);
    let view = sql_json(&["SELECT COUNT(*) AS n FROM kernels", s(&path)]);
    assert_eq!(int(&direct[0], "n"), int(&view[0], "n"));
    assert!(int(&view[0], "n") > 1000);
}

#[test]
fn formats_and_output_file() {
    if shared_data().is_none() {
        return;
    }
    let path = data("kineto/hta_nccl_data.json.gz");
    let q = "SELECT name, COUNT(*) AS n FROM kernels GROUP BY name ORDER BY n DESC, name LIMIT 4";
    let table = text(&ok(&["sql", q, s(&path)]).stdout);
    assert!(
        table.contains("| name") && table.ends_with("(4 rows)\n"),
        "{table}"
    );
    let csv = text(&ok(&["sql", q, s(&path), "--format", "csv"]).stdout);
    assert_eq!(csv.lines().next(), Some("name,n"));
    assert_eq!(csv.lines().count(), 5);
    let rows = sql_json(&[q, s(&path)]);
    assert_eq!(rows.len(), 4);
    let dir = tempfile::tempdir().unwrap();
    for (format, magic) in [
        ("parquet", &b"PAR1"[..]),
        ("arrow", &[0xff, 0xff, 0xff, 0xff][..]),
    ] {
        let out = dir.path().join(format!("r.{format}"));
        ok(&["sql", q, s(&path), "--format", format, "-o", s(&out)]);
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.starts_with(magic), "{format}");
    }
    let out = dir.path().join("r.json");
    ok(&["sql", q, s(&path), "--format", "json", "-o", s(&out)]);
    let from_file: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(from_file, Value::Array(rows));
    // Nothing but the result is left in the directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn bad_queries_and_inputs_fail_with_one_line() {
    if shared_data().is_none() {
        return;
    }
    let path = data("kineto/hta_nccl_data.json.gz");
    for (query, says) in [
        ("SELEC 1", "query:"),
        ("SELECT nope FROM kernels", "query:"),
        ("SELECT * FROM no_such_table", "query:"),
        ("CREATE TABLE x AS SELECT 1", "query:"),
        ("COPY spans TO '/tmp/strato-sql-copy.csv'", "query:"),
    ] {
        let err = fails(&["sql", query, s(&path)]);
        assert!(
            err.starts_with("strato: ") && err.contains(says),
            "{query}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{query}: {err}");
    }
    assert!(!std::path::Path::new("/tmp/strato-sql-copy.csv").exists());
    let err = fails(&["sql", "SELECT 1", "/no/such/trace.json"]);
    assert!(err.contains("/no/such/trace.json"), "{err}");
    let err = fails(&["sql", "SELECT 1"]);
    assert!(err.contains("no inputs"), "{err}");
    let err = fails(&["sql", "--analysis", "nope", s(&path)]);
    assert!(err.contains("nope"), "{err}");
    let not_json = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(not_json.path(), b"{ not json").unwrap();
    let err = fails(&["sql", "SELECT 1", s(not_json.path())]);
    assert!(err.contains(s(not_json.path())), "{err}");
}

#[test]
fn list_and_show() {
    let list = text(&ok(&["sql", "--list"]).stdout);
    assert!(list.contains("SQL schema version 1"), "{list}");
    assert!(list.contains("views: kernels, device_events"), "{list}");
    let text_ = text(&ok(&["sql", "--show", "gpu_busy"]).stdout);
    assert!(text_.contains("FROM device_events"), "{text_}");
    fails(&["sql", "--show", "nope"]);
}

/// A profile directory (schema version 1) and a partitioned store (version 2) of the same
/// ranks answer every query as the trace files do, and every other command reads the store.
#[test]
fn profiles_and_partitioned_stores_answer_like_the_traces() {
    if shared_data().is_none() {
        return;
    }
    let ranks = data("kineto/param_dlrm8");
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("prof");
    ok(&["import", s(&ranks), "-o", s(&profile)]);
    let store = dir.path().join("store");
    let out = text(
        &ok(&[
            "import",
            "--partitioned",
            "--job",
            "dlrm",
            s(&ranks),
            "-o",
            s(&store),
        ])
        .stdout,
    );
    assert!(out.contains("8 partitions"), "{out}");
    for rank in 0..8 {
        let leaf = store.join(format!("job=dlrm/host=unknown/rank={rank}"));
        let leaf = if leaf.exists() {
            leaf
        } else {
            // The host is the trace's when it names one.
            let host = std::fs::read_dir(store.join("job=dlrm"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            host.join(format!("rank={rank}"))
        };
        assert!(leaf.join("spans.parquet").is_file(), "{}", leaf.display());
    }
    let q = "SELECT rank, COUNT(*) AS n, SUM(end_ns - start_ns) AS ns, MIN(start_ns) AS first FROM kernels GROUP BY rank ORDER BY rank";
    let from_traces = sql_json(&[q, s(&ranks)]);
    assert_eq!(from_traces.len(), 8);
    assert_eq!(sql_json(&[q, s(&profile)]), from_traces);
    assert_eq!(sql_json(&[q, s(&store)]), from_traces);
    for command in [["kernels", "--json"], ["gpu-time", "--json"]] {
        let a = json(&[command[0], command[1], s(&ranks)]);
        let b = json(&[command[0], command[1], s(&store)]);
        assert_eq!(a, b, "strato {} on the store", command[0]);
    }
    // The store is refused beside other inputs, and a damaged leaf is named.
    let err = fails(&["kernels", s(&store), s(&profile)]);
    assert!(err.contains("alone"), "{err}");
    let stray = store.join("job=dlrm/not-a-partition");
    std::fs::create_dir(&stray).unwrap();
    let err = fails(&["kernels", s(&store)]);
    assert!(err.contains("not-a-partition"), "{err}");
}
