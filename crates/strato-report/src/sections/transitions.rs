//! Transitions (RL-Scope figure 4 bottom): how often execution crosses between strata.

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::color;
use crate::ReportInput;
use std::collections::BTreeMap;
use strato_trace::Level;

use super::palette::level_label;
use super::{analysis_or_close, cell_rows, close, close_empty, name, open};

pub(super) fn transitions(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "transitions",
        "Transitions between strata",
        "Per operation: how often control passed into another stratum (Python → ML backend, \
         ML backend → accelerator API, ...). Many transitions per unit of work is the overhead \
         RL-Scope's figure 4 (bottom) ties to slow operations.",
    );
    let Some(report) = analysis_or_close(h, &input.breakdown) else {
        return false;
    };
    let mut by_op: BTreeMap<String, BTreeMap<(Level, Level), u64>> = BTreeMap::new();
    let mut by_kind: BTreeMap<(Level, Level), u64> = BTreeMap::new();
    for p in &report.processes {
        for t in &p.transitions {
            *by_op
                .entry(t.operation.clone())
                .or_default()
                .entry((t.from, t.to))
                .or_insert(0) += t.count;
            *by_kind.entry((t.from, t.to)).or_insert(0) += t.count;
        }
    }
    if by_op.is_empty() {
        return close_empty(
            h,
            "No transitions: no CPU span has a parent in another stratum (the trace has no \
             nesting between Python, framework ops and runtime calls).",
        );
    }
    let mut kinds: Vec<((Level, Level), u64)> = by_kind.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    kinds.truncate(8);
    let kind_label = |k: (Level, Level)| format!("{} → {}", level_label(k.0), level_label(k.1));
    let mut ops: Vec<(String, u64)> = by_op
        .iter()
        .map(|(op, m)| (op.clone(), m.values().sum()))
        .collect();
    ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let chart_bars: Vec<Bar> = ops
        .iter()
        .take(12)
        .map(|(op, total)| Bar {
            label: op.clone(),
            segments: kinds
                .iter()
                .enumerate()
                .map(|(i, (k, _))| {
                    let n = by_op[op].get(k).copied().unwrap_or(0);
                    Segment {
                        value: n as f64,
                        fill: color(i).to_owned(),
                        tip: format!("{op}\n{}: {n}", kind_label(*k)),
                    }
                })
                .collect(),
            note: format!("{total} in all"),
        })
        .collect();
    h.fragment(&bars::grouped(&Chart {
        aria: "transitions per operation".into(),
        axis: Axis::Count,
        axis_title: "transitions".into(),
        bars: chart_bars,
        legend: kinds
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (kind_label(*k), color(i).to_owned()))
            .collect(),
        defs: String::new(),
    }));
    let mut rows = Vec::new();
    for (op, m) in &by_op {
        for ((from, to), n) in m {
            rows.push((op.clone(), *from, *to, *n));
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.3));
    let table: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(op, f, t, n)| {
            vec![
                name(&op),
                f.as_str().into(),
                t.as_str().into(),
                n.to_string(),
            ]
        })
        .collect();
    h.details_table(
        "Table: transitions",
        &["operation", "from", "to", "count"],
        &[3],
        &cell_rows(table),
    );
    close(h);
    true
}
