//! `strato sql` under hostile queries (issue 28): each is refused with one line and exit code
//! 2, quickly, instead of overflowing the stack, eating the machine's memory or running until
//! killed; queries just under each limit run and give the answer known by construction; CSV
//! text cells are neutralised like every CSV strato writes.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{data, json, ok, s, shared_data, strato_env, text};

/// A real trace with a few thousand kernels.
fn trace() -> Option<String> {
    shared_data()?;
    Some(s(&data("kineto/hta_nccl_data.json.gz")).to_owned())
}

/// Runs `strato sql query trace extra...` with `env`; it must fail with exit code 2 and one
/// line on stderr saying `says`. Returns the time it took.
fn refused(query: &str, extra: &[&str], env: &[(&str, &str)], says: &str) -> Duration {
    let Some(trace) = trace() else {
        return Duration::ZERO;
    };
    let mut args = vec!["sql", query, &trace];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let out = strato_env(&args, env);
    let took = started.elapsed();
    let err = text(&out.stderr);
    let short: String = query.chars().take(80).collect();
    assert_eq!(out.status.code(), Some(2), "{short}: {err}");
    assert!(err.starts_with("strato: query: "), "{short}: {err}");
    assert!(err.contains(says), "{short}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{short}: {err}");
    took
}

fn count(query: &str) -> i64 {
    let trace = trace().unwrap_or_default();
    let rows = json(&["sql", query, &trace, "--format", "json"]);
    rows[0]["n"].as_i64().unwrap_or_else(|| panic!("{rows}"))
}

