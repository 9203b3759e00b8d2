//! Issue 28: several rank files streamed as one job
//! ([`strato_io::job::import_paths_streaming`]). The batches handed over, gathered, with the
//! tables returned, are the job [`strato_io::import_paths`] imports: the same tables and the
//! same events in the same order, ids and args included, for a directory of ranks of one job
//! and for files of different models (whose strings and tracks differ), in batches of several
//! sizes. A job with a file that does not stream hands nothing over.
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::path::{Path, PathBuf};

use strato_io::job::import_paths_streaming;
use strato_io::{import_paths, ArgsScope, ImportOptions};
use strato_trace::{ArgsId, Trace};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// The job `paths` streamed in batches of `batch`, its events gathered from the batches (each
/// batch's args appended to the gathered ones) beside the tables returned; and how many
/// batches were handed over. What a batch's own tables say of each span (its track's rank and
/// kind, its name, its rank's source) must be what the job's tables say in the end: a stream
/// reads them as the batch passes.
fn gathered(paths: &[PathBuf], options: &ImportOptions, batch: usize) -> Option<(Trace, usize)> {
    let mut events = Trace::default();
    let mut batches = 0;
    let mut as_seen = Vec::new();
    let mut take = |b: &mut Trace| {
        batches += 1;
        for s in &b.spans {
            let track = b.track(s.track);
            let rank = &b.ranks[track.rank.0 as usize];
            let seen = format!("{:?} {:?} {}", track.kind, rank.source, b.str(s.name));
            as_seen.push((s.track, track.rank, seen));
        }
        let base = events.args.len() as u32;
        let rebased = |a: Option<ArgsId>| a.map(|a| ArgsId(a.0 + base));
        for s in b.spans.drain(..) {
            let args = rebased(s.args);
            events.spans.push(strato_trace::Span { args, ..s });
        }
        for e in b.instants.drain(..) {
            let args = rebased(e.args);
            events.instants.push(strato_trace::Instant { args, ..e });
        }
        events.counters.append(&mut b.counters);
        events.flows.append(&mut b.flows);
        events.args.append(std::mem::take(&mut b.args));
        Ok(())
    };
    let mut job = import_paths_streaming(paths, options, batch, &mut take).unwrap()?;
    for ((track, rank, seen), s) in as_seen.iter().zip(&events.spans) {
        let t = job.track(*track);
        let told = format!(
            "{:?} {:?} {}",
            t.kind,
            job.ranks[t.rank.0 as usize].source,
            job.str(s.name)
        );
        assert!(
            t.rank == *rank && told == *seen,
            "{seen} as the batch saw it, {told} after"
        );
    }
    job.spans = events.spans;
    job.instants = events.instants;
    job.counters = events.counters;
    // The flows handed over come before those the files kept.
    events.flows.append(&mut job.flows);
    job.flows = events.flows;
    job.args = events.args;
    Some((job, batches))
}

/// What is compared of a trace: its tables and events, each event with its args' text.
fn described(t: &Trace) -> Vec<String> {
    let args = |a| t.args_text(a).map(|x| x.to_string());
    let mut out = vec![
        format!("{:?}", t.ranks),
        format!("{:?}", t.processes),
        format!("{:?}", t.tracks),
        format!("{:?}", t.devices),
        format!("{:?}", t.strings.iter().collect::<Vec<_>>()),
        format!("{:?}", t.counters),
    ];
    out.extend(t.spans.iter().map(|s| {
        let a = args(s.args);
        format!(
            "{:?} {a:?}",
            strato_trace::Span {
                args: None,
                ..s.clone()
            }
        )
    }));
    out.extend(t.instants.iter().map(|e| {
        let a = args(e.args);
        format!(
            "{:?} {a:?}",
            strato_trace::Instant {
                args: None,
                ..e.clone()
            }
        )
    }));
    let mut flows: Vec<String> = t.flows.iter().map(|f| format!("{f:?}")).collect();
    flows.sort();
    out.extend(flows);
    out
}

#[test]
fn a_job_streamed_is_the_job_imported() {
    if !data("").exists() {
        return;
    }
    let options = ImportOptions {
        args_scope: ArgsScope::All,
        ..ImportOptions::default()
    };
    let jobs = [
        vec![data("kineto/param_dlrm8")],
        // Different models: their strings, processes and tracks differ.
        vec![
            data("kineto/hta_trace_filter/sampled_rank-0.json.gz"),
            data("kineto/hta_alexnet_trace.json.gz"),
            data("kineto/hta_trace_filter/sampled_rank-1.json.gz"),
        ],
    ];
    for paths in jobs {
        let whole = import_paths(&paths, &options).unwrap();
        assert!(whole.ranks.len() >= 3 && !whole.flows.is_empty());
        let expected = described(&whole);
        for batch in [997, strato_io::chrome::SINK_EVENTS] {
            let (streamed, batches) = gathered(&paths, &options, batch).expect("the job streams");
            // At least one batch per file.
            let files = strato_io::ranks::expand_inputs(&paths).unwrap().files.len();
            assert!(
                files >= 3 && batches >= files,
                "{paths:?}: {batches} batches of {batch}"
            );
            let got = described(&streamed);
            assert_eq!(got.len(), expected.len(), "{paths:?}, batches of {batch}");
            for (g, e) in got.iter().zip(&expected) {
                assert!(g == e, "{paths:?}, batches of {batch}:\n{g}\n!=\n{e}");
            }
        }
    }
}

#[test]
fn a_job_with_a_file_that_does_not_stream_hands_nothing_over() {
    if !data("").exists() {
        return;
    }
    let paths = [
        data("kineto/hta_alexnet_trace.json.gz"),
        data("nsys/pipit_cloverleaf_cuda.sqlite"),
    ];
    let mut handed = 0;
    let mut take = |_: &mut Trace| {
        handed += 1;
        Ok(())
    };
    let got = import_paths_streaming(&paths, &ImportOptions::default(), 1000, &mut take);
    assert!(got.unwrap().is_none());
    assert_eq!(handed, 0);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

    /// Jobs of real files of every kind the shared data has (CPU only, one GPU, collectives,
    /// a 2021 schema, several ranks in one file, events on streams that only flows name) in
    /// any order and any number, read in batches of any size: the job streamed is the job
    /// imported.
    #[test]
    fn any_job_in_any_batches_streamed_is_the_job_imported(
        picks in proptest::collection::vec(0usize..8, 1..5),
        batch in 1usize..6000,
    ) {
        if !data("").exists() {
            return Ok(());
        }
        let pool = [
            "kineto/hta_alexnet_trace.json.gz",
            "kineto/hta_cpu_only_rank-34.pt.trace.json.gz",
            "kineto/hta_cuda_event_sync_trace.json.gz",
            "kineto/hta_triton_example.json.gz",
            "kineto/hta_trace_compare/base.json.gz",
            "kineto/hta_critical_path/simple_add_input.json.gz",
            "kineto/param_dlrm8/worker0_step_12.1694128201545.pt.trace.json.gz",
            "kineto/hta_trace_filter/sampled_rank-1.json.gz",
        ];
        let paths: Vec<PathBuf> = picks.iter().map(|&k| data(pool[k])).collect();
        let options = ImportOptions {
            args_scope: ArgsScope::All,
            ..ImportOptions::default()
        };
        let whole = import_paths(&paths, &options).unwrap();
        let (streamed, _) = gathered(&paths, &options, batch).expect("the job streams");
        proptest::prop_assert_eq!(described(&streamed), described(&whole), "{:?}", paths);
    }
}
