//! CPU samples per operation (issue 19, item 3): one flame graph per operation, drawn as an
//! icicle (the operation on top, callers above callees; each frame as wide as its samples),
//! from `strato_analysis::cross_stack::samples` (native stacks by perf events joined with the
//! Python stack the recorder sampled). Size is bounded: at most [`MAX_OPERATIONS`] graphs,
//! [`MAX_DEPTH`] rows each, and frames narrower than [`MIN_WIDTH`] px are left out (their samples
//! stay in their parent's width).

use std::collections::BTreeMap;

use strato_analysis::cross_stack::samples::{CpuSamples, OperationSamples, PYTHON_NOT_SAMPLED};
use strato_trace::Level;

use crate::html::Html;
use crate::svg::{Svg, WIDTH};
use crate::ReportInput;

use super::{analysis_or_close, card, cell_rows, close, close_empty, name, open, pct, share};

const ROW: f64 = 18.0;
/// Flame graphs drawn (the operations with the most samples; the rest in the table).
pub(super) const MAX_OPERATIONS: usize = 8;
/// Rows drawn per graph (deeper frames are folded into their ancestor).
pub(super) const MAX_DEPTH: usize = 40;
/// Frames narrower than this (px of the 1000-px plot) are not drawn.
pub(super) const MIN_WIDTH: f64 = 0.5;

pub(super) fn flame(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "flame",
        "CPU samples",
        "Sampled stacks per operation (`strato record --sample`, or CPU samples imported from \
         Nsight Systems or perf): native stacks joined with the Python stack the recorder \
         sampled on the same thread, where there is one. Each graph is an \
         icicle: the operation on top, callers above callees, each frame as wide as its share \
         of the operation's samples. Hover a frame for its count.",
    );
    let Some(r) = analysis_or_close(h, &input.samples) else {
        return false;
    };
    if r.samples == 0 {
        return close_empty(
            h,
            "No CPU samples in this profile (record with `strato record --sample`).",
        );
    }
    cards(h, r);
    for op in r.operations.iter().take(MAX_OPERATIONS) {
        h.elem(
            "h3",
            &format!(
                "{} — {} samples ({})",
                name(&op.operation),
                op.samples,
                pct(share(op.samples as i64, r.samples as i64))
            ),
        );
        h.fragment(&flame_svg(op));
    }
    let rows: Vec<Vec<String>> = r
        .operations
        .iter()
        .map(|op| {
            vec![
                name(&op.operation),
                op.samples.to_string(),
                pct(share(op.samples as i64, r.samples as i64)),
                pct(share(op.python_joined as i64, op.samples as i64)),
                name(&top_leaf(op)),
            ]
        })
        .collect();
    h.table(
        &[
            "operation",
            "samples",
            "share",
            "with Python stack",
            "hottest leaf frame",
        ],
        &[1, 2, 3],
        &cell_rows(rows),
    );
    close(h);
    true
}

fn cards(h: &mut Html, r: &CpuSamples) {
    h.markup("<div class=\"cards\">");
    card(h, &r.samples.to_string(), "CPU samples");
    card(h, &r.operations.len().to_string(), "operations sampled");
    card(
        h,
        &pct(share(r.python_joined as i64, r.samples as i64)),
        "joined with a Python stack",
    );
    h.markup("</div>");
}

/// The leaf frame with the most samples (self time).
fn top_leaf(op: &OperationSamples) -> String {
    let mut leaves: BTreeMap<&str, u64> = BTreeMap::new();
    for (stack, n) in &op.stacks {
        let leaf = stack.rsplit(';').next().unwrap_or(stack);
        *leaves.entry(leaf).or_default() += n;
    }
    leaves
        .into_iter()
        .max_by_key(|&(leaf, n)| (n, std::cmp::Reverse(leaf)))
        .map(|(leaf, _)| leaf.to_owned())
        .unwrap_or_default()
}

/// A frame of the merged call tree.
#[derive(Default)]
struct Node {
    samples: u64,
    children: BTreeMap<String, Node>,
}

impl Node {
    /// Adds `n` samples of the stack `frames` (outermost first) below this node, iteratively.
    fn add(&mut self, frames: &[&str], n: u64) {
        let mut node = self;
        node.samples += n;
        for frame in frames {
            node = node.children.entry((*frame).to_owned()).or_default();
            node.samples += n;
        }
    }

    /// Rows of the tree (this node's included), iteratively.
    fn depth(&self) -> usize {
        let mut deepest = 0;
        let mut todo = vec![(self, 1)];
        while let Some((node, d)) = todo.pop() {
            deepest = deepest.max(d);
            todo.extend(node.children.values().map(|c| (c, d + 1)));
        }
        deepest
    }
}

