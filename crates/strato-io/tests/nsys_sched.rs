//! Nsight Systems `SCHED_EVENTS` -> OS-level thread-state spans: the real export in
//! `shared/data/nsys` (expected figures computed here from the file with SQLite, not from the
//! importer) and a small database built here whose answer is known by construction.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use strato_io::{nsys, ImportOptions};
use strato_trace::{Level, Trace, TrackKind};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nsys/pipit_cloverleaf_cuda.sqlite")
}

/// Thread-state spans of each thread `(pid, tid)`: (start, end, name).
type StatesByThread = BTreeMap<(i64, i64), Vec<(i64, i64, String)>>;

/// Thread-state spans per thread `(pid, tid)`, sorted by start: (start, end, name).
fn states(trace: &Trace) -> StatesByThread {
    let mut out: StatesByThread = BTreeMap::new();
    for s in &trace.spans {
        if trace.str(s.category) != nsys::THREAD_STATE_CATEGORY {
            continue;
        }
        assert_eq!(s.level, Level::Os);
        let TrackKind::Thread { pid, tid } = trace.tracks[s.track.0 as usize].kind else {
            panic!("thread state on a non-thread track");
        };
        out.entry((pid, tid))
            .or_default()
            .push((s.start, s.end, trace.str(s.name).to_owned()));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Per thread (plain tid), (first, last) event time and the number of sched-ins whose next
/// event on the thread (by time, then file order) is a sched-out: computed with SQL.
fn expected_from_sql(path: &Path) -> (BTreeMap<i64, (i64, i64)>, i64) {
    let conn = Connection::open(path).unwrap();
    let mut bounds = BTreeMap::new();
    let mut stmt = conn
        .prepare("SELECT globalTid, min(start), max(start) FROM SCHED_EVENTS GROUP BY 1")
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let g: i64 = r.get(0).unwrap();
        bounds.insert(g & 0xFF_FFFF, (r.get(1).unwrap(), r.get(2).unwrap()));
    }
    let paired: i64 = conn
        .query_row(
            "SELECT count(*) FROM (SELECT isSchedIn AS i, lead(isSchedIn) OVER \
             (PARTITION BY globalTid ORDER BY start, rowid) AS next FROM SCHED_EVENTS) \
             WHERE i != 0 AND next = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (bounds, paired)
}

/// The states of each thread follow each other without gap or overlap from its first to its
/// last event (less the time after a switch-out that ended the thread).
fn assert_tiles(states: &StatesByThread, bounds: &BTreeMap<i64, (i64, i64)>, offset: i64) {
    for ((_, tid), spans) in states {
        for w in spans.windows(2) {
            assert_eq!(w[0].1, w[1].0, "tid {tid}: gap or overlap at {}", w[0].1);
        }
        let (first, last) = bounds[tid];
        assert_eq!(
            spans[0].0,
            first + offset,
            "tid {tid} starts at its first event"
        );
        assert_eq!(
            spans.last().unwrap().1,
            last + offset,
            "tid {tid} ends at its last event"
        );
    }
}

#[test]
fn nsys_real_sched_events_become_thread_states() {
    let path = real_file();
    let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();
    let offset = trace.clock.sources[0].offset_ns;
    let (bounds, paired) = expected_from_sql(&path);
    let states = states(&trace);
    assert_eq!(states.len(), bounds.len(), "one state track per thread");
    let running = states
        .values()
        .flatten()
        .filter(|s| s.2 == "running")
        .count() as i64;
    assert_eq!(running, paired);
    assert!(running > 600, "{running}");
    assert_tiles(&states, &bounds, offset);
    // Every state name is one the breakdown knows.
    for s in states.values().flatten() {
        assert!(
            [
                "running",
                "runnable",
                "blocked:io",
                "blocked:lock",
                "blocked:sleep",
                "blocked:other"
            ]
            .contains(&s.2.as_str()),
            "{}",
            s.2
        );
    }
    // The file alternates in/out on every thread: nothing is dropped; its switch-outs carry
    // threadState Unknown (or Terminated, which ends the thread) and no threadBlock.
    let notes = &trace.ranks[0].notes;
    assert_eq!(notes.get("sched_in_without_sched_out"), 0);
    assert_eq!(notes.get("sched_out_without_sched_in"), 0);
    // Off-CPU spans: one per sched-out followed by a sched-in on the thread (none is
    // Terminated). No switch-out tells a cause (threadState Unknown, no threadBlock): the cause
    // comes from the OSRT_API call the thread was in at the switch-out, found here with SQL and
    // mapped by the expectation below (file, device and pipe calls are I/O, semaphore waits a
    // lock; pipe2 and no call tell nothing).
    let conn = Connection::open(&path).unwrap();
    let (off, unknown): (i64, i64) = conn
        .query_row(
            "SELECT count(*), sum(e.name = 'Unknown' AND o.block IS NULL) FROM \
             (SELECT isSchedIn AS i, threadState AS st, threadBlock AS block, lead(isSchedIn) \
             OVER (PARTITION BY globalTid ORDER BY start, rowid) AS next FROM SCHED_EVENTS) o \
             LEFT JOIN ENUM_SAMPLING_THREAD_STATE e ON e.id = o.st WHERE i = 0 AND next != 0",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(off, unknown);
    let mut by_call = conn
        .prepare(
            "SELECT coalesce(s.value, ''), count(*) FROM (SELECT start, globalTid, isSchedIn, \
             lead(isSchedIn) OVER (PARTITION BY globalTid ORDER BY start, rowid) AS next \
             FROM SCHED_EVENTS) o LEFT JOIN OSRT_API a ON a.globalTid = o.globalTid \
             AND a.start <= o.start AND o.start < a.end LEFT JOIN StringIds s ON s.id = a.nameId \
             WHERE o.isSchedIn = 0 AND o.next != 0 GROUP BY 1",
        )
        .unwrap();
    let mut want: BTreeMap<&str, i64> = BTreeMap::new();
    let rows = by_call
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap();
    for row in rows {
        let (call, n) = row.unwrap();
        let state = match call.as_str() {
            "poll" | "write" | "read" | "fopen" | "fopen64" | "fclose" | "ioctl" => "blocked:io",
            "sem_timedwait" => "blocked:lock",
            "" | "pipe2" => "blocked:other",
            other => panic!("a switch-out inside {other}: extend the expectation"),
        };
        *want.entry(state).or_default() += n;
    }
    let mut got: BTreeMap<&str, i64> = BTreeMap::new();
    for s in states.values().flatten().filter(|s| s.2 != "running") {
        *got.entry(s.2.as_str()).or_default() += 1;
    }
    assert_eq!(got, want);
    // The file has switch-outs in I/O calls and in semaphore waits; most have no call.
    assert!(
        want["blocked:io"] > 200 && want["blocked:lock"] > 0,
        "{want:?}"
    );
    assert_eq!(
        running + off,
        states.values().map(Vec::len).sum::<usize>() as i64
    );
}

const G: i64 = 16_777_216 * 42;

/// Threads 42/42, 42/43 and 42/44 of pid 42, rows out of time order in the file:
///
/// - 42: in 100, out 200 (Running: preempted), in 250, out 400 (Interruptible, Mutex),
///   in 500, in 600 (duplicate: the 500 one is dropped), out 700 (Unknown, no block),
///   in 900, out 950 (Terminated), out 990 (after the end: dropped);
/// - 43: out 10 (Uninterruptible, PageIn; first event), in 50, out 80 (NULL state,
///   Nanosleep), in 120 — last event, running after it is not known;
/// - 44: a row without a thread and a row without a direction (both dropped).
fn build_sched(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let rows = [
        (400, 0, 42, "2", "6"),
        (100, 1, 42, "0", "NULL"),
        (200, 0, 42, "1", "NULL"),
        (250, 1, 42, "0", "NULL"),
        (600, 1, 42, "0", "NULL"),
        (500, 1, 42, "0", "NULL"),
        (700, 0, 42, "0", "NULL"),
        (900, 1, 42, "0", "NULL"),
        (950, 0, 42, "5", "NULL"),
        (990, 0, 42, "0", "NULL"),
        (80, 0, 43, "NULL", "4"),
        (10, 0, 43, "3", "21"),
        (50, 1, 43, "0", "NULL"),
        (120, 1, 43, "0", "NULL"),
    ];
    let mut sql = String::from(
        "CREATE TABLE SCHED_EVENTS (start INTEGER NOT NULL, cpu INTEGER NOT NULL,
             isSchedIn INTEGER, globalTid INTEGER, threadState INTEGER, threadBlock INTEGER);
         CREATE TABLE ENUM_SAMPLING_THREAD_STATE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
         INSERT INTO ENUM_SAMPLING_THREAD_STATE VALUES (0, 'Unknown', 'Unknown'),
             (1, 'Running', 'Running'), (2, 'Interruptible', 'Interruptible'),
             (3, 'Uninterruptible', 'Uninterruptible'), (5, 'Terminated', 'Terminated');
         CREATE TABLE ENUM_SCHEDULING_THREAD_BLOCK (id INTEGER PRIMARY KEY, name TEXT,
             label TEXT);
         INSERT INTO ENUM_SCHEDULING_THREAD_BLOCK VALUES (4, 'Nanosleep', 'Nanosleep'),
             (6, 'Mutex', 'Mutex'), (21, 'PageIn', 'PageIn');
         CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);\n",
    );
    for (start, is_in, tid, state, block) in rows {
        sql.push_str(&format!(
            "INSERT INTO SCHED_EVENTS VALUES ({start}, 1, {is_in}, {}, {state}, {block});\n",
            G + tid
        ));
    }
    sql.push_str(&format!(
        "INSERT INTO SCHED_EVENTS VALUES (5, 0, 1, NULL, 0, NULL);
         INSERT INTO SCHED_EVENTS VALUES (6, 0, NULL, {}, 0, NULL);",
        G + 44
    ));
    conn.execute_batch(&sql).unwrap();
}

#[test]
fn nsys_synthetic_sched_events_give_the_states_known_by_construction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sched.sqlite");
    build_sched(&path);
    let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();
    let got = states(&trace);
    let s = |a: i64, b: i64, n: &str| (a, b, n.to_owned());
    let want: StatesByThread = [
        (
            (42, 42),
            vec![
                s(100, 200, "running"),
                s(200, 250, "runnable"),
                s(250, 400, "running"),
                s(400, 500, "blocked:lock"),
                s(600, 700, "running"),
                s(700, 900, "blocked:other"),
                s(900, 950, "running"),
            ],
        ),
        (
            (42, 43),
            vec![
                s(10, 50, "blocked:io"),
                s(50, 80, "running"),
                s(80, 120, "blocked:sleep"),
            ],
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);
    let notes = &trace.ranks[0].notes;
    assert_eq!(notes.get("sched_in_without_sched_out"), 1);
    assert_eq!(notes.get("sched_out_without_sched_in"), 1);
    assert_eq!(notes.get("sched_events_without_thread"), 1);
    assert_eq!(notes.get("sched_events_without_direction"), 1);
    assert_eq!(notes.events_read, 16);
    // The 500 -> 600 duplicate: no span from 500 to 600, the second sched-in starts running.
    assert!(!got[&(42, 42)].iter().any(|x| x.0 == 500));
}

#[test]
fn nsys_sched_events_without_enums_or_columns_still_import() {
    // An export without the ENUM tables and without threadState/threadBlock columns: every
    // off-CPU gap is blocked:other.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE SCHED_EVENTS (start INTEGER, isSchedIn INTEGER, globalTid INTEGER);
         CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
         INSERT INTO SCHED_EVENTS VALUES (10, 1, {g}), (20, 0, {g}), (35, 1, {g}), (40, 0, {g});",
        g = G + 42
    ))
    .unwrap();
    drop(conn);
    let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
    let got = states(&trace);
    assert_eq!(
        got[&(42, 42)],
        vec![
            (10, 20, "running".to_owned()),
            (20, 35, "blocked:other".to_owned()),
            (35, 40, "running".to_owned())
        ]
    );
    assert!(trace.ranks[0].notes.is_empty());
}

