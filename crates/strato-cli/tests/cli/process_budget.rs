//! `STRATO_MEMORY_BUDGET` bounds the whole `strato` process (issue 28), not only the trace
//! model its import keeps: an analysis whose working set passes the budget stops with one line
//! and exit 2, and leaves no output file (nor a temporary one) behind.
//!
//! The trace is generated (its size known by construction): a Kineto-shaped trace whose import
//! streams within a small budget (`info`), while `report` and the whole-trace `critical-path`
//! hold every event and their own per-event working sets; `critical-path --step all`, read in
//! parts, fits in the same budget and gives the same answer.

use std::io::Write;
use std::path::Path;

use crate::common::{s, strato_env, text};

/// Writes a Kineto-shaped trace of `steps` profiler steps of `ops` framework ops each: every op
/// launches one kernel (runtime call, correlation, kernel on one of two streams).
fn generate(path: &Path, steps: usize, ops: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        out,
        r#"{{"schemaVersion":1,"deviceProperties":[{{"id":0,"name":"GPU"}}],"traceEvents":["#
    )
    .unwrap();
    let names = ["aten::addmm", "aten::add_", "aten::softmax", "aten::conv2d"];
    let mut t = 1_000_000u64;
    let mut corr = 0usize;
    for step in 0..steps {
        let step_start = t;
        let step_dur = ops as u64 * 50;
        write!(
            out,
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":10,"tid":10,"ts":{step_start},"dur":{step_dur}}},"#
        )
        .unwrap();
        for i in 0..ops {
            corr += 1;
            let name = names[i % names.len()];
            let stream = 7 + 13 * (i % 2);
            write!(
                out,
                r#"{{"ph":"X","cat":"cpu_op","name":"{name}","pid":10,"tid":10,"ts":{},"dur":40,"args":{{"External id":{corr},"Input Dims":[[64,1024],[1024,1024]],"Input type":["float","float"]}}}},"#,
                t + 2
            )
            .unwrap();
            write!(
                out,
                r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":{},"dur":8,"args":{{"correlation":{corr},"External id":{corr}}}}},"#,
                t + 20
            )
            .unwrap();
            write!(
                out,
                r#"{{"ph":"X","cat":"kernel","name":"kernel_{}","pid":0,"tid":{stream},"ts":{},"dur":30,"args":{{"device":0,"stream":{stream},"correlation":{corr},"External id":{corr}}}}},"#,
                i % 7,
                t + 35
            )
            .unwrap();
            t += 50;
        }
    }
    write!(
        out,
        r#"{{"ph":"M","name":"process_name","pid":10,"tid":0,"args":{{"name":"python"}}}}]}}"#
    )
    .unwrap();
    out.flush().unwrap();
}

/// A budget the streamed import of the generated trace fits in, and `report`'s and the
/// whole-trace `critical-path`'s working sets do not (`critical-path --step all`, read in
/// parts, does).
const BUDGET: &str = "48M";

#[test]
fn the_budget_bounds_the_analyses_not_only_the_import() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    generate(&trace, 20, 5_000);
    let budget = [("STRATO_MEMORY_BUDGET", BUDGET)];

    // The import streams within the budget.
    let out = strato_env(&["info", s(&trace)], &budget);
    assert!(out.status.success(), "info: {}", text(&out.stderr));

    // The analyses that hold the trace stop with one line naming the command and the budget,
    // exit 2, and nothing is written.
    let html = dir.path().join("r.html");
    for args in [
        vec!["report", s(&trace), "-o", s(&html)],
        vec!["critical-path", s(&trace)],
    ] {
        let out = strato_env(&args, &budget);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("the memory budget of 48 MiB") && err.contains("STRATO_MEMORY_BUDGET"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("strato {}: stopped", args[0])),
            "{args:?}: the process's own stop, not the import's: {err}"
        );
    }
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "t.json")
        .collect();
    assert!(left.is_empty(), "files left behind: {left:?}");

    // The budget was the only cause: with the default one, the same report is written.
    let out = strato_env(&["report", s(&trace), "-o", s(&html)], &[]);
    assert!(out.status.success(), "report: {}", text(&out.stderr));
    assert!(std::fs::metadata(&html).unwrap().len() > 10_000);

    // The per-step critical path reads the trace in parts: within the budget, the same
    // answer as without it.
    let steps = ["critical-path", s(&trace), "--step", "all", "--json"];
    let within = strato_env(&steps, &budget);
    assert!(
        within.status.success(),
        "--step all: {}",
        text(&within.stderr)
    );
    let free = strato_env(&steps, &[]);
    assert!(free.status.success());
    assert_eq!(within.stdout, free.stdout);
    assert!(within.stdout.len() > 10_000);
}
