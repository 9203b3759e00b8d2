//! Cross-hardware diff (`strato diff A B --by-op`): the same model on two devices compared by
//! what the framework ran, not by kernel name (an H100 and an MI300X run differently named
//! kernels for the same `aten::addmm`). Each device op's time goes to the framework op and to
//! the module that issued it; per op and per module the report gives the time on each side,
//! the ratio, and the ops (modules) that account for 80 % of the difference.
//!
//! Keys, from each device op's chain of parents ([`crate::cross_stack::hierarchy`]):
//! - *op*: the outermost framework op (Backend span, e.g. `aten::linear`) above the device op:
//!   the call the model made, whatever it decomposed into on that device;
//!   `(no framework op)` when there is none;
//! - *module*: the path of the `nn.Module: NAME` Python frames above it, outermost first,
//!   joined by ` / ` (PyTorch's `with_modules`/`with_stack` names, e.g.
//!   `ViTModel_0 / ViTEncoder_0 / ViTLayer_3 / ViTAttention_0 / Linear_0`); `(no module)` when
//!   there is none.
//!
//! The *explaining set* of a table is the shortest prefix of its rows, sorted by absolute
//! difference (largest first, ties by key), whose absolute differences add up to at least
//! 80 % of the sum of all rows' absolute differences.
//!
//! Window: each side's whole trace; time is device-op time (kernels, copies, sets: the sum of
//! their durations, overlapping streams counted each). Conservation: per side, the op rows and
//! the module rows each sum to that side's device time, so the differences sum to the change
//! of the whole (tested).

use std::collections::BTreeMap;

use serde::Serialize;
use strato_trace::{Level, Ns};

use crate::analyzed::Analyzed;
use crate::scope::is_device_work;

/// The key of device ops under no framework op.
pub const NO_OP: &str = "(no framework op)";
/// The key of device ops under no `nn.Module` frame.
pub const NO_MODULE: &str = "(no module)";
/// The share of the total absolute difference the explaining set reaches.
pub const EXPLAINED_SHARE: f64 = 0.8;

const MODULE_PREFIX: &str = "nn.Module: ";

/// Device time of one side, by op and by module.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpDiffSide {
    /// Device ops (kernels, copies, sets) and their summed duration.
    pub device_ops: usize,
    pub device_ns: Ns,
    /// (time, device ops) per op key.
    pub ops: BTreeMap<String, (Ns, usize)>,
    /// (time, device ops) per module path.
    pub modules: BTreeMap<String, (Ns, usize)>,
}

impl OpDiffSide {
    /// Every device op of the trace keyed by its op and its module (see the module rules).
    pub fn of(analyzed: &Analyzed) -> OpDiffSide {
        let trace = analyzed.trace();
        let h = analyzed.hierarchy();
        let mut side = OpDiffSide::default();
        for (i, s) in trace.spans.iter().enumerate() {
            if !(trace.track(s.track).is_device() && is_device_work(s.level)) {
                continue;
            }
            let dur = (s.end - s.start).max(0);
            let mut op: Option<&str> = None;
            let mut modules: Vec<&str> = Vec::new();
            for c in h.chain(i as u32).into_iter().skip(1) {
                let cs = &trace.spans[c as usize];
                let name = trace.str(cs.name);
                match cs.level {
                    Level::Backend => op = Some(name),
                    Level::Python => {
                        if let Some(m) = name.strip_prefix(MODULE_PREFIX) {
                            modules.push(m);
                        }
                    }
                    _ => {}
                }
            }
            let module = if modules.is_empty() {
                NO_MODULE.to_owned()
            } else {
                modules.reverse();
                modules.join(" / ")
            };
            side.device_ops += 1;
            side.device_ns += dur;
            let e = side.ops.entry(op.unwrap_or(NO_OP).to_owned()).or_default();
            e.0 += dur;
            e.1 += 1;
            let e = side.modules.entry(module).or_default();
            e.0 += dur;
            e.1 += 1;
        }
        side
    }
}

/// One op or module on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyDiff {
    pub key: String,
    pub a_ns: Ns,
    pub b_ns: Ns,
    pub a_count: usize,
    pub b_count: usize,
    /// `b_ns - a_ns`.
    pub delta_ns: Ns,
    /// `b_ns / a_ns`; `None` when A has no time.
    pub ratio: Option<f64>,
    /// Running sum of `|delta_ns|` up to this row over the table's total, 0..1.
    pub cumulative_share: f64,
    /// In the explaining set (see the module docs).
    pub explains: bool,
}

/// One side's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpDiffTotals {
    pub label: String,
    pub device_ops: usize,
    pub device_ns: Ns,
    /// Device time under no framework op / under no module.
    pub without_op_ns: Ns,
    pub without_module_ns: Ns,
}

