//! The engine on real traces: every input kind opens through `Engine::open` to the same
//! events (a file, the directory of its ranks, its profile directory, its partitioned store),
//! the streamed and rank-by-rank ways see what the whole way sees, options belong to an
//! engine and not to the process, and the listener hears what the user would be told.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use strato_engine::{Engine, EngineError, Listener, OpenOptions, Quiet};
use strato_trace::Trace;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

fn quiet(options: OpenOptions) -> Engine {
    Engine::new(options, Arc::new(Quiet))
}

/// What an analysis could tell apart: per rank, its source's events in order.
fn events_by_rank(trace: &Trace) -> Vec<(Option<i64>, usize, i64, i64, usize)> {
    let mut out = Vec::new();
    for (index, rank) in trace.ranks.iter().enumerate() {
        let mine = |t: &strato_trace::TrackId| trace.tracks[t.0 as usize].rank.0 as usize == index;
        let spans: Vec<_> = trace.spans.iter().filter(|s| mine(&s.track)).collect();
        out.push((
            rank.rank,
            spans.len(),
            spans.iter().map(|s| s.start).min().unwrap_or(0),
            spans.iter().map(|s| s.end).max().unwrap_or(0),
            trace.counters.iter().filter(|c| mine(&c.track)).count(),
        ));
    }
    out.sort();
    out
}

#[test]
fn every_input_kind_opens_to_the_same_events() {
    let ranks = data("kineto/param_dlrm8");
    let engine = Engine::default();
    let import = engine.import_options(true).unwrap();
    let from_dir = engine.open(std::slice::from_ref(&ranks), &import).unwrap();
    assert_eq!(from_dir.trace.ranks.len(), 8);
    let expected = events_by_rank(&from_dir.trace);

    // The files named one by one.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&ranks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let from_files = engine.load(&files, &import).unwrap();
    assert_eq!(events_by_rank(&from_files), expected);

    // Its profile directory, and its partitioned store (one leaf per rank).
    let scratch = tempfile::tempdir().unwrap();
    let profile = scratch.path().join("profile");
    strato_store::write(&from_dir.trace, &profile).unwrap();
    let from_profile = engine
        .load(std::slice::from_ref(&profile), &import)
        .unwrap();
    assert_eq!(events_by_rank(&from_profile), expected);

    let store = scratch.path().join("store");
    for (position, file) in files.iter().enumerate() {
        let one = engine.load(std::slice::from_ref(file), &import).unwrap();
        let rank = one.ranks[0].rank.unwrap_or(position as i64);
        strato_store::partitioned::write_partition(&store, "dlrm", rank, &one).unwrap();
    }
    let from_store = engine.load(std::slice::from_ref(&store), &import).unwrap();
    assert_eq!(events_by_rank(&from_store), expected);

    // A profile or store may not be mixed with other inputs; a missing path is named.
    let mixed = engine.load(&[profile.clone(), files[0].clone()], &import);
    assert!(matches!(mixed, Err(EngineError::Usage(m)) if m.contains("given alone")));
    let missing = scratch.path().join("nope.json");
    let err = engine
        .load(std::slice::from_ref(&missing), &import)
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::NotFound(p) if p == &missing),
        "{err}"
    );
    let twice = engine.load(&[PathBuf::from("-"), PathBuf::from("-")], &import);
    assert!(matches!(twice, Err(EngineError::Usage(m)) if m.contains("only once")));
}

#[test]
fn streamed_and_rank_by_rank_see_what_the_whole_trace_holds() {
    let engine = Engine::default();
    let import = engine.import_options(true).unwrap();
    let file = data("kineto/hta_nccl_data.json.gz");
    let whole = engine.load(std::slice::from_ref(&file), &import).unwrap();

    // Streamed: every span reaches the sink once, and the tables come back without events.
    let mut seen = 0usize;
    let mut sink = |batch: &mut Trace| {
        seen += batch.spans.len();
        strato_engine::drop_batch_events(batch);
        Ok(())
    };
    let tables = engine
        .stream_file(&file, &import, &mut sink)
        .unwrap()
        .expect("a Kineto JSON file streams");
    assert_eq!(seen, whole.spans.len());
    assert!(tables.spans.is_empty());
    assert_eq!(tables.ranks.len(), whole.ranks.len());

    // Rank by rank over 8 files: the spans of each file, in input order, and the ranks the
    // sources claim.
    let ranks = data("kineto/param_dlrm8");
    let whole = engine.load(std::slice::from_ref(&ranks), &import).unwrap();
    let streamed = engine
        .map_ranks(std::slice::from_ref(&ranks), &import, |t| t.spans.len())
        .unwrap()
        .expect("a directory of Kineto files goes rank by rank");
    let per_file: usize = streamed.parts.iter().map(|p| p.value).sum();
    assert_eq!(per_file, whole.spans.len());
    let claimed: Vec<Option<i64>> = streamed
        .parts
        .iter()
        .flat_map(|p| p.job_ranks.clone())
        .collect();
    let whole_claims: Vec<Option<i64>> = whole.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(claimed, whole_claims);

    // With a graph capture to apply, neither way applies: the caller opens whole.
    let capturing = quiet(OpenOptions {
        graph_capture: Some(file.clone()),
        ..OpenOptions::default()
    });
    assert!(capturing.rank_files(std::slice::from_ref(&ranks)).is_none());
    let mut sink = |_: &mut Trace| Ok(());
    assert!(capturing
        .stream_file(&file, &import, &mut sink)
        .unwrap()
        .is_none());
}

