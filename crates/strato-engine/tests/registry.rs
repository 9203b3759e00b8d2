//! Every registered analysis (`strato_engine::registry`) on real jobs and files: run the
//! leanest way the inputs allow (rank file by rank file, each imported, analysed and dropped
//! and the parts merged; fed while a single file streams; its own opening) it gives what it
//! gives over the whole input opened at once; run twice, the same bytes.

use std::path::PathBuf;
use std::sync::Arc;

use strato_engine::registry::{OptionValues, Outcome, Read, Registered, ANALYSES};
use strato_engine::{Engine, OpenOptions, Quiet};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// `analysis` with option `values` over the whole of `inputs` opened at once: what every
/// leaner reading must give.
fn at_once(
    engine: &Engine,
    analysis: &Registered,
    inputs: &[PathBuf],
    values: &OptionValues,
) -> Outcome {
    let options = analysis.import_options(engine).expect("options");
    let whole = engine.load(inputs, &options).expect("opens");
    analysis.run_trace(&whole, values).expect("runs")
}

/// `got` is `expected` in JSON, text and the analysis's own CSV (`what` names the case).
fn assert_same(got: &Outcome, expected: &Outcome, what: &str) {
    assert_eq!(got.json(), expected.json(), "{what}");
    assert_eq!(got.text(), expected.text(), "{what}");
    assert_eq!(got.own_csv(false), expected.own_csv(false), "{what}");
}

#[test]
fn rank_by_rank_equals_the_whole_job() {
    let engine = Engine::new(OpenOptions::default(), Arc::new(Quiet));
    // Two rank directories (rank by rank, collectives' own opening) and a single file
    // (streamed by the analyses that stream).
    for job in [
        "kineto/param_dlrm8",
        "kineto/hta_trace_filter",
        "kineto/hta_alexnet_trace.json.gz",
    ] {
        let inputs = vec![data(job)];
        for analysis in ANALYSES {
            let streamed = analysis.run(&engine, &inputs, &[]).expect("runs");
            let expected = at_once(&engine, analysis, &inputs, &[]);
            assert_same(&streamed, &expected, &format!("{} on {job}", analysis.name));
            let nothing_to_merge = ["memory", "modules"].contains(&analysis.name);
            if analysis.rank_by_rank && job.ends_with("param_dlrm8") && !nothing_to_merge {
                // The merge is what is checked here: it had rows to merge (memory, modules:
                // the DLRM ranks have no allocation events and no module calls, see the test
                // below).
                for table in analysis.tables {
                    assert!(
                        streamed.batch(table).num_rows() > 0,
                        "{} on {job}: table {} is empty",
                        analysis.name,
                        table.name
                    );
                }
            }
            let again = analysis.run(&engine, &inputs, &[]).expect("runs");
            assert_eq!(again.json(), streamed.json());
        }
    }
}

/// A job of the real single-GPU traces `names` (under `kineto/tracelens`), one rank file each
/// (`rank0.json.gz`, ...), in a temporary directory.
#[allow(clippy::unwrap_used)] // a test helper: a panic is the failure report
fn tracelens_ranks(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (k, name) in names.iter().enumerate() {
        std::fs::copy(
            data(&format!("kineto/tracelens/{name}")),
            dir.path().join(format!("rank{k}.json.gz")),
        )
        .unwrap();
    }
    dir
}