/// The stack overflows: a 5,500-term OR filter and a 5,000-term sum are refused; a sum
/// and an OR chain at the depth limit (1000) plan, run and give the right answer.
#[test]
fn deep_expressions_are_refused_and_those_at_the_limit_run() {
    let Some(_) = trace() else { return };
    // Kernels of i microseconds: an n-term chain is n + 4 deep (n - 1 ORs, then `=`, `/`,
    // the parentheses and `-` down to a column).
    let or_chain = |n: usize| {
        (1..=n)
            .map(|i| format!("(end_ns - start_ns) / 1000 = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    // The 5,500-term filter, in terms short enough for one command-line argument.
    let short_chain = (1..=5500)
        .map(|i| format!("start_ns={i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    refused(
        &format!("SELECT count(*) FROM kernels WHERE {short_chain}"),
        &[],
        &[],
        "nests more than 1000 deep",
    );
    let ones = |n: usize| vec!["1"; n].join("+");
    refused(
        &format!("SELECT {} AS n", ones(5000)),
        &[],
        &[],
        "nests more than 1000 deep",
    );
    // `1+1+...` of n terms is n deep: 1000 is the limit, and is summed.
    assert_eq!(count(&format!("SELECT {} AS n", ones(1000))), 1000);
    refused(
        &format!("SELECT {} AS n", ones(1001)),
        &[],
        &[],
        "nests more than 1000 deep",
    );
    // An OR chain of 996 comparisons (1000 deep: the limit) finds the kernels an IN list of
    // the same durations finds.
    let micros: Vec<String> = (1..=996).map(|i| i.to_string()).collect();
    let by_in = count(&format!(
        "SELECT count(*) AS n FROM kernels WHERE (end_ns - start_ns) / 1000 IN ({})",
        micros.join(",")
    ));
    assert!(
        by_in > 0,
        "no kernel of 1..996 us: the test would prove nothing"
    );
    assert_eq!(
        count(&format!(
            "SELECT count(*) AS n FROM kernels WHERE {}",
            or_chain(996)
        )),
        by_in
    );
    refused(
        &format!("SELECT count(*) AS n FROM kernels WHERE {}", or_chain(997)),
        &[],
        &[],
        "nests more than 1000 deep",
    );
}

/// A cross join's result is refused once it passes its half of the memory budget; an
/// aggregation whose state passes the other half (the operators' pool) fails in the pool.
#[test]
fn results_and_operators_stay_within_the_memory_budget() {
    let Some(_) = trace() else { return };
    let budget = [("STRATO_MEMORY_BUDGET", "64M")];
    let took = refused(
        "SELECT a.name, b.name FROM kernels a, kernels b",
        &[],
        &budget,
        "the result exceeds 32 MiB of the memory budget: add LIMIT or aggregate",
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    refused(
        "SELECT count(DISTINCT a.start_ns * 1000003 + b.start_ns) AS n FROM kernels a, kernels b",
        &[],
        &budget,
        "Resources exhausted",
    );
    // The same cross join, aggregated, fits: count(*) is the square of the kernels.
    let kernels = count("SELECT count(*) AS n FROM kernels");
    let trace = trace().unwrap_or_default();
    let out = strato_env(
        &[
            "sql",
            "SELECT count(*) AS n FROM kernels a, kernels b",
            &trace,
            "--format",
            "json",
        ],
        &budget,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["n"].as_i64(), Some(kernels * kernels));
}

/// `repeat`, `lpad` and `rpad` cannot build gigabytes; under the bound they are DataFusion's.
#[test]
fn text_built_from_a_count_is_bounded() {
    let Some(_) = trace() else { return };
    refused(
        "SELECT repeat('x', 2147483647) AS s",
        &[],
        &[],
        "repeat() would build 2047 MiB of text in one batch, more than the limit of 64 MiB",
    );
    // 10 KiB per row over every kernel: more than 64 MiB in one batch.
    refused(
        "SELECT length(repeat(name, 10000)) FROM kernels",
        &[],
        &[],
        "repeat() would build",
    );
    refused(
        "SELECT lpad('x', 100000000) AS s",
        &[],
        &[],
        "lpad() would build",
    );
    refused(
        "SELECT rpad('x', 100000000, 'ab') AS s",
        &[],
        &[],
        "rpad() would build",
    );
    assert_eq!(count("SELECT length(repeat('ab', 1000)) AS n"), 2000);
    assert_eq!(count("SELECT length(lpad('x', 1000, 'yz')) AS n"), 1000);
}

/// A recursive query without end and a CPU-bound cross join are cancelled at `--timeout`.
#[test]
fn endless_queries_are_cancelled_at_the_timeout() {
    let Some(_) = trace() else { return };
    for query in [
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t",
        "SELECT count(*) FROM kernels a, kernels b, kernels c WHERE a.start_ns + b.start_ns > c.end_ns",
    ] {
        let took = refused(query, &["--timeout", "2"], &[], "cancelled after 2 s");
        // Loading the trace, 2 s of query, the cancel: well under the grace period's end.
        assert!(took < Duration::from_secs(30), "{query}: {took:?}");
    }
}

/// CSV text cells a spreadsheet would run are written as text, unless `--csv-raw`; numbers
/// (negative ones too) are unchanged.
#[test]
fn csv_cells_are_neutralised_like_every_csv() {
    let Some(trace) = trace() else { return };
    let q = "SELECT '=HYPERLINK(\"http://example.com\",\"x\")' AS cell, '@SUM(A1)' AS at, -5 AS n, 'gemm' AS plain";
    let out = text(&ok(&["sql", q, &trace, "--format", "csv"]).stdout);
    let row = out.lines().nth(1).unwrap();
    assert_eq!(
        row,
        "\"'=HYPERLINK(\"\"http://example.com\"\",\"\"x\"\")\",'@SUM(A1),-5,gemm"
    );
    let raw = text(&ok(&["sql", q, &trace, "--format", "csv", "--csv-raw"]).stdout);
    assert_eq!(
        raw.lines().nth(1).unwrap(),
        "\"=HYPERLINK(\"\"http://example.com\"\",\"\"x\"\")\",@SUM(A1),-5,gemm"
    );
    // JSON keeps the value as it is.
    let rows = json(&["sql", q, &trace, "--format", "json"]);
    assert_eq!(rows[0]["cell"], "=HYPERLINK(\"http://example.com\",\"x\")");
}
