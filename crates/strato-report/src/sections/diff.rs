//! Diff with another profile: window, device time, strata, operations and kernels that
//! changed.

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::{color, fmt_ns};
use strato_analysis::compare::diff::{Change, Delta, DiffReport};
use strato_trace::Ns;

use super::{card, cell_rows, close, name, open, pct};

fn signed_ns(ns: Ns) -> String {
    if ns > 0 {
        format!("+{}", fmt_ns(ns as f64))
    } else {
        fmt_ns(ns as f64)
    }
}

fn signed_pct(p: Option<f64>) -> String {
    p.map_or("new".into(), |p| format!("{p:+.1}%"))
}

pub(super) fn diff_section(h: &mut Html, d: &DiffReport) {
    open(
        h,
        "diff",
        "Compared with another profile",
        "Per operation, stratum and kernel: time in A (baseline) and B (this profile), the change, \
         and what was added or removed. Negative changes are time saved.",
    );
    h.markup("<div class=\"cards\">");
    card(
        h,
        &signed_pct(d.window.delta_pct),
        "change of analysed wall time",
    );
    card(
        h,
        &signed_pct(d.device_time.delta_pct),
        "change of device time",
    );
    card(
        h,
        &d.added_operations().count().to_string(),
        "operations added",
    );
    card(
        h,
        &d.removed_operations().count().to_string(),
        "operations removed",
    );
    card(h, &d.added_kernels().count().to_string(), "kernels added");
    card(
        h,
        &d.removed_kernels().count().to_string(),
        "kernels removed",
    );
    h.markup("</div>");
    let time_row = |what: &str, a: Ns, b: Ns, change: &Delta| {
        vec![
            what.to_owned(),
            fmt_ns(a as f64),
            fmt_ns(b as f64),
            format!(
                "{} ({})",
                signed_ns(change.delta_ns),
                signed_pct(change.delta_pct)
            ),
        ]
    };
    let plain_row = |what: &str, a: String, b: String| vec![what.to_owned(), a, b, String::new()];
    h.table(
        &["", "A", "B", "change"],
        &[1, 2, 3],
        &[
            plain_row("source", name(&d.a.label), name(&d.b.label)),
            plain_row(
                "processes",
                d.a.processes.to_string(),
                d.b.processes.to_string(),
            ),
            time_row(
                "wall time (sum of windows)",
                d.a.window_ns,
                d.b.window_ns,
                &d.window,
            ),
            time_row(
                "device time",
                d.a.device_time_ns,
                d.b.device_time_ns,
                &d.device_time,
            ),
            plain_row(
                "device ops",
                d.a.device_ops.to_string(),
                d.b.device_ops.to_string(),
            ),
        ],
    );
    let side = |operation: &str, side: &str, ns: Ns, share: f64, fill: &str| Segment {
        value: ns as f64,
        fill: fill.to_owned(),
        tip: format!(
            "{operation}\n{side}: {} ({})",
            fmt_ns(ns as f64),
            pct(share)
        ),
    };
    let (a_fill, b_fill) = (color(9), color(0));
    let chart_bars: Vec<Bar> = d
        .operations
        .iter()
        .take(15)
        .map(|o| Bar {
            label: o.operation.clone(),
            segments: vec![
                side(&o.operation, "A", o.delta.a_ns, o.delta.a_share, a_fill),
                side(&o.operation, "B", o.delta.b_ns, o.delta.b_share, b_fill),
            ],
            note: format!(
                "{} ({})",
                signed_ns(o.delta.delta_ns),
                o.delta.change.as_str()
            ),
        })
        .collect();
    h.elem("h3", "Operations, A vs B (largest changes first)");
    h.fragment(&bars::grouped(&Chart {
        aria: "operations A vs B".into(),
        axis: Axis::Duration,
        axis_title: "time".into(),
        bars: chart_bars,
        legend: vec![
            ("A (baseline)".into(), a_fill.to_owned()),
            ("B".into(), b_fill.to_owned()),
        ],
        defs: String::new(),
    }));
    let delta_cells = |x: &Delta| {
        vec![
            fmt_ns(x.a_ns as f64),
            pct(x.a_share),
            fmt_ns(x.b_ns as f64),
            pct(x.b_share),
            signed_ns(x.delta_ns),
            signed_pct(x.delta_pct),
            x.change.as_str().to_owned(),
        ]
    };
    let strata: Vec<Vec<String>> = d
        .strata
        .iter()
        .filter(|s| s.delta.change != Change::Same)
        .map(|s| {
            let mut row = vec![name(&s.operation), s.stratum_label()];
            row.extend(delta_cells(&s.delta));
            row
        })
        .collect();
    h.details_table(
        &format!(
            "Table: per operation and stratum ({} changed)",
            strata.len()
        ),
        &[
            "operation",
            "stratum",
            "A",
            "A share",
            "B",
            "B share",
            "change",
            "change %",
            "",
        ],
        &[2, 3, 4, 5, 6, 7],
        &cell_rows(strata),
    );
    let kernels: Vec<Vec<String>> = d
        .kernels
        .iter()
        .filter(|k| k.delta.change != Change::Same)
        .map(|k| {
            let mut row = vec![name(&k.name), k.a_count.to_string(), k.b_count.to_string()];
            row.extend(delta_cells(&k.delta));
            row
        })
        .collect();
    h.details_table(
        &format!(
            "Table: kernels ({} changed, {} added, {} removed)",
            kernels.len(),
            d.added_kernels().count(),
            d.removed_kernels().count()
        ),
        &[
            "kernel", "A calls", "B calls", "A", "A share", "B", "B share", "change", "change %",
            "",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &cell_rows(kernels),
    );
    close(h);
}
