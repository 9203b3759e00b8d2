//! The breakdown's `thread_state` key on an Nsight Systems export with `SCHED_EVENTS`
//! (imported as OS-level thread-state spans, `strato_io::nsys`): rows still sum to the
//! window, and the time per state equals the annotated thread's state spans clipped to the
//! window, computed here from the spans independently of the breakdown's sweep.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::breakdown::{breakdown, BreakdownOptions, THREAD_STATE_CATEGORY};
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
    // The file's switch-outs name no cause; those outside an I/O or lock call (OSRT_API) stay
    // blocked:other.
    assert!(got.get(&Some("running".into())).is_some_and(|&t| t > 0));
    assert!(got
        .get(&Some("blocked:other".into()))
        .is_some_and(|&t| t > 0));

    // The JSON rows carry "thread_state".
    let json = serde_json::to_value(p).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r.get("thread_state").is_some()));
}

#[test]
fn nsys_thread_states_are_no_parents_in_the_hierarchy() {
    // The same file with and without its SCHED_EVENTS: every other span keeps its parent, and
    // the breakdown's transitions (which read the parents) are the same.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nsys/pipit_cloverleaf_cuda.sqlite");
    let with = import_paths(&[path], &ImportOptions::default()).unwrap();
    let mut without = with.clone();
    let keep: Vec<bool> = with
        .spans
        .iter()
        .map(|s| with.str(s.category) != THREAD_STATE_CATEGORY)
        .collect();
    let mut k = keep.iter();
    without.spans.retain(|_| *k.next().unwrap());
    // Flows point at runtime calls and device ops, imported before the thread states, so their
    // span indexes stay valid; map the other indexes.
    let mut new_index = vec![None; keep.len()];
    let mut n = 0u32;
    for (i, &k) in keep.iter().enumerate() {
        if k {
            new_index[i] = Some(n);
            n += 1;
        }
    }
    let first_state = keep.iter().position(|k| !k).unwrap();
    assert!(with.flows.iter().all(|f| [&f.from, &f.to].iter().all(|e| e
        .as_ref()
        .and_then(|e| e.span)
        .is_none_or(|s| (s.0 as usize) < first_state))));
    let a = Analyzed::new(&with);
    let b = Analyzed::new(&without);
    let (ha, hb) = (a.hierarchy(), b.hierarchy());
    for (i, &k) in keep.iter().enumerate() {
        if k {
            let mapped = ha.parent[i].map(|p| new_index[p as usize].expect("parent is no state"));
            assert_eq!(
                mapped,
                hb.parent[new_index[i].unwrap() as usize],
                "span {i}"
            );
        } else {
            assert_eq!(ha.parent[i], None);
        }
    }
    let ta = &breakdown(&a, &BreakdownOptions::default()).processes[0].transitions;
    let tb = &breakdown(&b, &BreakdownOptions::default()).processes[0].transitions;
    assert_eq!(ta, tb);
}