/// Copies the real file's `SCHED_EVENTS` (and the enums and thread names) into a new database, keeping each row
/// with probability `keep_per_mille` / 1000 and writing them in a shuffled order (`seed`).
fn real_rows_shuffled(path: &Path, seed: u64, keep_per_mille: u64) {
    let src = Connection::open(real_file()).unwrap();
    let mut rows: Vec<[Option<i64>; 6]> = Vec::new();
    let mut stmt = src
        .prepare(
            "SELECT start, cpu, isSchedIn, globalTid, threadState, threadBlock FROM SCHED_EVENTS",
        )
        .unwrap();
    let mut it = stmt.query([]).unwrap();
    while let Some(r) = it.next().unwrap() {
        rows.push(std::array::from_fn(|i| r.get(i).unwrap()));
    }
    // A small LCG: deterministic per seed, no extra dependency.
    let mut state = seed | 1;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    rows.retain(|_| next() % 1000 < keep_per_mille);
    for i in (1..rows.len()).rev() {
        rows.swap(i, (next() as usize) % (i + 1));
    }
    let mut conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "ATTACH '{}' AS src;
         CREATE TABLE ENUM_SAMPLING_THREAD_STATE AS SELECT * FROM src.ENUM_SAMPLING_THREAD_STATE;
         CREATE TABLE ENUM_SCHEDULING_THREAD_BLOCK AS
             SELECT * FROM src.ENUM_SCHEDULING_THREAD_BLOCK;
         CREATE TABLE ThreadNames AS SELECT * FROM src.ThreadNames;
         CREATE TABLE SCHED_EVENTS AS SELECT * FROM src.SCHED_EVENTS WHERE 0;
         DETACH src;",
        real_file().display()
    ))
    .unwrap();
    let tx = conn.transaction().unwrap();
    for r in &rows {
        tx.execute(
            "INSERT INTO SCHED_EVENTS VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params_from_iter(r.iter()),
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

    /// Subsets of the real rows in any file order: per thread the states never overlap and stay
    /// within its first and last event, `running` spans are the SQL count of sched-ins followed
    /// by a sched-out, and the dropped double sched-ins are the SQL count of sched-ins followed
    /// by a sched-in.
    #[test]
    fn nsys_real_sched_rows_subsets_and_orders(seed in proptest::prelude::any::<u64>(),
                                              keep in 500u64..=1000) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("variant.sqlite");
        real_rows_shuffled(&path, seed, keep);
        let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
        trace.validate().unwrap();
        let states = states(&trace);
        let (bounds, paired) = expected_from_sql(&path);
        let conn = Connection::open(&path).unwrap();
        let double_in: i64 = conn
            .query_row(
                "SELECT count(*) FROM (SELECT isSchedIn AS i, lead(isSchedIn) OVER \
                 (PARTITION BY globalTid ORDER BY start, rowid) AS next FROM SCHED_EVENTS) \
                 WHERE i != 0 AND next != 0",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let offset = trace.clock.sources[0].offset_ns;
        let running = states.values().flatten().filter(|s| s.2 == "running").count() as i64;
        proptest::prop_assert_eq!(running, paired);
        proptest::prop_assert_eq!(
            trace.ranks[0].notes.get("sched_in_without_sched_out") as i64,
            double_in
        );
        for ((_, tid), spans) in &states {
            let (first, last) = bounds[tid];
            for w in spans.windows(2) {
                proptest::prop_assert!(w[0].1 <= w[1].0, "tid {} overlap at {}", tid, w[0].1);
            }
            proptest::prop_assert!(spans[0].0 >= first + offset);
            proptest::prop_assert!(spans.last().unwrap().1 <= last + offset);
        }
    }
}
