//! nsys CPU samples (`COMPOSITE_EVENTS` + `SAMPLING_CALLCHAINS`) imported with their whole call
//! chain, in the representation `strato record --sample` writes (category `cpu_sample`, named
//! by the frames folded outermost first, each `symbol [module]`). Expected stacks come from
//! SQL on the real export, not from the importer: every sample's depth is its number of
//! call-chain rows, its leaf is the `stackDepth = 0` row and its root the deepest row.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use strato_io::{nsys, ImportOptions};
use strato_trace::{Trace, TrackKind};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nsys/pipit_cloverleaf_cuda.sqlite")
}

/// A frame as the test expects it, written independently of the importer: the symbol (`??`
/// when nsys left it unresolved) and the module's file name in brackets.
fn expected_label(symbol: &str, module: &str, unresolved: bool) -> String {
    let name = module
        .strip_prefix('[')
        .and_then(|m| m.strip_suffix(']'))
        .unwrap_or_else(|| module.rsplit('/').next().unwrap());
    let symbol = if unresolved { "??" } else { symbol };
    format!("{symbol} [{name}]")
}

/// `(start, tid)` -> the expected `(depth, leaf, root)` of each sample, from SQL (a sample
/// without call-chain rows has depth 0 and no frames).
type Expected = BTreeMap<(i64, i64), Vec<(usize, Option<String>, Option<String>)>>;

fn expected(db: &Connection) -> Expected {
    let mut stmt = db
        .prepare(
            "SELECT e.id, e.start, e.globalTid & 16777215, c.stackDepth, s.value, m.value, \
             coalesce(c.unresolved, 0) \
             FROM COMPOSITE_EVENTS e \
             LEFT JOIN SAMPLING_CALLCHAINS c ON c.id = e.id \
             LEFT JOIN StringIds s ON s.id = c.symbol \
             LEFT JOIN StringIds m ON m.id = c.module \
             WHERE e.globalTid IS NOT NULL ORDER BY e.id, c.stackDepth",
        )
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    // sample id -> (start, tid) and its frames, leaf first.
    let mut samples: BTreeMap<i64, ((i64, i64), Vec<String>)> = BTreeMap::new();
    while let Some(r) = rows.next().unwrap() {
        let id: i64 = r.get(0).unwrap();
        let key: (i64, i64) = (r.get(1).unwrap(), r.get(2).unwrap());
        let frames = &mut samples.entry(id).or_insert((key, Vec::new())).1;
        if r.get::<_, Option<i64>>(3).unwrap().is_some() {
            frames.push(expected_label(
                &r.get::<_, String>(4).unwrap(),
                &r.get::<_, String>(5).unwrap(),
                r.get::<_, i64>(6).unwrap() != 0,
            ));
        }
    }
    let mut out = Expected::new();
    for (key, frames) in samples.into_values() {
        out.entry(key).or_default().push((
            frames.len(),
            frames.first().cloned(),
            frames.last().cloned(),
        ));
    }
    out
}

/// The same shape from the imported trace: `cpu_sample` instants by (start, tid).
fn imported(trace: &Trace, session_start: i64) -> Expected {
    let mut out = Expected::new();
    for i in &trace.instants {
        assert_eq!(trace.str(i.category), "cpu_sample");
        let TrackKind::Thread { tid, .. } = trace.track(i.track).kind else {
            panic!("a sample off its thread's track");
        };
        let name = trace.str(i.name);
        let frames: Vec<&str> = if name == "[unknown]" {
            Vec::new()
        } else {
            name.split(';').collect()
        };
        out.entry((i.ts - session_start, tid)).or_default().push((
            frames.len(),
            frames.last().map(|s| (*s).to_owned()),
            frames.first().map(|s| (*s).to_owned()),
        ));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

fn session_start(db: &Connection) -> i64 {
    db.query_row(
        "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn check(path: &Path, keep_args: bool) -> Expected {
    let db = Connection::open(path).unwrap();
    let mut want = expected(&db);
    for v in want.values_mut() {
        v.sort();
    }
    let options = ImportOptions {
        keep_args,
        ..ImportOptions::default()
    };
    let trace = nsys::import(path, &options).unwrap();
    trace.validate().unwrap();
    let got = imported(&trace, session_start(&db));
    assert_eq!(got, want);
    want
}

#[test]
fn real_samples_keep_their_whole_call_chain() {
    let path = real_file();
    for keep_args in [true, false] {
        let want = check(&path, keep_args);
        let samples: usize = want.values().map(Vec::len).sum();
        let frames: usize = want.values().flatten().map(|s| s.0).sum();
        let deepest = want.values().flatten().map(|s| s.0).max().unwrap();
        // The figures the brief names, from SQL: 1531 samples, 7527 frames, up to 30 deep.
        let db = Connection::open(&path).unwrap();
        let (rows, max_depth): (i64, i64) = db
            .query_row(
                "SELECT count(*), max(stackDepth) + 1 FROM SAMPLING_CALLCHAINS",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(samples, 1531);
        assert_eq!(frames as i64, rows);
        assert_eq!(deepest as i64, max_depth);
        assert!(deepest > 1, "whole chains, not only leaves");
    }
}

#[test]
fn cut_or_missing_call_chains_import_as_far_as_they_go() {
    // The real export with every frame below depth 3 of the even samples removed and the
    // chain of sample 1 gone entirely: depths follow the rows that remain, and a sample
    // without rows is `[unknown]`, still on its thread.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.sqlite");
    std::fs::copy(real_file(), &path).unwrap();
    let db = Connection::open(&path).unwrap();
    db.execute_batch(
        "DELETE FROM SAMPLING_CALLCHAINS WHERE id % 2 = 0 AND stackDepth >= 3; \
         DELETE FROM SAMPLING_CALLCHAINS WHERE id = 1;",
    )
    .unwrap();
    drop(db);
    let want = check(&path, true);
    assert!(want.values().flatten().any(|s| s.0 == 0));
    assert_eq!(want.values().map(Vec::len).sum::<usize>(), 1531);
}