/// The flame graph (icicle) of one operation. Only the outermost `MAX_DEPTH` frames of a stack
/// enter the tree (no deeper row is drawn), so a stack of any depth (a 100 000-frame recursion
/// read from `perf script`) costs no more than one of `MAX_DEPTH` frames: no recursion over
/// its depth, in building, measuring or dropping the tree.
pub(super) fn flame_svg(op: &OperationSamples) -> String {
    let mut root = Node::default();
    for (stack, n) in &op.stacks {
        let frames: Vec<&str> = stack.split(';').take(MAX_DEPTH).collect();
        root.add(&frames, *n);
    }
    let depth = root.depth().min(MAX_DEPTH);
    let mut svg = Svg::new(
        depth as f64 * ROW + 2.0,
        &format!("flame graph of {}", op.operation),
    );
    let total = root.samples.max(1) as f64;
    // (label, node, depth, x, width)
    let mut todo: Vec<(&str, &Node, usize, f64)> = vec![(&op.operation, &root, 0, 0.0)];
    while let Some((label, node, d, x)) = todo.pop() {
        let w = WIDTH * node.samples as f64 / total;
        if d >= MAX_DEPTH || w < MIN_WIDTH {
            continue;
        }
        let y = d as f64 * ROW;
        let tip = format!(
            "{label}\n{} samples ({} of the operation)",
            node.samples,
            pct(node.samples as f64 / total)
        );
        svg.rect(x, y, w - 0.3, ROW - 1.0, frame_color(label), Some(&tip));
        if w > 40.0 {
            let chars = ((w - 4.0) / 6.0) as usize;
            svg.text(x + 2.0, y + 13.0, "start", "lbl", &fit(label, chars), None);
        }
        let mut cx = x;
        for (child_label, child) in &node.children {
            todo.push((child_label, child, d + 1, cx));
            cx += WIDTH * child.samples as f64 / total;
        }
    }
    svg.finish()
}

/// Python frames in the Python stratum's colour, native frames of a library in the Library
/// stratum's, the interpreter grey, other native frames in the colour of `Other`, unknowns
/// pale ([`strato_analysis::palette`]: the viewer's lanes use the same colours).
fn frame_color(label: &str) -> &'static str {
    use strato_analysis::palette;
    if label == PYTHON_NOT_SAMPLED || label.starts_with('[') || label.starts_with("??") {
        palette::IDLE
    } else if label.ends_with(".py)") || label.ends_with(">)") {
        palette::level(Level::Python)
    } else if label.contains("[python") || label.contains("[libpython") {
        palette::NEUTRAL
    } else if label.ends_with(']') {
        palette::level(Level::Library)
    } else {
        palette::level(Level::Other)
    }
}

fn fit(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(chars.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_is_bounded_and_names_its_frames() {
        let mut stacks = vec![("main (a.py);spin (a.py);eval [python3.11]".to_owned(), 90)];
        // A very deep stack and many thin ones: neither grows the graph past its bounds.
        let deep: Vec<String> = (0..200).map(|i| format!("f{i} (a.py)")).collect();
        stacks.push((deep.join(";"), 9));
        for i in 0..5000 {
            stacks.push((format!("thin{i} (a.py)"), 1));
        }
        let op = OperationSamples {
            operation: "op".into(),
            samples: stacks.iter().map(|s| s.1).sum(),
            python_joined: 0,
            stacks,
        };
        let svg = flame_svg(&op);
        assert!(svg.contains("spin (a.py)"), "{svg}");
        assert!(svg.contains("eval [python3.11]"));
        assert!(
            !svg.contains("thin17 (a.py)"),
            "sub-pixel frames are left out"
        );
        assert!(
            !svg.contains("f45 (a.py)"),
            "rows past MAX_DEPTH are left out"
        );
        assert!(svg.len() < 200_000, "{} bytes", svg.len());
    }

    #[test]
    fn a_stack_of_any_depth_draws_as_its_outermost_rows() {
        // 100 000 frames (a runaway recursion in `perf script`): the graph is the one of its
        // outermost MAX_DEPTH frames, drawn without recursing over the depth.
        let frames: Vec<String> = (0..100_000).map(|i| format!("f{i} [lib.so]")).collect();
        let graph = |stack: String| {
            flame_svg(&OperationSamples {
                operation: "op".into(),
                samples: 3,
                python_joined: 0,
                stacks: vec![(stack, 2), ("main [lib.so]".into(), 1)],
            })
        };
        let deep = graph(frames.join(";"));
        let cut = graph(frames[..MAX_DEPTH].join(";"));
        assert_eq!(deep, cut);
        assert!(deep.contains(&format!("f{} [lib.so]", MAX_DEPTH - 2)));
        assert!(!deep.contains(&format!("f{} [lib.so]", MAX_DEPTH)));
    }
}
