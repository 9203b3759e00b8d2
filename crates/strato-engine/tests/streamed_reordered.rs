//! The analyses that stream one file ([`strato_analysis::registry::Analysis::stream`]) on real
//! files whose events come in another order and some left out: launches after their kernels,
//! CPU ops after what they hold, module calls after the ops inside them. Streamed through the
//! engine (as `strato NAME FILE` runs them), each gives what it gives over the whole trace of
//! the same file, in JSON, text and CSV.
#![allow(clippy::unwrap_used)]

mod common;

use common::{engine, shuffled_and_thinned};
use proptest::prelude::*;
use strato_engine::registry::{Read, ANALYSES};

/// The analyses that stream one file.
const STREAMED: &[&str] = &[
    "gpu-time",
    "kernels",
    "queue-length",
    "util",
    "memory",
    "ops",
    "hierarchy",
    "breakdown",
    "modules",
    "layers",
    "roofline",
    "iterations",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn reordered_and_thinned_files_streamed_equal_the_whole_trace(
        which in 0usize..3,
        seed in any::<u64>(),
        keep_per_mille in 700u32..=1000,
    ) {
        let rel = [
            "kineto/hta_df_index_resolver.json.gz",
            // Module calls with activation checkpointing (recomputed forward).
            "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz",
            "kineto/hta_trace_compare/base.json.gz",
        ][which];
        let dir = tempfile::tempdir().unwrap();
        let path = shuffled_and_thinned(rel, seed, keep_per_mille, |_| false, dir.path());
        let inputs = vec![path];
        let engine = engine();
        for name in STREAMED {
            let analysis = ANALYSES.iter().find(|a| a.name == *name).unwrap();
            let streamed = analysis.run(&engine, &inputs, &[]).unwrap();
            prop_assert_ne!(streamed.read(), Read::Whole, "{} on {}", name, rel);
            let options = analysis.import_options(&engine).unwrap();
            let whole = engine.load(&inputs, &options).unwrap();
            let at_once = analysis.run_trace(&whole, &[]).unwrap();
            prop_assert_eq!(streamed.json(), at_once.json(), "{} on {}", name, rel);
            prop_assert_eq!(streamed.text(), at_once.text(), "{} on {}", name, rel);
            prop_assert_eq!(
                streamed.own_csv(false),
                at_once.own_csv(false),
                "{} on {}",
                name,
                rel
            );
        }
    }
}
