//! The window an analysis states over several ranks is on the job's clock: the ranks' windows
//! put together after the collectives align their clocks, as `strato collectives`, the critical
//! path and `advise` align them. A rank whose clock runs 1000 s ahead does not stretch it.
#![allow(clippy::unwrap_used)]

mod common;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::modules::modules;
use strato_analysis::cross_stack::ops::ops;
use strato_io::{import_paths, ImportOptions};
use strato_trace::RankId;

/// 1000 s, in ns.
const AHEAD: i64 = 1_000_000_000_000;

#[test]
fn ops_and_modules_state_the_dlrm_jobs_window_on_the_jobs_clock() {
    let path = common::data("kineto/param_dlrm8");
    if !path.exists() {
        eprintln!("skipping: {} not present", path.display());
        return;
    }
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    let trace = import_paths(&[path], &options).unwrap();
    let ahead = common::with_rank_clock_ahead(&trace, RankId(3), AHEAD);
    let shipped = ops(&Analyzed::new(&trace), None);
    let skewed = ops(&Analyzed::new(&ahead), None);
    let window =
        |r: &strato_analysis::cross_stack::ops::OpsReport| (r.window_start_ns, r.window_end_ns);
    let (a, b) = (window(&shipped), window(&skewed));
    // The job as recorded spans about 20 ms; the clocks' alignment is estimated to within
    // microseconds (the collectives' kernel ends), so the two windows may differ by that much.
    assert!(a.1 - a.0 < 60_000_000, "{a:?}");
    assert!((a.0 - b.0).abs() <= 50_000, "start: {a:?} vs {b:?}");
    assert!((a.1 - b.1).abs() <= 50_000, "end: {a:?} vs {b:?}");
    // Everything else is per op and the same.
    assert_eq!(shipped.device_ns, skewed.device_ns);
    assert_eq!(shipped.ops.len(), skewed.ops.len());
    // The module tree's window too (the job holds no module call: the window is all it says).
    let (a, b) = (
        modules(&Analyzed::new(&trace)),
        modules(&Analyzed::new(&ahead)),
    );
    let (a, b) = (
        (a.window_start_ns, a.window_end_ns),
        (b.window_start_ns, b.window_end_ns),
    );
    assert!(a.1 - a.0 < 60_000_000, "{a:?}");
    assert!((a.0 - b.0).abs() <= 50_000, "modules start: {a:?} vs {b:?}");
    assert!((a.1 - b.1).abs() <= 50_000, "modules end: {a:?} vs {b:?}");
}
