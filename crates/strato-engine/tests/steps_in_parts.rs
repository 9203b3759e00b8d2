//! `critical-path --step` and `whatif` read in parts ([`Engine::critical_path_steps_in_parts`],
//! [`Engine::whatif_in_parts`]: the input streamed once into a spill, then a few steps at a
//! time) give what the whole trace gives:
//! on every Chrome/Kineto JSON file of `../shared/data`, as a file and as a profile
//! directory, in parts of one step and of the default size; on real files
//! whose events come in another order, with events left out, at random part sizes; on
//! directories of ranks, collectives across ranks included; on partitioned stores, leaf by
//! leaf; and it leaves a profile of several ranks to the whole trace.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::paths::critical_path::{CriticalPath, CriticalPathSettings};
use strato_analysis::paths::whatif::{WhatIf, WhatIfSettings};
use strato_analysis::registry::Analysis;
use strato_engine::registry::{find, Outcome};
use strato_engine::steps::PART_SPANS;
use strato_engine::Engine;

use common::{data, engine, shared_json_files, shuffled_and_thinned};

/// The whole trace's `critical-path --step STEP` JSON (or its error, after the input's name
/// as the registry gives it) of `inputs`.
fn whole(engine: &Engine, inputs: &[PathBuf], step: &str) -> Result<String, String> {
    let analysis = find("critical-path").unwrap();
    let import = analysis.import_options(engine).unwrap();
    let trace = engine.load(inputs, &import).map_err(|e| e.to_string())?;
    analysis
        .run_trace(&trace, &[("step".into(), step.into())])
        .map(|o| o.json())
        .map_err(|e| format!("{}: {e}", inputs[0].display()))
}

/// The same read in parts of about `part` spans: `None` when left to the whole trace.
fn in_parts(
    engine: &Engine,
    inputs: &[PathBuf],
    step: &str,
    part: u64,
) -> Option<Result<String, String>> {
    let analysis = find("critical-path").unwrap();
    let import = analysis.import_options(engine).unwrap();
    let settings = CriticalPathSettings {
        step: step.into(),
        ..CriticalPathSettings::default()
    };
    match engine.critical_path_steps_in_parts(inputs, &import, step, part) {
        Ok(Some(result)) => Some(Ok(Outcome::of::<CriticalPath>(result, settings).json())),
        Ok(None) => None,
        Err(e) => Some(Err(e.to_string())),
    }
}

/// The step numbers a `--step all` JSON lists.
fn numbers(json: &str) -> Vec<u64> {
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["number"].as_u64().unwrap())
        .collect()
}

#[test]
fn every_shared_file_in_parts_equals_the_whole_trace() {
    let engine = engine();
    let files = shared_json_files();
    assert!(files.len() >= 30, "{files:?}");
    let (mut compared, mut with_steps) = (0, 0);
    let store = tempfile::tempdir().unwrap();
    for file in &files {
        let inputs = vec![file.clone()];
        let expected = whole(&engine, &inputs, "all");
        for part in [1, PART_SPANS] {
            let Some(got) = in_parts(&engine, &inputs, "all", part) else {
                continue;
            };
            assert_eq!(got, expected, "{} in parts of {part}", file.display());
            compared += 1;
        }
        let Ok(json) = &expected else { continue };
        // Each step alone, and the file's profile directory.
        let all = numbers(json);
        with_steps += 1;
        for n in all.iter().take(1) {
            let step = n.to_string();
            if let Some(got) = in_parts(&engine, &inputs, &step, 1) {
                assert_eq!(got, whole(&engine, &inputs, &step), "{}", file.display());
            }
        }
        let dir = store.path().join(format!("p{with_steps}"));
        let trace = engine
            .load(&inputs, &engine.import_options(true).unwrap())
            .unwrap();
        if trace.ranks.len() == 1 {
            strato_store::write(&trace, &dir).unwrap();
            let stored = vec![dir.clone()];
            let got = in_parts(&engine, &stored, "all", 1).expect("a profile of one rank");
            assert_eq!(got, whole(&engine, &stored, "all"), "{}", file.display());
        }
    }
    assert!(compared >= 40, "compared {compared}");
    assert!(with_steps >= 15, "files with steps: {with_steps}");
}

