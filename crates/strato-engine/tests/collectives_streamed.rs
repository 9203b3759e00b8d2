//! `collectives` over one input of one rank as it streams ([`Engine::collectives_rank_by_rank`]
//! on a single file or profile: [`strato_analysis::distributed::collectives::CollectiveSurvey`])
//! gives what the whole trace gives, span ids included: on every Chrome/Kineto JSON file of
//! `../shared/data`, as a file and as a profile directory; on real files whose events come in
//! another order, with some left out; and it leaves several ranks in one file to the whole
//! trace.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use proptest::prelude::*;
use strato_analysis::distributed::collectives::{Collectives, CollectivesResult};
use strato_engine::registry::{find, Outcome};
use strato_engine::Engine;

use common::{engine, shared_json_files, shuffled_and_thinned};

/// The whole trace's `collectives` JSON of `inputs`.
fn whole(engine: &Engine, inputs: &[PathBuf]) -> String {
    let analysis = find("collectives").unwrap();
    let import = analysis.import_options(engine).unwrap();
    let trace = engine.load(inputs, &import).unwrap();
    analysis.run_trace(&trace, &[]).unwrap().json()
}

/// The same as the input streams: `None` when left to the whole trace.
fn streamed(engine: &Engine, inputs: &[PathBuf]) -> Option<String> {
    let import = find("collectives").unwrap().import_options(engine).unwrap();
    let report = engine
        .collectives_rank_by_rank(inputs, &import, &Default::default())
        .unwrap()?;
    Some(Outcome::of::<Collectives>(CollectivesResult(report), Default::default()).json())
}

/// How many collective instances a `collectives` JSON lists.
fn instances(json: &str) -> usize {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["collectives"].as_array().map_or(0, Vec::len)
}

#[test]
fn every_shared_file_streamed_equals_the_whole_trace() {
    let engine = engine();
    let files = shared_json_files();
    assert!(files.len() >= 30, "{files:?}");
    let store = tempfile::tempdir().unwrap();
    let (mut compared, mut with_collectives, mut left) = (0, 0, 0);
    for (k, file) in files.iter().enumerate() {
        let inputs = vec![file.clone()];
        let expected = whole(&engine, &inputs);
        let Some(got) = streamed(&engine, &inputs) else {
            left += 1;
            continue;
        };
        assert_eq!(got, expected, "{}", file.display());
        compared += 1;
        if instances(&got) > 0 {
            with_collectives += 1;
            // Its profile directory, batch by batch.
            let trace = engine
                .load(&inputs, &engine.import_options(true).unwrap())
                .unwrap();
            let dir = store.path().join(format!("p{k}"));
            strato_store::write(&trace, &dir).unwrap();
            let stored = vec![dir];
            let got = streamed(&engine, &stored).expect("a profile of one rank");
            assert_eq!(got, whole(&engine, &stored), "{} stored", file.display());
            // And the registry takes this way.
            let run = find("collectives")
                .unwrap()
                .run(&engine, &inputs, &[])
                .unwrap();
            assert_eq!(run.json(), expected, "{}", file.display());
        }
    }
    assert!(compared >= 30, "compared {compared}");
    assert!(
        with_collectives >= 8,
        "files with collectives: {with_collectives}"
    );
    assert!(
        left >= 1,
        "files of several ranks left to the whole trace: {left}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Events in another order (launches after their kernels, CPU ops after what they hold),
    /// some left out: the same collectives as the whole trace of the same file.
    #[test]
    fn reordered_and_thinned_files_streamed_equal_the_whole_trace(
        which in 0usize..3,
        seed in any::<u64>(),
        keep_per_mille in 700u32..=1000,
    ) {
        let rel = [
            "kineto/hta_df_index_resolver.json.gz",
            "kineto/hta_nccl_data.json.gz",
            "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz",
        ][which];
        let dir = tempfile::tempdir().unwrap();
        let path = shuffled_and_thinned(rel, seed, keep_per_mille, |_| false, dir.path());
        let inputs = vec![path];
        let engine = engine();
        let got = streamed(&engine, &inputs).expect("one rank");
        prop_assert_eq!(got, whole(&engine, &inputs));
    }
}
