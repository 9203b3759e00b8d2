//! Every registered analysis (`strato_engine::registry`) on real jobs and files: run the
//! leanest way the inputs allow (rank file by rank file, each imported, analysed and dropped
//! and the parts merged; fed while a single file streams; its own opening) it gives what it
//! gives over the whole input opened at once; run twice, the same bytes.

use std::path::PathBuf;
use std::sync::Arc;

use strato_engine::registry::ANALYSES;
use strato_engine::{Engine, OpenOptions, Quiet};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
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
            let options = analysis.import_options(&engine).expect("options");
            let whole = engine.load(&inputs, &options).expect("opens");
            let at_once = analysis.run_trace(&whole, &[]).expect("runs");
            assert_eq!(
                streamed.json(),
                at_once.json(),
                "{} on {job}",
                analysis.name
            );
            assert_eq!(
                streamed.text(),
                at_once.text(),
                "{} on {job}",
                analysis.name
            );
            assert_eq!(
                streamed.own_csv(false),
                at_once.own_csv(false),
                "{} on {job}",
                analysis.name
            );
            if analysis.rank_by_rank && job.ends_with("param_dlrm8") {
                // The merge is what is checked here: it had rows to merge.
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