/// `strato diff --by-op`: see the module docs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpDiffReport {
    /// What the times cover.
    pub window: &'static str,
    pub a: OpDiffTotals,
    pub b: OpDiffTotals,
    /// `b.device_ns - a.device_ns`.
    pub delta_ns: Ns,
    /// `b.device_ns / a.device_ns`; `None` when A has no device time.
    pub ratio: Option<f64>,
    /// Rows by absolute difference, largest first.
    pub ops: Vec<KeyDiff>,
    pub modules: Vec<KeyDiff>,
    /// Keys of the explaining sets, in row order.
    pub ops_explaining: Vec<String>,
    pub modules_explaining: Vec<String>,
}

fn ratio(a: Ns, b: Ns) -> Option<f64> {
    (a > 0).then(|| b as f64 / a as f64)
}

fn table(a: &BTreeMap<String, (Ns, usize)>, b: &BTreeMap<String, (Ns, usize)>) -> Vec<KeyDiff> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows: Vec<KeyDiff> = keys
        .into_iter()
        .map(|k| {
            let (a_ns, a_count) = a.get(k).copied().unwrap_or_default();
            let (b_ns, b_count) = b.get(k).copied().unwrap_or_default();
            KeyDiff {
                key: k.clone(),
                a_ns,
                b_ns,
                a_count,
                b_count,
                delta_ns: b_ns - a_ns,
                ratio: ratio(a_ns, b_ns),
                cumulative_share: 0.0,
                explains: false,
            }
        })
        .collect();
    rows.sort_by(|x, y| {
        y.delta_ns
            .unsigned_abs()
            .cmp(&x.delta_ns.unsigned_abs())
            .then_with(|| x.key.cmp(&y.key))
    });
    let total: u128 = rows
        .iter()
        .map(|r| u128::from(r.delta_ns.unsigned_abs()))
        .sum();
    let mut running: u128 = 0;
    let mut reached = total == 0;
    for r in &mut rows {
        running += u128::from(r.delta_ns.unsigned_abs());
        r.cumulative_share = if total == 0 {
            0.0
        } else {
            running as f64 / total as f64
        };
        if !reached {
            r.explains = true;
            reached = running as f64 >= EXPLAINED_SHARE * total as f64;
        }
    }
    rows
}

fn totals(label: &str, side: &OpDiffSide) -> OpDiffTotals {
    OpDiffTotals {
        label: label.to_owned(),
        device_ops: side.device_ops,
        device_ns: side.device_ns,
        without_op_ns: side.ops.get(NO_OP).map_or(0, |e| e.0),
        without_module_ns: side.modules.get(NO_MODULE).map_or(0, |e| e.0),
    }
}

/// Compares A and B by op and by module (see the module docs).
pub fn op_diff(a_label: &str, a: &OpDiffSide, b_label: &str, b: &OpDiffSide) -> OpDiffReport {
    let ops = table(&a.ops, &b.ops);
    let modules = table(&a.modules, &b.modules);
    let explaining = |rows: &[KeyDiff]| -> Vec<String> {
        rows.iter()
            .filter(|r| r.explains)
            .map(|r| r.key.clone())
            .collect()
    };
    OpDiffReport {
        window: "each side's whole trace; device-op time (sum of kernel, copy and set durations)",
        a: totals(a_label, a),
        b: totals(b_label, b),
        delta_ns: b.device_ns - a.device_ns,
        ratio: ratio(a.device_ns, b.device_ns),
        ops_explaining: explaining(&ops),
        modules_explaining: explaining(&modules),
        ops,
        modules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(rows: &[(&str, Ns)]) -> OpDiffSide {
        let mut s = OpDiffSide::default();
        for &(k, t) in rows {
            s.ops.insert(k.to_owned(), (t, 1));
            s.modules.insert(k.to_owned(), (t, 1));
            s.device_ns += t;
            s.device_ops += 1;
        }
        s
    }

    #[test]
    fn the_explaining_set_is_the_shortest_prefix_reaching_80_percent() {
        // |deltas|: x 50, y 30, z 15, w 5 (total 100): x + y = 80 % exactly.
        let a = side(&[("x", 100), ("y", 100), ("z", 100), ("w", 100)]);
        let b = side(&[("x", 150), ("y", 70), ("z", 115), ("w", 105)]);
        let r = op_diff("a", &a, "b", &b);
        assert_eq!(r.ops_explaining, vec!["x", "y"]);
        assert_eq!(r.delta_ns, 40);
        let sum: Ns = r.ops.iter().map(|o| o.delta_ns).sum();
        assert_eq!(sum, r.delta_ns);
        assert_eq!(r.ops[0].ratio, Some(1.5));
        // One op only in B: no ratio, and it explains everything.
        let r = op_diff("a", &side(&[]), "b", &side(&[("n", 7)]));
        assert_eq!(r.ops[0].ratio, None);
        assert_eq!(r.ops_explaining, vec!["n"]);
        // No difference: nothing explains it.
        let r = op_diff("a", &a, "b", &a);
        assert!(r.ops_explaining.is_empty());
    }
}