/// The analyses that read rank files one at a time, on a job whose ranks have allocation
/// events, copies and module calls (two real single-GPU traces of one model, on H100 and MI300,
/// as two rank files): the merge gives what the whole job gives, with rows in every table.
#[test]
fn rank_by_rank_with_allocation_events_equals_the_whole_job() {
    let engine = Engine::new(OpenOptions::default(), Arc::new(Quiet));
    let dir = tracelens_ranks(&[
        "h100_Falconsai_nsfw_image_detection.json.gz",
        "mi300_Falconsai_nsfw_image_detection.json.gz",
    ]);
    let inputs = vec![dir.path().to_path_buf()];
    let mut merged = 0;
    for analysis in ANALYSES.iter().filter(|a| a.rank_by_rank) {
        let by_rank = analysis.run(&engine, &inputs, &[]).expect("runs");
        let expected = at_once(&engine, analysis, &inputs, &[]);
        assert_same(&by_rank, &expected, analysis.name);
        if analysis.name == "memory" {
            // The devices' allocation series (the copies: the DLRM job above).
            let table = &analysis.tables[0];
            assert_eq!(table.name, "memory");
            assert!(
                by_rank.batch(table).num_rows() >= 2,
                "memory: no device rows"
            );
            merged += 1;
        }
        if analysis.name == "modules" {
            // Both ranks' module calls in one tree.
            let table = &analysis.tables[0];
            assert!(
                by_rank.batch(table).num_rows() >= 2,
                "modules: no class rows"
            );
            let v: serde_json::Value = serde_json::from_str(&by_rank.json()).unwrap();
            let one: serde_json::Value = serde_json::from_str(
                &analysis
                    .run(
                        &engine,
                        &[data(
                            "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
                        )],
                        &[],
                    )
                    .expect("runs")
                    .json(),
            )
            .unwrap();
            assert!(
                v["module_calls"].as_u64().unwrap() > one["module_calls"].as_u64().unwrap(),
                "modules: the second rank's calls merged"
            );
            merged += 1;
        }
    }
    assert_eq!(merged, 2, "memory and modules read rank by rank");
    // Options that change what each rank's rows hold: the breakdown's steps kept apart, the
    // loops checked against the steps.
    for (name, option) in [("breakdown", "per_step"), ("iterations", "check_steps")] {
        let analysis = ANALYSES.iter().find(|a| a.name == name).unwrap();
        assert!(analysis.rank_by_rank, "{name}");
        let values = [(option.to_owned(), "true".to_owned())];
        for job in [dir.path().to_path_buf(), data("kineto/param_dlrm8")] {
            let inputs = vec![job];
            let by_rank = analysis.run(&engine, &inputs, &values).expect("runs");
            let expected = at_once(&engine, analysis, &inputs, &values);
            assert_eq!(by_rank.json(), expected.json(), "{name} --{option}");
            assert_eq!(by_rank.text(), expected.text(), "{name} --{option}");
        }
    }
}

/// `modules` rank by rank on two different models as two rank files (a ResNet with activation
/// checkpointing, whose recomputed calls run under backward, and a ViT): one tree, equal to the
/// whole job's. Two ranks of one model would hide a call given the parent of the same position
/// in the other rank.
#[test]
fn modules_of_two_models_rank_by_rank_equal_the_whole_job() {
    let engine = Engine::new(OpenOptions::default(), Arc::new(Quiet));
    let dir = tracelens_ranks(&[
        "mi300_resnet_act_checkpoint.json.gz",
        "h100_Falconsai_nsfw_image_detection.json.gz",
    ]);
    let inputs = vec![dir.path().to_path_buf()];
    let analysis = ANALYSES.iter().find(|a| a.name == "modules").unwrap();
    assert!(analysis.rank_by_rank);
    let by_rank = analysis.run(&engine, &inputs, &[]).expect("runs");
    assert_same(
        &by_rank,
        &at_once(&engine, analysis, &inputs, &[]),
        "modules",
    );
    let v: serde_json::Value = serde_json::from_str(&by_rank.json()).unwrap();
    assert!(
        v["recompute"]["calls"].as_u64().unwrap() > 0,
        "recomputed calls"
    );
    assert!(
        v["module_calls"].as_u64().unwrap() > 450,
        "both ranks' calls"
    );
}