/// A file whose flows link graph nodes (what `strato export --chrome` writes of an Nsight
/// Systems trace with graph node events): an analysis that streams one file and reads flows
/// gives what the whole open gives, which maps the replayed kernel to its captured launch
/// (`hierarchy`: one graph kernel, mapped). Streamed as the file holds it, the kernel would not
/// be mapped.
#[test]
fn a_file_with_graph_node_links_is_analysed_as_the_whole_open_maps_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("graph.json");
    std::fs::write(
        &file,
        r#"{"traceEvents":[
{"ph":"X","name":"cudaLaunchKernel","cat":"cuda_runtime","ts":1,"dur":2,"pid":1,"tid":1,"args":{"correlation":5}},
{"ph":"X","name":"cudaGraphLaunch","cat":"cuda_runtime","ts":10,"dur":2,"pid":1,"tid":1,"args":{"correlation":7}},
{"ph":"X","name":"k","cat":"kernel","ts":12,"dur":2,"pid":0,"tid":7,"args":{"device":0,"stream":7,"correlation":7}},
{"ph":"s","name":"node","cat":"graph_node","id":9,"ts":1,"pid":1,"tid":1},
{"ph":"f","name":"node","cat":"graph_node","id":9,"ts":12,"pid":0,"tid":7,"bp":"e"}]}"#,
    )
    .unwrap();
    let engine = Engine::default();
    let analysis = (strato_engine::registry::ANALYSES.iter())
        .find(|a| a.name == "hierarchy")
        .unwrap();
    let got = analysis
        .run(&engine, std::slice::from_ref(&file), &[])
        .unwrap();
    let options = analysis.import_options(&engine).unwrap();
    let whole = engine.load(std::slice::from_ref(&file), &options).unwrap();
    let at_once = analysis.run_trace(&whole, &[]).unwrap();
    assert_eq!(got.json(), at_once.json());
    let v: serde_json::Value = serde_json::from_str(&got.json()).unwrap();
    assert_eq!(v["graph_kernels"], 1, "{v}");
    assert_eq!(v["graph_kernels_mapped"], 1, "{v}");
}

const SECRET: &str = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

fn trace_with_secret(dir: &Path) -> PathBuf {
    let path = dir.join("secret.json");
    let text = format!(
        r#"{{"traceEvents":[{{"ph":"X","name":"aten::mm","cat":"cpu_op","ts":1,"dur":2,"pid":1,"tid":1,"args":{{"cmd":"run.py --hf-token {SECRET}"}}}}]}}"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn holds_secret(trace: &Trace) -> bool {
    (0..trace.args.len()).any(|i| trace.args.get(i).is_some_and(|a| a.contains(SECRET)))
}

#[test]
fn options_belong_to_an_engine_not_to_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_with_secret(dir.path());
    let keeping = quiet(OpenOptions {
        keep_secrets: true,
        ..OpenOptions::default()
    });
    let redacting = quiet(OpenOptions::default());
    // Both at once, on two threads, many times: each keeps to its own options.
    std::thread::scope(|s| {
        for (engine, keeps) in [(&keeping, true), (&redacting, false)] {
            let path = path.clone();
            s.spawn(move || {
                for _ in 0..20 {
                    let import = engine.import_options(true).unwrap();
                    let trace = engine.load(std::slice::from_ref(&path), &import).unwrap();
                    assert_eq!(holds_secret(&trace), keeps);
                }
            });
        }
    });
    // The option files an output may not overwrite are the engine's own.
    let with_files = quiet(OpenOptions {
        level_map: Some(dir.path().join("levels.json")),
        graph_capture: Some(dir.path().join("capture.json")),
        ..OpenOptions::default()
    });
    assert_eq!(with_files.options().option_files().len(), 2);
    assert!(redacting.options().option_files().is_empty());
    // A level map that cannot be read is the engine's error, naming the file.
    let err = with_files.import_options(false).unwrap_err();
    assert!(err.to_string().contains("levels.json"), "{err}");
}

