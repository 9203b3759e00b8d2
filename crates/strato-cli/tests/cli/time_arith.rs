//! Issue 11, "silently wrong numbers": times that are missing, out of range or overflow when
//! subtracted; overlapping kernels; rows dropped, clamped or guessed by the importers; the
//! memory budget. Small files written by each test (the exact answer known by construction),
//! run through the built `strato` binary as a user would, plus the real files for the budget.

use std::path::{Path, PathBuf};
use std::process::Output;

use rusqlite::Connection;
use serde_json::Value;

use crate::common::{data, json_ok, kineto_file, stderr, strato, strato_env};

/// Exit 2 with one line on stderr containing every `needles`.
fn refused(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in {err}");
    }
}

fn kernel(name: &str, ts: &str, dur: &str, stream: i64) -> String {
    format!(
        r#"{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":{stream},"ts":{ts},"dur":{dur},"args":{{"device":0,"stream":{stream},"correlation":1}}}}"#
    )
}

#[test]
fn kineto_event_without_ts_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut events = vec![kernel("gemm", "1712195495505543.2", "5", 7)];
    events.push(
        r#"{"ph":"X","cat":"kernel","name":"lost_ts","pid":0,"tid":7,"dur":3,"args":{"device":0,"stream":7}}"#
            .into(),
    );
    let path = kineto_file(dir.path(), "no_ts.json", &events);
    let p = path.to_str().unwrap();
    refused(
        &strato(&["info", p]),
        &["lost_ts", "no \"ts\"", "no_ts.json"],
    );
    let html = dir.path().join("r.html");
    let out = strato(&["report", p, "-o", html.to_str().unwrap()]);
    refused(&out, &["lost_ts"]);
    assert!(!html.exists());
}

#[test]
fn kineto_times_out_of_range_or_overflowing_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    // Beyond i64 ns; an i64 but outside the valid range; the end (ts + dur) outside it.
    for (ts, dur, what) in [
        ("9300000000000000", "1", "bad timestamp"),
        ("-5000000000000000", "1", "valid range"),
        ("3999999999999999", "3999999999999999", "valid range"),
    ] {
        let events = vec![kernel("a", "10", "1", 7), kernel("far", ts, dur, 7)];
        let path = kineto_file(dir.path(), "range.json", &events);
        refused(&strato(&["info", path.to_str().unwrap()]), &["far", what]);
    }
    // Two times each at the edge of the range: their difference (7.8e18 ns) fits, so the span
    // and the device time are exact and positive.
    let events = vec![
        kernel("early", "-3900000000000000", "1", 7),
        kernel("late", "3900000000000000", "1", 7),
    ];
    let path = kineto_file(dir.path(), "edges.json", &events);
    let p = path.to_str().unwrap();
    let (info, _) = json_ok(&["info", p, "--json"]);
    assert_eq!(info["duration_ns"], 7_800_000_000_000_001_000_i64);
    let (gpu, _) = json_ok(&["gpu-time", p, "--json"]);
    let r = &gpu["ranks"][0];
    assert!(r["kernel_time_us"].as_f64().unwrap() > 0.0);
    for s in r["streams"].as_array().unwrap() {
        for k in ["host_wait_us", "kernel_wait_us", "other_us"] {
            assert!(s[k].as_f64().unwrap() >= 0.0, "{s}");
        }
    }
}

