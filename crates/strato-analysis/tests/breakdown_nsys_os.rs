//! The breakdown's `thread_state` key on an Nsight Systems export with `SCHED_EVENTS`
//! (imported as OS-level thread-state spans, `strato_io::nsys`): rows still sum to the
//! window, and the time per state equals the annotated thread's state spans clipped to the
//! window, computed here from the spans independently of the breakdown's sweep.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::breakdown::{breakdown, BreakdownOptions, THREAD_STATE_CATEGORY};
use strato_io::{import_paths, ImportOptions};

#[test]
fn nsys_sched_events_split_breakdown_rows_by_thread_state() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nsys/pipit_cloverleaf_cuda.sqlite");
    let trace = import_paths(&[path], &ImportOptions::default()).unwrap();
    let analyzed = Analyzed::new(&trace);
    let report = breakdown(&analyzed, &BreakdownOptions::default());
    assert_eq!(report.processes.len(), 1);
    let p = &report.processes[0];
    let scope = &analyzed.scopes().processes[0];
    let annotated = scope.annotated.unwrap();

    // Conservation: rows sum to the window.
    let sum: i64 = p.rows.iter().map(|r| r.time_ns).sum();
    assert_eq!(sum, p.window_ns);
    assert_eq!(p.window_ns, p.window_end_ns - p.window_start_ns);

    // Expected time per state: the annotated thread's thread-state spans (they tile the
    // thread, no overlap: checked in strato-io's tests) clipped to the window; the rest of the
    // window is null.
    let mut expected: BTreeMap<Option<String>, i64> = BTreeMap::new();
    let mut covered = 0;
    for s in &trace.spans {
        if s.track != annotated || trace.str(s.category) != THREAD_STATE_CATEGORY {
            continue;
        }
        let (from, to) = (s.start.max(p.window_start_ns), s.end.min(p.window_end_ns));
        if to > from {
            *expected
                .entry(Some(trace.str(s.name).to_owned()))
                .or_default() += to - from;
            covered += to - from;
        }
    }
    if p.window_ns > covered {
        expected.insert(None, p.window_ns - covered);
    }
    let mut got: BTreeMap<Option<String>, i64> = BTreeMap::new();
    for r in &p.rows {
        assert!(!r.thread_state.is_absent(), "every row has the key");
        *got.entry(r.thread_state.as_str().map(str::to_owned))
            .or_default() += r.time_ns;
    }
    assert_eq!(got, expected);
    // The file's switch-outs give no cause: the thread is running or blocked:other.
    assert!(got.get(&Some("running".into())).is_some_and(|&t| t > 0));
    assert!(got
        .get(&Some("blocked:other".into()))
        .is_some_and(|&t| t > 0));

    // The JSON rows carry "thread_state".
    let json = serde_json::to_value(p).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r.get("thread_state").is_some()));
}