#[test]
fn errors_are_the_whole_traces() {
    let engine = engine();
    let file = vec![data("kineto/kineto2021_resnet50_worker0.pt.trace.json.gz")];
    let got = in_parts(&engine, &file, "999", 100).unwrap().unwrap_err();
    assert!(got.contains("no ProfilerStep#999 in the trace"), "{got}");
    // No step at all.
    let file = vec![data("kineto/hta_alexnet_trace.json.gz")];
    if let Some(got) = in_parts(&engine, &file, "all", 100) {
        assert_eq!(got, whole(&engine, &file, "all").map(|_| String::new()));
    }
}

#[test]
fn directories_of_ranks_in_parts_equal_the_whole_job() {
    let engine = engine();
    for (job, with_collectives) in [
        ("kineto/param_dlrm8", true),
        ("kineto/hta_trace_filter", false),
    ] {
        let inputs = vec![data(job)];
        let expected = whole(&engine, &inputs, "all");
        let json = expected.as_ref().unwrap();
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        let instances = value["collectives"]["instances"].as_u64().unwrap_or(0);
        assert!(
            instances > 0 || !with_collectives,
            "{job}: {}",
            value["collectives"]
        );
        for part in [1, 300, PART_SPANS] {
            let got = in_parts(&engine, &inputs, "all", part).expect("rank files");
            assert_eq!(got, expected, "{job} in parts of {part}");
        }
        let n = numbers(json)[0].to_string();
        let got = in_parts(&engine, &inputs, &n, 1).expect("rank files");
        assert_eq!(got, whole(&engine, &inputs, &n), "{job} step {n}");
    }
    // The registry runs it so.
    let registered = find("critical-path").unwrap();
    let values = [("step".to_owned(), "all".to_owned())];
    let inputs = vec![data("kineto/param_dlrm8")];
    let run = registered.run(&engine, &inputs, &values).unwrap().json();
    assert_eq!(Ok(run), whole(&engine, &inputs, "all"));
}

#[test]
fn a_profile_of_several_ranks_is_left_to_the_whole_trace() {
    let engine = engine();
    let trace = engine
        .load(
            &[data("kineto/param_dlrm8")],
            &engine.import_options(true).unwrap(),
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("job");
    strato_store::write(&trace, &profile).unwrap();
    assert!(in_parts(&engine, &[profile], "all", 100).is_none());
}

/// A partitioned store of a directory of ranks, as `strato import --partitioned` writes it
/// (each rank file imported alone, one leaf each).
fn partitioned_store(engine: &Engine, ranks: &str, at: &Path) -> PathBuf {
    let store = at.join("store");
    let mut files: Vec<PathBuf> = std::fs::read_dir(data(ranks))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".json"))
        .collect();
    files.sort();
    for (position, file) in files.iter().enumerate() {
        let trace = engine
            .load(
                std::slice::from_ref(file),
                &engine.import_options(true).unwrap(),
            )
            .unwrap();
        let rank = trace.ranks[0].rank.unwrap_or(position as i64);
        strato_store::partitioned::write_partition(&store, "job", rank, &trace).unwrap();
    }
    store
}

