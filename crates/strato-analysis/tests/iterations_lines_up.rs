//! `lines_up_with` on real traces: the expectations (module instances, step markers) are
//! counted here from the raw JSON with serde_json, independently of the importer.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::{data, raw};

use serde_json::Value;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::patterns::iterations::{
    attach_lines_up, iterations, Diagnosis, IterationOptions,
};
use strato_io::{import_paths, ImportOptions};

fn count(events: &[Value], pred: impl Fn(&str) -> bool) -> usize {
    events
        .iter()
        .filter(|e| {
            // CPU-side spans only: Kineto mirrors annotations on the GPU timeline.
            e["ph"] == "X"
                && e["cat"] != "gpu_user_annotation"
                && e["name"].as_str().is_some_and(&pred)
        })
        .count()
}

fn report(rel: &str) -> strato_analysis::patterns::iterations::IterationsReport {
    let trace = import_paths(&[data(rel)], &ImportOptions::default()).unwrap();
    let mut r = iterations(&trace, &IterationOptions::default());
    attach_lines_up(&Analyzed::new(&trace), &mut r);
    r
}

fn is_between_finding(d: &Diagnosis) -> bool {
    matches!(
        d,
        Diagnosis::CpuBound { .. } | Diagnosis::CopyBound { .. } | Diagnosis::Irregular { .. }
    )
}

#[test]
fn one_step_inference_loops_are_layers_not_training_iterations() {
    let rel = "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz";
    let events = raw(rel);
    let layers = count(&events, |n| {
        n.strip_prefix("nn.Module: ViTLayer_")
            .is_some_and(|i| i.bytes().all(|b| b.is_ascii_digit()))
    });
    let steps = count(&events, |n| n.starts_with("ProfilerStep#"));
    assert_eq!((layers, steps), (12, 1));
    let r = report(rel);
    let first = &r.sequences[0];
    // The miner found the layers; they line up with the module class, one instance each.
    assert_eq!(first.iterations.len(), layers);
    assert_eq!(first.lines_up_with.as_deref(), Some("ViTLayer"));
    assert_eq!(first.lines_up_kind, Some("module"));
    assert!(matches!(
        first.diagnosis[0],
        Diagnosis::LayersInOneStep { .. }
    ));
    assert!(!first.diagnosis.iter().any(is_between_finding));
}

#[test]
fn training_steps_line_up_with_profiler_steps() {
    let rel = "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz";
    let steps = count(&raw(rel), |n| n.starts_with("ProfilerStep#"));
    let r = report(rel);
    let first = &r.sequences[0];
    assert_eq!(first.iterations.len(), steps);
    assert_eq!(first.lines_up_with.as_deref(), Some("ProfilerStep#*"));
    assert_eq!(first.lines_up_kind, Some("annotation"));
    assert!(!first
        .diagnosis
        .iter()
        .any(|d| matches!(d, Diagnosis::LayersInOneStep { .. })));
}

#[test]
fn a_decode_step_of_graph_replayed_layers_is_not_called_training() {
    // sglang decode: one `step[DECODE ...]` annotation, the 36 decoder layers replayed with no
    // module frames: nothing lines up, but the loop is inside one step.
    let rel = "kineto/tracelens/sglang_Qwen3-8B_decode.json.gz";
    let events = raw(rel);
    assert_eq!(count(&events, |n| n.starts_with("step[")), 1);
    let r = report(rel);
    let first = &r.sequences[0];
    assert_eq!(first.lines_up_with, None);
    assert!(matches!(
        first.diagnosis[0],
        Diagnosis::LayersInOneStep { module: None, .. }
    ));
    assert!(!first.diagnosis.iter().any(is_between_finding));
}

/// Layers inside a loop on a real trace: the B200 eager trace (gpt-oss style, sliding and full
/// attention layers alternate) repeats a pair of decoder layers; the miner finds the pairs, then
/// the layers inside them. Expected: as many layers as calls of each per-layer `aten::linear`
/// shape (counted from the raw JSON; the LM head's single call aside), every one inside one outer
/// iteration, time conserved.
#[test]
fn layers_are_mined_inside_the_loop_that_holds_them() {
    let rel = "kineto/tracelens/b200_eager_trace.json.gz";
    let events = raw(rel);
    let mut per_shape: std::collections::BTreeMap<String, usize> = Default::default();
    for e in &events {
        if e["ph"] == "X" && e["name"] == "aten::linear" {
            *per_shape
                .entry(e["args"]["Input Dims"].to_string())
                .or_default() += 1;
        }
    }
    // The per-layer projections (the LM head runs once, outside the layers).
    let calls: std::collections::BTreeSet<usize> =
        per_shape.values().copied().filter(|&n| n > 1).collect();
    assert_eq!(
        calls.len(),
        1,
        "per-layer linear shapes called equally often: {per_shape:?}"
    );
    let layers = *calls.iter().next().unwrap();
    let r = report(rel);
    let outer = &r.sequences[0];
    let inner: Vec<_> = r
        .sequences
        .iter()
        .filter(|s| s.inside_loop == Some(outer.loop_index) && s.stream == outer.stream)
        .collect();
    assert_eq!(inner.len(), 1, "one nested loop");
    let inner = inner[0];
    assert_eq!(inner.iterations.len(), layers);
    assert!(inner.pattern_len >= strato_analysis::patterns::iterations::NESTED_MIN_LEN);
    assert_eq!(outer.iterations.len() * 2, layers, "pairs of layers");
    for it in &inner.iterations {
        assert!(
            outer
                .iterations
                .iter()
                .any(|o| o.start_ns <= it.start_ns && it.end_ns <= o.end_ns),
            "layer {} crosses an outer boundary",
            it.index
        );
    }
    let total: i64 = inner
        .iterations
        .iter()
        .map(|i| i.duration_ns + i.interval_to_next_ns.unwrap_or(0))
        .sum();
    let last = &inner.iterations[inner.iterations.len() - 1];
    assert_eq!(total, last.end_ns - inner.iterations[0].start_ns);
}

/// Negatives on real traces: a loop of layers (Falconsai: 12 ops per ViT layer) is too short to
/// hold layers, and ResNet-50's training step holds no repeat of at least NESTED_MIN_LEN ops
/// covering NESTED_COVER of it (its bottleneck blocks differ by stage): no nested loop is
/// invented.
#[test]
fn no_nested_loop_where_none_dominates() {
    for rel in [
        "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
        "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
    ] {
        let r = report(rel);
        assert!(
            r.sequences.iter().all(|s| s.inside_loop.is_none()),
            "{rel}: {:?}",
            r.sequences
                .iter()
                .map(|s| (s.loop_index, s.pattern_len, s.iterations.len()))
                .collect::<Vec<_>>()
        );
    }
}
