//! The order a file lists its events in is not part of what it says: every registered analysis
//! gives the same answer, in JSON and in text, on a real file and on the same file with its
//! events reversed or shuffled, and on a job whose every rank file is reversed.
//!
//! The files are chosen for their spans of the same extent on one thread, which times alone
//! cannot nest (traces in microseconds: `aten::to` and the `aten::_to_copy` it calls,
//! `aten::item` and `aten::_local_scalar_dense`): the DLRM ranks (57-84 such pairs each), HTA's
//! sampled rank (24), AlexNet (17), and TensorFlow's trace viewer file (1,350, with no ids).
//! Which span encloses which comes from [`strato_trace::Span::same_extent_order`], not from
//! the file's order.
//!
//! Left out of the comparison: `kernel_span` in `collectives` and `span` in `tree`'s chains,
//! which are indexes in the trace, and so follow the file's order by definition; and `tree` on
//! the TensorFlow file, whose name scopes of the same extent (`replica_4` and
//! `bert_span_labeler`) carry no id: nothing but the file's order says which encloses which.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{data, document, engine};
use proptest::prelude::*;
use strato_engine::registry::ANALYSES;

/// Every registered analysis on `inputs`: (name, JSON without the fields named above, text).
fn answers(inputs: &[PathBuf]) -> Vec<(&'static str, serde_json::Value, String)> {
    let engine = engine();
    ANALYSES
        .iter()
        .map(|analysis| {
            let outcome = analysis
                .run(&engine, inputs, &[])
                .unwrap_or_else(|e| panic!("{} on {}: {e}", analysis.name, inputs[0].display()));
            let mut json: serde_json::Value = serde_json::from_str(&outcome.json()).unwrap();
            drop_trace_indexes(&mut json);
            (analysis.name, json, outcome.text())
        })
        .collect()
}

/// Removes `kernel_span` and `span` (indexes in the trace) wherever they are.
fn drop_trace_indexes(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("kernel_span");
            map.remove("span");
            map.values_mut().for_each(drop_trace_indexes);
        }
        serde_json::Value::Array(list) => list.iter_mut().for_each(drop_trace_indexes),
        _ => {}
    }
}

/// The shared gzipped file `rel` written to `path` with its events in `order`'s order
/// (`None`: as shipped).
fn write_reordered(rel: &str, path: &Path, order: Option<Order>) {
    let mut doc = document(rel);
    let events = doc["traceEvents"].as_array_mut().unwrap();
    match order {
        None => {}
        Some(Order::Reversed) => events.reverse(),
        Some(Order::Shuffled(seed)) => fastrand::Rng::with_seed(seed).shuffle(events),
    }
    std::fs::write(path, serde_json::to_vec(&doc).unwrap()).unwrap();
}

#[derive(Debug, Clone, Copy)]
enum Order {
    Reversed,
    Shuffled(u64),
}

/// Asserts that two lists of answers agree, naming the first analysis that does not.
fn assert_same(
    shipped: &[(&'static str, serde_json::Value, String)],
    reordered: &[(&'static str, serde_json::Value, String)],
    what: &str,
) -> Result<(), TestCaseError> {
    for ((name, json, text), (_, json_b, text_b)) in shipped.iter().zip(reordered) {
        if *name == "tree" && what.starts_with("tf/") {
            continue;
        }
        prop_assert!(json == json_b, "{name} --json differs on {what}");
        prop_assert_eq!(text, text_b, "{} (text) differs on {}", name, what);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn a_files_event_order_changes_no_analysis(
        which in 0usize..4,
        reversed in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let rel = [
            "kineto/param_dlrm8/worker3_step_12.1694128201557.pt.trace.json.gz",
            "kineto/hta_trace_filter/sampled_rank-0.json.gz",
            "kineto/hta_alexnet_trace.json.gz",
            "tf/GPU-multi-worker.trace_viewer.json.gz",
        ][which];
        let order = if reversed { Order::Reversed } else { Order::Shuffled(seed) };
        // The same path for both, so that no answer differs by the name of its source.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        write_reordered(rel, &path, None);
        let shipped = answers(std::slice::from_ref(&path));
        write_reordered(rel, &path, Some(order));
        let reordered = answers(std::slice::from_ref(&path));
        assert_same(&shipped, &reordered, &format!("{rel}, {order:?}"))?;
    }
}

/// The eight DLRM ranks, each file reversed: the cross-rank analyses (collectives, the critical
/// path across ranks, advise's stragglers) too.
#[test]
fn a_job_whose_rank_files_are_reversed_gives_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let ranks: Vec<String> = std::fs::read_dir(data("kineto/param_dlrm8"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ranks.len(), 8);
    let write_all = |order: Option<Order>| {
        for name in &ranks {
            let target = dir.path().join(name.trim_end_matches(".gz"));
            write_reordered(&format!("kineto/param_dlrm8/{name}"), &target, order);
        }
    };
    let inputs = vec![dir.path().to_owned()];
    write_all(None);
    let shipped = answers(&inputs);
    write_all(Some(Order::Reversed));
    let reversed = answers(&inputs);
    assert_same(&shipped, &reversed, "the DLRM job reversed").unwrap();
}
