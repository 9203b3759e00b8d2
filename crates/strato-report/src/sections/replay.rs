//! Replay: the critical path's graph of each window simulated with the traced durations
//! (`strato whatif` without a change,
//! [`strato_analysis::paths::critical_path::replay::paths_gains_and_replay`]): per step window
//! and rank, the measured time, the simulated time and their difference. The findings'
//! estimated gains and `strato whatif`'s predictions are simulations of the same graphs with a
//! change: a replay that gives the trace back is what they stand on, and where it does not,
//! the edges that go back in time say why.
//!
//! Size: the table keeps at most [`crate::TABLE_ROWS`] rows (the windows in step and rank
//! order); the summary covers them all.

use crate::html::Html;
use crate::svg::fmt_ns;
use crate::ReportInput;

use super::{analysis_or_close, card, cell_rows, close, close_empty, open};

pub(super) fn replay(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "replay",
        "Replay",
        "The critical path's graph of each window simulated with the traced durations (strato \
         whatif without a change): each op starts when the last of its dependencies ends. \
         Per step window and rank: the time the trace measured, the time the simulation gives \
         and the error. The findings' estimated gains and strato whatif's predictions simulate \
         the same graphs with a change; this is how closely the graph reproduces the trace \
         before any change.",
    );
    let Some(result) = analysis_or_close(h, &input.replay) else {
        return false;
    };
    let report = match result {
        Some(Ok(report)) => report,
        Some(Err(e)) => return close_empty(h, &format!("No replay: {e}.")),
        None => return close_empty(h, "The replay was not run."),
    };
    if report.replay.is_empty() {
        return close_empty(
            h,
            "No window to replay: no CPU op, runtime call or device op.",
        );
    }
    let mut errors: Vec<f64> = report.replay.iter().map(|w| w.error_pct).collect();
    errors.sort_by(f64::total_cmp);
    let median = if errors.len() % 2 == 1 {
        errors[errors.len() / 2]
    } else {
        (errors[errors.len() / 2 - 1] + errors[errors.len() / 2]) / 2.0
    };
    let worst = errors.last().copied().unwrap_or(0.0);
    let back: usize = report.replay.iter().map(|w| w.edges_back_in_time).sum();
    h.markup("<div class=\"cards\">");
    card(h, &report.replay.len().to_string(), "windows (step x rank)");
    card(h, &format!("{median:.3}%"), "median error");
    card(h, &format!("{worst:.3}%"), "worst error");
    h.markup("</div>");
    if back > 0 {
        h.elem(
            "p",
            &format!(
                "{back} edges of the windows' graphs go back in time (the trace contradicts \
                 its own order): the replay cannot honour them, and they are where its error \
                 comes from."
            ),
        );
    }
    let rows: Vec<Vec<String>> = (report.replay.iter())
        .map(|w| {
            vec![
                w.step.clone(),
                w.rank.to_string(),
                fmt_ns(w.measured_ns as f64),
                fmt_ns(w.simulated_ns as f64),
                format!("{:.3}%", w.error_pct),
                w.edges_back_in_time.to_string(),
            ]
        })
        .collect();
    h.details_table(
        "Windows",
        &[
            "window",
            "rank",
            "measured",
            "simulated",
            "error",
            "edges back in time",
        ],
        &[1, 2, 3, 4, 5],
        &cell_rows(rows),
    );
    close(h);
    true
}
