//! A session's limits (`strato_sql::Limits`) on a synthetic trace whose sizes are known by
//! construction: the query text, the result's share of the memory budget, and the timeout,
//! whose cancel must actually stop the query's threads (measured as the process's CPU time
//! after the cancel). One test per process: the CPU measure must not see other tests.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use strato_sql::{Limits, QueryLimits, Session, SqlError};
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::Level;

/// One rank with `n` kernels on one stream, kernel i at [10 i, 10 i + 5).
fn session(n: i64, limits: Limits) -> Session {
    let mut b = TraceBuilder::new();
    b.rank(rank(Some(0), "r0"));
    let q = b.queue(0, 1);
    for i in 0..n {
        b.span(q, Level::DeviceKernel, "gemm", 10 * i, 10 * i + 5);
    }
    Session::with_limits(strato_store::arrow_tables(&b.build()).unwrap(), 2, limits).unwrap()
}

/// User + system CPU time of this process so far, from /proc/self/stat (in clock ticks).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn limits_refuse_with_one_line_and_a_cancel_stops_the_work() {
    // The query text: refused past the byte limit, before parsing.
    let mut limits = Limits::with_budget(64 << 20);
    limits.query = QueryLimits {
        max_query_bytes: 64,
        ..QueryLimits::default()
    };
    let s = session(10, limits);
    let e = s
        .query(&format!("SELECT 1 {}", " ".repeat(60)))
        .unwrap_err();
    assert!(
        e.to_string().contains("more than the limit of 0 KiB"),
        "{e}"
    );
    assert!(s.query("SELECT 1").is_ok());

    // The result: 1000 x 1000 rows of two computed Int64 columns are 16 MB, more than the
    // 8 MiB half of a 16 MiB budget; 100 x 100 rows fit. (Columns a query passes through
    // share the table's buffers and count once.)
    let limits = Limits::with_budget(16 << 20);
    let s = session(1000, limits);
    let e = s
        .query("SELECT a.start_ns + b.start_ns AS s, a.start_ns - b.start_ns AS d FROM kernels a, kernels b")
        .unwrap_err();
    assert!(
        matches!(e, SqlError::ResultTooLarge { limit_mib: 8 }),
        "{e}"
    );
    assert_eq!(e.to_string().lines().count(), 1);
    let r = s
        .query("SELECT a.start_ns + b.start_ns AS s, a.start_ns - b.start_ns AS d FROM kernels a, kernels b WHERE a.start_ns < 1000 AND b.start_ns < 1000")
        .unwrap();
    assert_eq!(r.num_rows(), 100 * 100);

    // The timeout: a CPU-bound triple cross join (10^12 rows) is cancelled after 1 s, and
    // within the grace period its threads stop: the process's CPU time then stays flat.
    let mut limits = Limits::with_budget(64 << 20);
    limits.timeout = Some(Duration::from_secs(1));
    let s = session(10_000, limits);
    let started = Instant::now();
    let e = s
        .query("SELECT count(*) FROM kernels a, kernels b, kernels c WHERE a.start_ns + b.start_ns > c.end_ns")
        .unwrap_err();
    assert!(matches!(e, SqlError::Timeout { seconds: 1 }), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_ticks();
    std::thread::sleep(Duration::from_secs(1));
    let burnt = cpu_ticks() - before;
    // A busy thread would burn ~100 ticks (clock ticks are 1/100 s): allow a little noise.
    assert!(
        burnt < 20,
        "{burnt} ticks of CPU in the second after the cancel"
    );
    // The session still answers.
    assert_eq!(s.query("SELECT 1").unwrap().num_rows(), 1);
}
