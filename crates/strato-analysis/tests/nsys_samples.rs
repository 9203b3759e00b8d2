//! nsys CPU samples per operation: the samples of an Nsight Systems export go to the innermost
//! NVTX range (level Operation) of their own thread that covers them, by the same rules as a
//! live recording's (`strato_analysis::cross_stack::samples`). The fixture is the real CloverLeaf
//! export (1531 samples, no NVTX) with two nested push/pop ranges inserted on its most-sampled
//! thread, placed at the times of its own samples; the expected counts per range come from
//! SQL on the copy, not from the importer.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::nsys::{CloverLeafCopy, NVTX_EVENTS};

use strato_analysis::cross_stack::samples::{cpu_samples, SampleOptions, NO_OPERATION};
use strato_io::{import_paths, ImportOptions};

#[test]
fn nsys_samples_go_to_the_innermost_nvtx_range_of_their_thread() {
    let dir = tempfile::tempdir().unwrap();
    let copy = CloverLeafCopy::new(dir.path(), "nvtx_samples.sqlite");
    let db = &copy.db;
    db.execute_batch(NVTX_EVENTS).unwrap();
    let count = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> u64 {
        db.query_row(sql, params, |r| r.get::<_, i64>(0)).unwrap() as u64
    };
    let busiest: i64 = db
        .query_row(
            "SELECT globalTid FROM COMPOSITE_EVENTS GROUP BY globalTid ORDER BY count(*) DESC \
             LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let times: Vec<i64> = db
        .prepare("SELECT start FROM COMPOSITE_EVENTS WHERE globalTid = ?1 ORDER BY start")
        .unwrap()
        .query_map([busiest], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(times.len() > 40, "{} samples", times.len());
    let at = |share: f64| times[(times.len() as f64 * share) as usize];
    // `outer` over the middle half of the thread's samples, `inner` inside it.
    let (outer, inner) = ((at(0.25), at(0.75)), (at(0.45), at(0.55)));
    for (name, (start, end)) in [("outer", outer), ("inner", inner)] {
        db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) \
             VALUES (?1, ?2, 59, ?3, ?4)",
            rusqlite::params![start, end, name, busiest],
        )
        .unwrap();
    }
    let on_thread_in = |(start, end): (i64, i64)| {
        count(
            "SELECT count(*) FROM COMPOSITE_EVENTS WHERE globalTid = ?1 AND start >= ?2 \
             AND start < ?3",
            &[&busiest, &start, &end],
        )
    };
    let total = count(
        "SELECT count(*) FROM COMPOSITE_EVENTS WHERE globalTid IS NOT NULL",
        &[],
    );
    let want_inner = on_thread_in(inner);
    let want_outer = on_thread_in(outer) - want_inner;

    let trace = import_paths(std::slice::from_ref(&copy.path), &ImportOptions::default()).unwrap();
    let samples = cpu_samples(&trace, &SampleOptions::default());
    assert_eq!(samples.samples, total);
    assert_eq!(samples.operation("inner").unwrap().samples, want_inner);
    assert_eq!(samples.operation("outer").unwrap().samples, want_outer);
    assert_eq!(
        samples.operation(NO_OPERATION).unwrap().samples,
        total - want_inner - want_outer
    );
    assert!(want_inner > 0 && want_outer > 0);
    // Conservation: operations add up to the samples, each operation's stacks to its count,
    // and the folded lines to the whole.
    assert_eq!(
        samples.operations.iter().map(|o| o.samples).sum::<u64>(),
        total
    );
    for op in &samples.operations {
        assert_eq!(op.stacks.iter().map(|s| s.1).sum::<u64>(), op.samples);
    }
    let folded: u64 = samples
        .folded()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(folded, total);
    // The window is the first to the last sample.
    let (first, last): (i64, i64) = db
        .query_row(
            "SELECT min(start), max(start) FROM COMPOSITE_EVENTS WHERE globalTid IS NOT NULL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let (lo, hi) = samples.window.unwrap();
    assert_eq!(hi - lo, last - first);
}