#[test]
fn report_on_a_54_year_span_stays_bounded() {
    // A kernel at time 0 and one at an epoch time: valid, 54 years apart. The busy series
    // used to need 1.36 TB; it is now bounded (the bucket widens).
    let dir = tempfile::tempdir().unwrap();
    let events = vec![
        kernel("at_zero", "0", "5", 7),
        kernel("at_epoch", "1712195495505543.2", "5", 7),
    ];
    let path = kineto_file(dir.path(), "wide.json", &events);
    let html = dir.path().join("r.html");
    let out = strato(&[
        "report",
        path.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
}

#[test]
fn overlapping_kernels_are_counted_and_never_negative() {
    let dir = tempfile::tempdir().unwrap();
    // Stream 7: a [0,1000) us, b [100,200) us inside it, c [1500,1600) us twice.
    let events = vec![
        kernel("a", "0", "1000", 7),
        kernel("b", "100", "100", 7),
        kernel("c", "1500", "100", 7),
        kernel("c", "1500", "100", 7),
    ];
    let path = kineto_file(dir.path(), "overlap.json", &events);
    let p = path.to_str().unwrap();
    let (gpu, _) = json_ok(&["gpu-time", p, "--json"]);
    let s = &gpu["ranks"][0]["streams"][0];
    assert_eq!(s["overlapping_events"], 2);
    let parts: Vec<f64> = ["host_wait_us", "kernel_wait_us", "other_us"]
        .iter()
        .map(|k| s[k].as_f64().unwrap())
        .collect();
    assert!(parts.iter().all(|&v| v >= 0.0), "{s}");
    // Window 1600 us, union 1100 us: 500 us of gaps.
    assert!((parts.iter().sum::<f64>() - 500.0).abs() < 1e-9, "{s}");
    let out = strato(&["gpu-time", p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 events started before earlier events"),
        "{text}"
    );
    let (hta, _) = json_ok(&["gpu-time", p, "--json", "--window", "hta"]);
    assert_eq!(hta["ranks"][0]["streams"][0]["overlapping_events"], 2);
}

/// An nsys export with crafted kernel rows: 4 good, and one each with a text start, a NULL
/// start, end < start, start = INT64_MIN, start = INT64_MAX.
fn nsys_db(path: &Path, with_stream: bool) {
    let conn = Connection::open(path).unwrap();
    let stream_col = if with_stream { "streamId INTEGER," } else { "" };
    let stream_val = |v: &str| {
        if with_stream {
            format!("{v},")
        } else {
            String::new()
        }
    };
    let mut sql = format!(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO StringIds VALUES (1, 'gemm');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end INTEGER, deviceId INTEGER,
             {stream_col} correlationId INTEGER, globalPid INTEGER, demangledName INTEGER);"
    );
    let rows = [
        ("1000", "2000"),
        ("3000", "4000"),
        ("5000", "6000"),
        ("7000", "8000"),
        ("'abc'", "9000"),
        ("NULL", "9000"),
        ("9500", "9400"),
        ("-9223372036854775808", "10000"),
        ("9223372036854775807", "9223372036854775807"),
    ];
    for (i, (s, e)) in rows.iter().enumerate() {
        sql.push_str(&format!(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({s}, {e}, 0, {} {i}, 16777216, 1);",
            stream_val("7")
        ));
    }
    conn.execute_batch(&sql).unwrap();
}

#[test]
fn nsys_rows_dropped_or_guessed_are_counted_shown_and_warned() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crafted.sqlite");
    nsys_db(&db, true);
    let p = db.to_str().unwrap();
    let (info, warn) = json_ok(&["info", p, "--json"]);
    let notes = &info["sources"][0]["import_notes"];
    assert_eq!(notes["events_read"], 9);
    assert_eq!(notes["counts"]["dropped_rows_no_time"], 2, "{notes}");
    assert_eq!(notes["counts"]["dropped_rows_end_before_start"], 1);
    assert_eq!(notes["counts"]["dropped_rows_time_out_of_range"], 2);
    assert_eq!(info["spans"], 4);
    // 5 of 9 is far above 0.1 %: one warning line per count on stderr.
    assert!(warn.contains("strato: warning:"), "{warn}");
    assert!(
        warn.contains("dropped_rows_no_time: 2 of 9 events"),
        "{warn}"
    );
    let out = strato(&["info", p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("import notes for") && text.contains("dropped_rows_end_before_start"));
    // No endless loop, no giant buffer: gpu-time and report finish.
    let (gpu, _) = json_ok(&["gpu-time", p, "--json"]);
    assert_eq!(gpu["ranks"][0]["device_events"], 4);
    let html = dir.path().join("r.html");
    let out = strato(&["report", p, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The notes survive the profile store.
    let prof = dir.path().join("prof");
    let out = strato(&["import", p, "-o", prof.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (stored, warn) = json_ok(&["info", prof.to_str().unwrap(), "--json"]);
    assert_eq!(stored["sources"][0]["import_notes"], *notes);
    assert!(warn.contains("dropped_rows_time_out_of_range"), "{warn}");

    // Without the streamId column, kernels land on stream -1 (not counted by gpu-time): the
    // guess is counted and warned about instead of a silent 0 % compute.
    let db = dir.path().join("nostream.sqlite");
    nsys_db(&db, false);
    let (info, warn) = json_ok(&["info", db.to_str().unwrap(), "--json"]);
    assert_eq!(
        info["sources"][0]["import_notes"]["counts"]["device_ops_without_stream"],
        4
    );
    assert!(warn.contains("device_ops_without_stream"), "{warn}");
}

fn ncu_csv(dir: &Path, durations: &[&str]) -> PathBuf {
    let mut text = String::from(
        "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n",
    );
    for (i, d) in durations.iter().enumerate() {
        text.push_str(&format!(
            "\"{i}\",\"1\",\"p\",\"h\",\"k{i}\",\"1\",\"7\",\"(32, 1, 1)\",\"(1, 1, 1)\",\"0\",\"8.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"ns\",\"{d}\"\n"
        ));
    }
    let path = dir.join("metrics.csv");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn ncu_durations_unusable_are_counted_and_huge_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = ncu_csv(dir.path(), &["1,000", "n/a", "2,000"]);
    let (info, warn) = json_ok(&["info", path.to_str().unwrap(), "--json"]);
    let notes = &info["sources"][0]["import_notes"];
    assert_eq!(
        notes["counts"]["kernels_with_unusable_duration"], 1,
        "{notes}"
    );
    assert!(warn.contains("kernels_with_unusable_duration"), "{warn}");
    assert_eq!(info["duration_ns"], 3000);
    // A duration that would saturate (1e30 ns), and durations each valid whose sum is not.
    for durations in [
        &["1000", "1e30"][..],
        &["3999999999999999999", "3999999999999999999"],
    ] {
        let path = ncu_csv(dir.path(), durations);
        refused(
            &strato(&["info", path.to_str().unwrap()]),
            &["k1", "launch ID 1", "valid range"],
        );
    }
}

#[test]
fn memory_budget_stops_a_real_import_with_one_line() {
    let file = data("kineto/hta_nccl_data.json.gz");
    let f = file.to_str().unwrap();
    let out = strato_env(&["info", f], &[("STRATO_MEMORY_BUDGET", "1M")]);
    refused(&out, &["memory budget of 1 MiB", "STRATO_MEMORY_BUDGET"]);
    let out = strato_env(&["info", f], &[("STRATO_MEMORY_BUDGET", "lots")]);
    refused(&out, &["STRATO_MEMORY_BUDGET", "\"lots\""]);
    // A budget that fits gives the same counts as the default.
    let (plain, _) = json_ok(&["info", f, "--json"]);
    let out = strato_env(&["info", f, "--json"], &[("STRATO_MEMORY_BUDGET", "4G")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let budgeted: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(budgeted["spans"], plain["spans"]);
}
