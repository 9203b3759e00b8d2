//! The nn.Module tree as an icicle: one row per depth, each module node (calls folded by class
//! path, instances folded) as wide as its inclusive device time — or its inclusive CPU time when
//! no device work ran under modules — inside its parent's extent. Recomputed forward work under
//! backward (activation checkpointing) shows as `[recompute]` roots and in a line of its own.
//! Rules: `strato_analysis::cross_stack::modules`.

use crate::html::Html;
use crate::svg::{color, fmt_ns, Svg, WIDTH};
use crate::ReportInput;

use super::{analysis_or_close, card, cell_rows, close, close_empty, name, open};

const ROW: f64 = 22.0;
/// Rows drawn (deeper nodes are in the table only).
const MAX_DEPTH: usize = 10;

pub(super) fn modules(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "modules",
        "Module tree",
        "nn.Module calls (PyTorch profiler with_stack) folded by class path: each box is as wide \
         as its inclusive device time (CPU time when no device work ran under modules), inside \
         its parent. Instances of a class (layer 0..N) are folded; the table gives their spread.",
    );
    let Some(r) = analysis_or_close(h, &input.modules) else {
        return false;
    };
    if r.tree.is_empty() {
        return close_empty(
            h,
            "No `nn.Module: ...` spans in this profile (record with with_stack=True).",
        );
    }
    let by_device = r.device_ns_in_modules > 0;
    let value = |i: usize| {
        let n = &r.tree[i];
        if by_device {
            n.device_ns as f64
        } else {
            n.cpu_inclusive_ns as f64
        }
    };
    h.markup("<div class=\"cards\">");
    card(h, &r.module_calls.to_string(), "module calls");
    card(
        h,
        &fmt_ns(r.device_ns_in_modules as f64),
        "device time under modules",
    );
    card(
        h,
        &fmt_ns(r.device_ns_outside_modules as f64),
        "device time outside modules",
    );
    if r.recompute.calls > 0 {
        card(
            h,
            &fmt_ns(r.recompute.device_ns as f64),
            "device time recomputing forward (checkpointing)",
        );
    }
    h.markup("</div>");

    // Children per node, laid out left to right in tree order.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); r.tree.len()];
    let mut roots = Vec::new();
    for (i, n) in r.tree.iter().enumerate() {
        match n.parent {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    let total: f64 = roots.iter().map(|&i| value(i)).sum();
    let depth = r
        .tree
        .iter()
        .map(|n| n.depth)
        .max()
        .unwrap_or(0)
        .min(MAX_DEPTH - 1)
        + 1;
    let mut svg = Svg::new(depth as f64 * ROW + 4.0, "module icicle");
    if total > 0.0 {
        // (node, x, width)
        let mut stack: Vec<(usize, f64, f64)> = Vec::new();
        let mut x = 0.0;
        for &i in &roots {
            let w = WIDTH * value(i) / total;
            stack.push((i, x, w));
            x += w;
        }
        while let Some((i, x, w)) = stack.pop() {
            let n = &r.tree[i];
            if n.depth >= MAX_DEPTH || w < 0.5 {
                continue;
            }
            let y = n.depth as f64 * ROW;
            let tip = format!(
                "{}\n{} calls, {} instances\ndevice {} · CPU {}",
                n.class,
                n.calls,
                n.instances,
                fmt_ns(n.device_ns as f64),
                fmt_ns(n.cpu_inclusive_ns as f64)
            );
            svg.rect(x, y, w - 0.5, ROW - 2.0, color(n.depth), Some(&tip));
            if w > 60.0 {
                let chars = ((w - 6.0) / 6.5) as usize;
                svg.text(
                    x + 3.0,
                    y + 15.0,
                    "start",
                    "lbl",
                    &name_fit(&n.class, chars),
                    None,
                );
            }
            let own = value(i);
            let mut cx = x;
            for &c in &children[i] {
                let cw = if own > 0.0 { w * value(c) / own } else { 0.0 };
                stack.push((c, cx, cw));
                cx += cw;
            }
        }
    }
    h.fragment(&svg.finish());
    if r.recompute.calls > 0 {
        h.elem(
            "p",
            &format!(
                "Recomputed forward under backward (activation checkpointing): {} module calls \
                 ({} outermost: {}), CPU {}, device {}.",
                r.recompute.calls,
                r.recompute.root_calls,
                r.recompute.classes.join(", "),
                fmt_ns(r.recompute.cpu_ns as f64),
                fmt_ns(r.recompute.device_ns as f64)
            ),
        );
    }
    let rows: Vec<Vec<String>> = r
        .modules
        .iter()
        .map(|m| {
            vec![
                name(&m.class),
                m.instances.to_string(),
                m.calls.to_string(),
                fmt_ns(m.cpu_inclusive_ns as f64),
                fmt_ns(m.cpu_exclusive_ns as f64),
                fmt_ns(m.device_ns as f64),
                format!(
                    "{} – {}",
                    fmt_ns(m.device_spread.min_ns as f64),
                    fmt_ns(m.device_spread.max_ns as f64)
                ),
                m.recomputed_calls.to_string(),
            ]
        })
        .collect();
    h.table(
        &[
            "class",
            "instances",
            "calls",
            "CPU incl",
            "CPU excl",
            "device",
            "device per instance (min – max)",
            "recomputed",
        ],
        &[1, 2, 3, 4, 5, 7],
        &cell_rows(rows),
    );
    close(h);
    true
}

fn name_fit(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(chars.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}