/// The analyses that stream and do not read a job rank by rank stream a job file after file
/// ([`Engine::stream_job`]): on two different models as two rank files (their strings and
/// tracks differ, so each file's ids are renumbered into the job's) they give what they give
/// over the whole job.
#[test]
fn streams_of_a_job_of_two_models_equal_the_whole_job() {
    let engine = Engine::new(OpenOptions::default(), Arc::new(Quiet));
    let dir = tracelens_ranks(&[
        "mi300_resnet_act_checkpoint.json.gz",
        "h100_Falconsai_nsfw_image_detection.json.gz",
    ]);
    let inputs = vec![dir.path().to_path_buf()];
    // The job streams (else the analyses below would be opened whole and compare nothing).
    let files = engine.rank_files(&inputs).expect("rank files");
    let mut batches = 0;
    let mut count = |_: &mut strato_trace::Trace| {
        batches += 1;
        Ok(())
    };
    let tables = engine
        .stream_job(&files, &strato_io::ImportOptions::default(), &mut count)
        .expect("reads");
    assert!(tables.is_some_and(|t| t.ranks.len() == 2) && batches > 2);
    for name in ["ops", "layers", "roofline"] {
        let analysis = ANALYSES.iter().find(|a| a.name == name).unwrap();
        assert!(!analysis.rank_by_rank, "{name}");
        let streamed = analysis.run(&engine, &inputs, &[]).expect("runs");
        assert_eq!(streamed.read(), Read::JobStreamed, "{name}");
        assert_same(&streamed, &at_once(&engine, analysis, &inputs, &[]), name);
    }
}

/// Every registered comparison: run from paths (A opened, reduced to its side and dropped
/// before B is opened) it gives what it gives over both profiles open at once, in JSON, text
/// (plain and on a coloured, narrow terminal) and every table, with and without each option
/// that changes its kind.
#[test]
fn comparisons_from_paths_equal_comparisons_of_open_profiles() {
    use strato_analysis::analyzed::Analyzed;
    use strato_analysis::text::terminal::Terminal;
    use strato_engine::comparisons::COMPARISONS;

    let engine = Engine::new(OpenOptions::default(), Arc::new(Quiet));
    let pairs = [
        (
            "kineto/hta_trace_compare/base.json.gz",
            "kineto/hta_trace_compare/test.json.gz",
        ),
        (
            "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
            "kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz",
        ),
        ("kineto/param_dlrm8", "kineto/hta_alexnet_trace.json.gz"),
    ];
    let narrow = Terminal {
        color: true,
        width: 60,
    };
    for comparison in COMPARISONS {
        let import = engine.import_options(false).expect("options");
        for (a, b) in pairs {
            let (pa, pb) = (data(a), data(b));
            let ta = engine
                .load(std::slice::from_ref(&pa), &import)
                .expect("opens A");
            let tb = engine
                .load(std::slice::from_ref(&pb), &import)
                .expect("opens B");
            let (la, lb) = (pa.display().to_string(), pb.display().to_string());
            for options in [
                Vec::new(),
                vec![("by_op".to_owned(), "true".to_owned())],
                vec![("per_step".to_owned(), "true".to_owned())],
            ] {
                let from_paths = comparison.run(&engine, &pa, &pb, &options).expect("runs");
                let open = comparison
                    .run_analyzed(
                        (&la, &Analyzed::new(&ta)),
                        (&lb, &Analyzed::new(&tb)),
                        &options,
                    )
                    .expect("runs");
                let what = format!("{} {a} {b} {options:?}", comparison.name);
                assert_eq!(from_paths.json(), open.json(), "{what}");
                assert_eq!(from_paths.text(), open.text(), "{what}");
                assert_eq!(from_paths.text_on(&narrow), open.text_on(&narrow), "{what}");
                if options.is_empty() {
                    // The run-to-run text paints its headers when the terminal colours.
                    assert!(
                        open.text_on(&narrow).contains("\x1b["),
                        "{what}: not coloured"
                    );
                    assert!(
                        !open.text().contains("\x1b["),
                        "{what}: coloured on no terminal"
                    );
                }
                for table in comparison.tables {
                    assert_eq!(
                        from_paths.batch(table),
                        open.batch(table),
                        "{what} {}",
                        table.name
                    );
                }
            }
        }
    }
}