#[derive(Default)]
struct Heard {
    lines: Mutex<Vec<String>>,
    finished: Mutex<usize>,
}

impl Listener for Heard {
    fn import_finished(&self) {
        *self.finished.lock().unwrap() += 1;
    }
    fn notice(&self, line: &str) {
        self.lines.lock().unwrap().push(line.to_owned());
    }
}

#[test]
fn the_listener_hears_warnings_and_the_end_of_each_import() {
    // A real trace cut in the middle, opened with salvage: the salvage note is a warning.
    let dir = tempfile::tempdir().unwrap();
    let text = {
        use std::io::Read;
        let file = std::fs::File::open(data("kineto/hta_alexnet_trace.json.gz")).unwrap();
        let mut s = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &text.as_bytes()[..text.len() / 2]).unwrap();
    let heard = Arc::new(Heard::default());
    let engine = Engine::new(
        OpenOptions {
            salvage: true,
            ..OpenOptions::default()
        },
        heard.clone(),
    );
    let import = engine.import_options(false).unwrap();
    let trace = engine.load(std::slice::from_ref(&cut), &import).unwrap();
    assert!(!trace.spans.is_empty());
    assert_eq!(*heard.finished.lock().unwrap(), 1);
    let lines = heard.lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("salvaged") && l.contains("cut.json")),
        "{lines:?}"
    );
    // Without salvage the same file is an import error naming it, and nothing is told.
    let strict = Engine::default();
    let err = strict
        .load(
            std::slice::from_ref(&cut),
            &strict.import_options(false).unwrap(),
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::Import(_)), "{err}");
    assert!(err.to_string().contains("cut.json"), "{err}");
}

/// `strato info` over rank files, rank by rank (what the command does for a directory): each
/// file's events counted, its tables kept and appended, the job's rank claims checked. It must
/// give exactly the summary of the whole trace.
#[test]
fn the_summary_of_ranks_read_one_by_one_is_the_summary_of_the_whole() {
    use strato_analysis::info::{info, info_with, EventCounts};
    for rel in ["kineto/param_dlrm8", "kineto/hta_trace_compare"] {
        let dir = data(rel);
        let engine = Engine::default();
        let import = engine.import_options(false).unwrap();
        let whole = engine.load(std::slice::from_ref(&dir), &import).unwrap();
        let parts = engine
            .map_ranks(std::slice::from_ref(&dir), &import, |t| {
                let mut counts = EventCounts::default();
                counts.add(t);
                (counts, t.tables())
            })
            .unwrap()
            .expect("Kineto rank files go rank by rank");
        let mut tables = Trace::default();
        let mut counts = EventCounts::default();
        for part in parts.parts {
            let (part_counts, part_tables) = part.value;
            counts.append(part_counts, tables.tracks.len());
            tables.append(part_tables);
        }
        strato_io::ranks::note_rank_claims(&mut tables);
        let by_parts = serde_json::to_value(info_with(&tables, counts)).unwrap();
        let of_whole = serde_json::to_value(info(&whole)).unwrap();
        assert_eq!(by_parts, of_whole, "{rel}");
    }
}

/// A rank file claiming a negative rank: the whole import numbers it by its position, and so
/// does the rank-by-rank path (the job's claims are checked across files, not per file).
#[test]
fn rank_by_rank_checks_the_jobs_rank_claims_as_the_whole_import_does() {
    let dir = tempfile::tempdir().unwrap();
    for (name, rank) in [("a.json", -1), ("b.json", 1)] {
        let text = format!(
            r#"{{"distributedInfo":{{"rank":{rank},"world_size":2}},"traceEvents":[{{"ph":"X","name":"k","cat":"kernel","ts":1,"dur":2,"pid":0,"tid":7,"args":{{"device":0,"stream":7,"correlation":1}}}}]}}"#
        );
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let heard = Arc::new(Heard::default());
    let engine = Engine::new(OpenOptions::default(), heard.clone());
    let import = engine.import_options(false).unwrap();
    let inputs = [dir.path().to_path_buf()];
    let whole = engine.load(&inputs, &import).unwrap();
    let whole_ranks: Vec<Option<i64>> = whole.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(whole_ranks, [None, Some(1)]);
    heard.lines.lock().unwrap().clear();
    let streamed = engine
        .map_ranks(&inputs, &import, |_| ())
        .unwrap()
        .expect("Kineto rank files go rank by rank");
    let claimed: Vec<Option<i64>> = streamed
        .parts
        .iter()
        .flat_map(|p| p.job_ranks.clone())
        .collect();
    assert_eq!(claimed, whole_ranks);
    let lines = heard.lines.lock().unwrap();
    assert!(
        lines.iter().any(|l| l.contains("negative")),
        "the note is told as the whole import tells it: {lines:?}"
    );
}