/// A partitioned store is read leaf by leaf (each leaf a rank), collectives across the leaves
/// included, and gives what the whole store gives: `critical-path --step` in parts, and
/// `collectives` rank by rank (stragglers' causes, read again from their leaves, included).
#[test]
fn partitioned_stores_read_leaf_by_leaf_equal_the_whole_store() {
    let engine = engine();
    let dir = tempfile::tempdir().unwrap();
    let store = partitioned_store(&engine, "kineto/param_dlrm8", dir.path());
    let inputs = vec![store];
    assert_eq!(engine.store_leaves(&inputs).map(|l| l.len()), Some(8));
    let expected = whole(&engine, &inputs, "all");
    let value: serde_json::Value = serde_json::from_str(expected.as_ref().unwrap()).unwrap();
    assert!(value["collectives"]["instances"].as_u64().unwrap_or(0) > 0);
    for part in [1, PART_SPANS] {
        let got = in_parts(&engine, &inputs, "all", part).expect("store leaves");
        assert_eq!(got, expected, "in parts of {part}");
    }
    // The same job as its rank files gives.
    let ranks = whole(&engine, &[data("kineto/param_dlrm8")], "all").unwrap();
    let paths_of = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["steps"].clone()
    };
    assert_eq!(paths_of(&ranks), paths_of(expected.as_ref().unwrap()));

    // Collectives: the registry's rank-by-rank opening against the whole store's trace.
    let collectives = find("collectives").unwrap();
    let import = collectives.import_options(&engine).unwrap();
    let trace = engine.load(&inputs, &import).unwrap();
    let whole_store = collectives.run_trace(&trace, &[]).unwrap().json();
    drop(trace);
    let by_leaf = engine
        .collectives_rank_by_rank(&inputs, &import, &Default::default())
        .unwrap()
        .expect("read leaf by leaf");
    assert!(!by_leaf.stragglers.is_empty(), "DLRM has a straggler");
    let run = collectives.run(&engine, &inputs, &[]).unwrap().json();
    assert_eq!(run, whole_store);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Events in another order, some left out, parts of any size: the same paths and the same
    /// what-if replay as the whole trace of the same file.
    #[test]
    fn reordered_and_thinned_files_in_parts_equal_the_whole_trace(
        which in 0usize..3,
        seed in any::<u64>(),
        keep_per_mille in 800u32..=1000,
        part in 1u64..5_000,
    ) {
        let rel = [
            "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
            "kineto/hta_df_index_resolver.json.gz",
            "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz",
        ][which];
        let dir = tempfile::tempdir().unwrap();
        // Step annotations stay, so that the file keeps steps.
        let step = |e: &serde_json::Value| {
            e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep#"))
        };
        let path = shuffled_and_thinned(rel, seed, keep_per_mille, step, dir.path());
        let inputs = vec![path];
        let engine = engine();
        let expected = whole(&engine, &inputs, "all");
        let got = in_parts(&engine, &inputs, "all", part).expect("one rank");
        prop_assert_eq!(got, expected);
        // And the what-if replay of the same file, with every kind of change.
        let scaled = &whatif_settings()[1];
        let expected = whatif_whole(&engine, &inputs, scaled);
        let got = whatif_in_parts(&engine, &inputs, scaled, part).expect("one rank");
        prop_assert_eq!(got, expected);
    }
}

/// `whatif` with `settings` on the whole trace of `inputs` (its JSON, or its error after the
/// input's name as the registry gives it).
fn whatif_whole(
    engine: &Engine,
    inputs: &[PathBuf],
    settings: &WhatIfSettings,
) -> Result<String, String> {
    let import = find("whatif").unwrap().import_options(engine).unwrap();
    let trace = engine.load(inputs, &import).map_err(|e| e.to_string())?;
    WhatIf::run(&Analyzed::new(&trace), settings)
        .map(|result| Outcome::of::<WhatIf>(result, settings.clone()).json())
        .map_err(|e| format!("{}: {e}", inputs[0].display()))
}

/// The same read in parts of about `part` spans: `None` when left to the whole trace.
fn whatif_in_parts(
    engine: &Engine,
    inputs: &[PathBuf],
    settings: &WhatIfSettings,
    part: u64,
) -> Option<Result<String, String>> {
    let import = find("whatif").unwrap().import_options(engine).unwrap();
    match engine.whatif_in_parts(inputs, &import, settings, part) {
        Ok(Some(result)) => Some(Ok(Outcome::of::<WhatIf>(result, settings.clone()).json())),
        Ok(None) => None,
        Err(e) => Some(Err(e.to_string())),
    }
}

/// The what-if settings the tests try: none (the replay alone); every kind of change at once,
/// module calls included (classes in the shared traces); each whole-job change alone; and
/// steps read across the whole trace.
fn whatif_settings() -> Vec<WhatIfSettings> {
    let scaled = WhatIfSettings {
        scale: [
            "kernel:gemm=0.5",
            "op:aten::conv2d=0.5",
            "module:Conv2d=0.5",
            "module:Linear=0.25",
            "cpu:aten::to=0.5",
            "category:copy=0",
        ]
        .map(String::from)
        .to_vec(),
        ..WhatIfSettings::default()
    };
    vec![
        WhatIfSettings::default(),
        scaled,
        WhatIfSettings {
            no_sync: "all".into(),
            overlap_comm: true,
            ..WhatIfSettings::default()
        },
        WhatIfSettings {
            even_straggler: true,
            link_bw: Some(2.0),
            overlap_copies: true,
            graph_launch: "all".into(),
            ..WhatIfSettings::default()
        },
        // The steps across the whole trace (read back whole from the spill; a file without
        // steps is the same error).
        WhatIfSettings {
            across_steps: true,
            no_sync: "all".into(),
            scale: vec!["kernel:gemm=0.5".into()],
            ..WhatIfSettings::default()
        },
    ]
}

