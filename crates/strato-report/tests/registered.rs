//! The report's sections show what the registered analyses give (`strato NAME --json`): on real
//! jobs and files, each section's result serialises to the same JSON as the registered
//! analysis run on its own over the same trace. The advice is the case composed differently
//! (its estimated gains come from the report's one pass over the step graphs, with the
//! Distributed section's collectives), so that is where a drift would show first.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use strato_analysis::analyzed::Analyzed;
use strato_engine::registry::find;
use strato_engine::{Engine, OpenOptions, Quiet};
use strato_report::{ReportInput, ReportOptions};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// `value` as JSON, read back from its text as [`registered_json`] reads the command's (the
/// parser's last bit of a float is then the same on both sides).
fn json_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::from_str(&serde_json::to_string(value).expect("serialises")).expect("JSON")
}

/// What `strato NAME --json` gives over `analyzed`'s trace (default options), run on its own
/// context (nothing shared with the report's).
fn registered_json(name: &str, trace: &strato_trace::Trace) -> Value {
    let outcome = find(name)
        .unwrap_or_else(|| panic!("{name} is registered"))
        .run_analyzed(&Analyzed::new(trace), &[])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_json::from_str(&outcome.json()).expect("JSON")
}

/// Where `a` and `b` first differ (a JSON path and both values), `None` when they are equal.
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (u, v) = (x.get(k), y.get(k));
                match (u, v) {
                    (Some(u), Some(v)) => first_difference(u, v, format!("{at}.{k}")),
                    _ => Some(format!("{at}.{k}: {u:?} against {v:?}")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => (x.iter().zip(y))
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {} against {}", short(a), short(b))),
    }
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[test]
fn each_section_is_its_registered_analysis() {
    let engine = Engine::new(OpenOptions::default(), Arc::new(Quiet));
    let import = engine.import_options(true).expect("options");
    let mut checked = 0;
    for input in [
        // 8 ranks: collectives matched, cross-rank advice.
        "kineto/param_dlrm8",
        // One step of one rank: the mined loops are layers inside it.
        "kineto/param_dlrm8/worker4_step_12.1694128201547.pt.trace.json.gz",
        "kineto/hta_alexnet_trace.json.gz",
        "kineto/tracelens/sglang_Qwen3-8B_decode.json.gz",
    ] {
        let path = data(input);
        if !path.exists() {
            continue;
        }
        let trace = engine.load(&[path], &import).expect("opens");
        let options = ReportOptions {
            title: input.into(),
            generator: "test".into(),
            parallel: true,
        };
        let report = ReportInput::from_analyzed(&Analyzed::new(&trace), &options, &mut ());
        let sections = [
            ("info", json_of(&report.info)),
            (
                "breakdown",
                json_of(report.breakdown.as_ref().expect(input)),
            ),
            ("util", json_of(report.util.as_ref().expect(input))),
            ("layers", json_of(report.layers.as_ref().expect(input))),
            ("modules", json_of(report.modules.as_ref().expect(input))),
            (
                "iterations",
                json_of(report.iterations.as_ref().expect(input)),
            ),
            (
                "collectives",
                json_of(report.collectives.as_ref().expect(input)),
            ),
            ("advise", json_of(report.advice.as_ref().expect(input))),
        ];
        for (name, shown) in sections {
            let expected = registered_json(name, &trace);
            if let Some(at) = first_difference(&shown, &expected, String::new()) {
                panic!("{name} on {input}: the report's section is not `strato {name}`'s: {at}");
            }
        }
        checked += 1;
    }
    assert!(checked > 0 || !data("kineto").exists(), "no input checked");
}