/// `whatif` read in parts gives what the whole trace gives, window for window, on every
/// shared Chrome/Kineto file with steps (parts of one step and of the default size, and each
/// step alone), with every kind of change; files without steps are read back whole from the
/// spill (one window), files of several ranks are left to the whole trace.
#[test]
fn whatif_in_parts_equals_the_whole_trace_on_every_shared_file() {
    let engine = engine();
    let files = shared_json_files();
    let settings = whatif_settings();
    let (mut compared, mut left, mut modules_matched, mut whole_windows) = (0, 0, 0, 0);
    for file in &files {
        let inputs = vec![file.clone()];
        for (k, setting) in settings.iter().enumerate() {
            let expected = whatif_whole(&engine, &inputs, setting);
            // The other settings on the default part size only: the time of the suite.
            let parts: &[u64] = if k == 1 {
                &[1, PART_SPANS]
            } else {
                &[PART_SPANS]
            };
            for &part in parts {
                let Some(got) = whatif_in_parts(&engine, &inputs, setting, part) else {
                    left += 1;
                    continue;
                };
                assert_eq!(
                    got,
                    expected,
                    "{} {setting:?} in parts of {part}",
                    file.display()
                );
                compared += 1;
                let v: serde_json::Value =
                    serde_json::from_str(got.as_deref().unwrap_or("{}")).unwrap();
                if v["replay"]["steps"][0]["step"] == "whole trace" {
                    whole_windows += 1;
                }
                if k == 1 && part == 1 {
                    let v: serde_json::Value = serde_json::from_str(&got.unwrap()).unwrap();
                    let changes = v["whatif"]["changes"].as_array().unwrap();
                    modules_matched += changes
                        .iter()
                        .filter(|c| c["change"].as_str().unwrap().starts_with("module:"))
                        .filter(|c| c["matched_ops"].as_u64().unwrap() > 0)
                        .count();
                }
            }
        }
        // One step alone, and a step the file lacks (the whole trace's error).
        let Some(Ok(all)) = whatif_in_parts(&engine, &inputs, &WhatIfSettings::default(), 1) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&all).unwrap();
        // (A file whose steps have no graph has no window.)
        let Some(first) = v["replay"]["steps"][0]["number"].as_u64() else {
            continue;
        };
        for step in [first.to_string(), "987654".to_owned(), "x".to_owned()] {
            let one = WhatIfSettings {
                step,
                ..WhatIfSettings::default()
            };
            let got = whatif_in_parts(&engine, &inputs, &one, 1).expect("a file with steps");
            assert_eq!(
                got,
                whatif_whole(&engine, &inputs, &one),
                "{}",
                file.display()
            );
        }
    }
    assert!(compared >= 60, "compared {compared}");
    assert!(
        left >= 4,
        "files of several ranks left to the whole trace: {left}"
    );
    assert!(
        whole_windows >= 1,
        "files without steps read back whole from the spill: {whole_windows}"
    );
    assert!(modules_matched >= 1, "no module: change matched anything");
}

/// `whatif` over directories of ranks and a partitioned store, read in parts, gives what the
/// whole job gives (collectives matched across ranks; the straggler and link changes), and
/// the registry reads them so.
#[test]
fn whatif_over_ranks_in_parts_equals_the_whole_job() {
    let engine = engine();
    let dir = tempfile::tempdir().unwrap();
    let store = partitioned_store(&engine, "kineto/param_dlrm8", dir.path());
    for inputs in [
        vec![data("kineto/param_dlrm8")],
        vec![data("kineto/hta_trace_filter")],
        vec![store],
    ] {
        for setting in whatif_settings() {
            let expected = whatif_whole(&engine, &inputs, &setting);
            assert!(expected.is_ok(), "{expected:?}");
            for part in [1, 300, PART_SPANS] {
                let got = whatif_in_parts(&engine, &inputs, &setting, part).expect("ranks");
                assert_eq!(got, expected, "{inputs:?} {setting:?} in parts of {part}");
            }
        }
    }
    let registered = find("whatif").unwrap();
    let inputs = vec![data("kineto/param_dlrm8")];
    let run = registered.run(&engine, &inputs, &[]).unwrap().json();
    assert_eq!(
        Ok(run),
        whatif_whole(&engine, &inputs, &WhatIfSettings::default())
    );
}
