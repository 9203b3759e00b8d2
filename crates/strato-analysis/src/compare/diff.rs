//! Diff of two profiles (`strato diff A B`): per operation, per (operation, stratum) and per
//! kernel name, the time and share in each profile, the absolute and relative change, and
//! what was added or removed.
//!
//! Inputs are the results of other analyses, not traces: each side's [`BreakdownReport`] (rows
//! keyed by operation, resource and CPU level; summed over processes and phases, so two runs
//! with different pids or ranks compare) and [`KernelStatsReport`] (per kernel name, summed
//! over ranks; compute it unfolded, `top = 0`, or the folded `(other N)` row is compared as a
//! kernel).
//!
//! Window: each side's breakdown windows (sum over processes) and device time (sum over ranks).
//! Conservation: per side, the stratum rows sum to that side's total window and the operation
//! rows to the same; the kernel rows sum to the side's device time. So the deltas add up to
//! the change of the whole (tested).

use std::collections::BTreeMap;

use serde::Serialize;
use strato_trace::{Level, Ns};

use crate::analyzed::Analyzed;
use crate::cross_stack::breakdown::{BreakdownOptions, BreakdownReport, Resource};
use crate::device_time::kernel_stats::KernelStatsReport;

/// How a row changed from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Only in B.
    Added,
    /// Only in A.
    Removed,
    /// Less time in B.
    Faster,
    /// More time in B.
    Slower,
    /// The same time.
    Same,
}

impl Change {
    /// `"added"`, `"removed"`, `"faster"`, `"slower"`, `"same"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Faster => "faster",
            Change::Slower => "slower",
            Change::Same => "same",
        }
    }

    fn of(a: Option<Ns>, b: Option<Ns>) -> Change {
        match (a, b) {
            (None, Some(_)) => Change::Added,
            (Some(_), None) => Change::Removed,
            (Some(a), Some(b)) if b < a => Change::Faster,
            (Some(a), Some(b)) if b > a => Change::Slower,
            _ => Change::Same,
        }
    }
}

/// Time of one key in A and B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    pub a_ns: Ns,
    pub b_ns: Ns,
    /// Share of the side's whole (window or device time), 0..1.
    pub a_share: f64,
    pub b_share: f64,
    /// `b_ns - a_ns`.
    pub delta_ns: Ns,
    /// `delta / a`, in percent; `None` when A has no time.
    pub delta_pct: Option<f64>,
    pub change: Change,
}

impl Delta {
    fn new(a: Option<Ns>, b: Option<Ns>, a_whole: Ns, b_whole: Ns) -> Delta {
        let (a_ns, b_ns) = (a.unwrap_or(0), b.unwrap_or(0));
        let share = |x: Ns, whole: Ns| {
            if whole > 0 {
                x as f64 / whole as f64
            } else {
                0.0
            }
        };
        Delta {
            a_ns,
            b_ns,
            a_share: share(a_ns, a_whole),
            b_share: share(b_ns, b_whole),
            delta_ns: b_ns - a_ns,
            delta_pct: (a_ns > 0).then(|| 100.0 * (b_ns - a_ns) as f64 / a_ns as f64),
            change: Change::of(a, b),
        }
    }
}

/// One operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperationDiff {
    pub operation: String,
    #[serde(flatten)]
    pub delta: Delta,
}

/// One (operation, resource, CPU level) cell of the breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StratumDiff {
    pub operation: String,
    pub resource: Resource,
    /// `None` while the CPU is not active (GPU-only, idle).
    pub cpu_level: Option<Level>,
    #[serde(flatten)]
    pub delta: Delta,
}

impl StratumDiff {
    /// `"CPU / Backend"`, `"GPU"`, `"CPU+GPU / Python"`, `"idle"`.
    pub fn stratum_label(&self) -> String {
        match self.cpu_level {
            Some(level) => format!("{} / {}", self.resource.as_str(), level.as_str()),
            None => self.resource.as_str().to_owned(),
        }
    }
}

/// One kernel name (device ops of every kind: kernels, copies, sets).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelDiff {
    pub name: String,
    pub a_count: u64,
    pub b_count: u64,
    #[serde(flatten)]
    pub delta: Delta,
}

/// Totals of one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideSummary {
    /// What the side was loaded from (the sources of its ranks).
    pub label: String,
    pub processes: usize,
    /// Sum of the processes' breakdown windows.
    pub window_ns: Ns,
    /// Sum of device op durations over ranks.
    pub device_time_ns: Ns,
    pub device_ops: u64,
}

/// The diff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffReport {
    pub a: SideSummary,
    pub b: SideSummary,
    pub window: Delta,
    pub device_time: Delta,
    /// Ordered by |delta| descending, then name.
    pub operations: Vec<OperationDiff>,
    pub strata: Vec<StratumDiff>,
    pub kernels: Vec<KernelDiff>,
}

impl DiffReport {
    /// Names of operations only in B.
    pub fn added_operations(&self) -> impl Iterator<Item = &str> {
        self.operations
            .iter()
            .filter(|o| o.delta.change == Change::Added)
            .map(|o| o.operation.as_str())
    }
    /// Names of operations only in A.
    pub fn removed_operations(&self) -> impl Iterator<Item = &str> {
        self.operations
            .iter()
            .filter(|o| o.delta.change == Change::Removed)
            .map(|o| o.operation.as_str())
    }
    /// Kernels only in B.
    pub fn added_kernels(&self) -> impl Iterator<Item = &KernelDiff> {
        self.kernels
            .iter()
            .filter(|k| k.delta.change == Change::Added)
    }
    /// Kernels only in A.
    pub fn removed_kernels(&self) -> impl Iterator<Item = &KernelDiff> {
        self.kernels
            .iter()
            .filter(|k| k.delta.change == Change::Removed)
    }
}

type StratumKey = (String, Resource, Option<Level>);

fn strata_of(report: &BreakdownReport) -> BTreeMap<StratumKey, Ns> {
    let mut map = BTreeMap::new();
    for p in &report.processes {
        for row in &p.rows {
            *map.entry((row.operation.clone(), row.resource, row.cpu_level))
                .or_insert(0) += row.time_ns;
        }
    }
    map
}

fn kernels_of(report: &KernelStatsReport) -> BTreeMap<String, (u64, Ns)> {
    let mut map: BTreeMap<String, (u64, Ns)> = BTreeMap::new();
    for rank in &report.ranks {
        for k in &rank.kernels {
            let entry = map.entry(k.name.clone()).or_default();
            entry.0 += k.count;
            entry.1 += k.total_ns;
        }
    }
    map
}

fn merge<K: Ord + Clone, V: Copy>(
    a: &BTreeMap<K, V>,
    b: &BTreeMap<K, V>,
) -> Vec<(K, Option<V>, Option<V>)> {
    let mut keys: Vec<&K> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| (k.clone(), a.get(k).copied(), b.get(k).copied()))
        .collect()
}

fn side(label: String, breakdown: &BreakdownReport, kernels: &KernelStatsReport) -> SideSummary {
    SideSummary {
        label,
        processes: breakdown.processes.len(),
        window_ns: breakdown.processes.iter().map(|p| p.window_ns).sum(),
        device_time_ns: kernels.ranks.iter().map(|r| r.device_time_ns).sum(),
        device_ops: kernels.ranks.iter().map(|r| r.device_ops).sum(),
    }
}

fn by_size<T>(rows: &mut [T], delta: impl Fn(&T) -> &Delta, name: impl Fn(&T) -> String) {
    rows.sort_by(|x, y| {
        let (dx, dy) = (delta(x), delta(y));
        dy.delta_ns
            .abs()
            .cmp(&dx.delta_ns.abs())
            .then(dy.a_ns.max(dy.b_ns).cmp(&dx.a_ns.max(dx.b_ns)))
            .then_with(|| name(x).cmp(&name(y)))
    });
}

/// The two analyses a diff reads, of one side: its breakdown and its unfolded kernel
/// statistics (`top = 0`, see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct DiffSide {
    pub breakdown: BreakdownReport,
    pub kernels: KernelStatsReport,
}

impl DiffSide {
    /// Computes both analyses of one profile; `per_step` keeps `ProfilerStep#N` apart.
    pub fn of(analyzed: &Analyzed, per_step: bool) -> DiffSide {
        DiffSide {
            breakdown: crate::cross_stack::breakdown::breakdown(
                analyzed,
                &BreakdownOptions { per_step },
            ),
            kernels: crate::device_time::kernel_stats::kernel_stats(analyzed.trace(), 0),
        }
    }

    /// The side as [`diff`] takes it.
    pub fn parts(&self) -> (&BreakdownReport, &KernelStatsReport) {
        (&self.breakdown, &self.kernels)
    }
}

/// Compares profile A with profile B. `a_label` / `b_label` name the sides in the output.
pub fn diff(
    a_label: &str,
    a: (&BreakdownReport, &KernelStatsReport),
    b_label: &str,
    b: (&BreakdownReport, &KernelStatsReport),
) -> DiffReport {
    let sa = side(a_label.to_owned(), a.0, a.1);
    let sb = side(b_label.to_owned(), b.0, b.1);
    let (wa, wb) = (sa.window_ns, sb.window_ns);

    let strata_a = strata_of(a.0);
    let strata_b = strata_of(b.0);
    let mut strata: Vec<StratumDiff> = merge(&strata_a, &strata_b)
        .into_iter()
        .map(|((operation, resource, cpu_level), x, y)| StratumDiff {
            operation,
            resource,
            cpu_level,
            delta: Delta::new(x, y, wa, wb),
        })
        .collect();
    by_size(&mut strata, |s| &s.delta, |s| s.operation.clone());

    let ops = |m: &BTreeMap<StratumKey, Ns>| {
        let mut out: BTreeMap<String, Ns> = BTreeMap::new();
        for ((op, _, _), ns) in m {
            *out.entry(op.clone()).or_insert(0) += ns;
        }
        out
    };
    let mut operations: Vec<OperationDiff> = merge(&ops(&strata_a), &ops(&strata_b))
        .into_iter()
        .map(|(operation, x, y)| OperationDiff {
            operation,
            delta: Delta::new(x, y, wa, wb),
        })
        .collect();
    by_size(&mut operations, |o| &o.delta, |o| o.operation.clone());

    let (da, db) = (sa.device_time_ns, sb.device_time_ns);
    let mut kernels: Vec<KernelDiff> = merge(&kernels_of(a.1), &kernels_of(b.1))
        .into_iter()
        .map(|(name, x, y)| KernelDiff {
            name,
            a_count: x.map_or(0, |v| v.0),
            b_count: y.map_or(0, |v| v.0),
            delta: Delta::new(x.map(|v| v.1), y.map(|v| v.1), da, db),
        })
        .collect();
    by_size(&mut kernels, |k| &k.delta, |k| k.name.clone());

    DiffReport {
        window: Delta::new(Some(wa), Some(wb), wa, wb),
        device_time: Delta::new(Some(da), Some(db), da, db),
        a: sa,
        b: sb,
        operations,
        strata,
        kernels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross_stack::breakdown::{ProcessBreakdown, Row};
    use crate::device_time::kernel_stats::{RankKernelStats, StatRow};

    fn process(rows: &[(&str, Resource, Option<Level>, Ns)]) -> ProcessBreakdown {
        let window: Ns = rows.iter().map(|r| r.3).sum();
        ProcessBreakdown {
            rank: 0,
            rank_index: 0,
            source: "x".into(),
            pid: 1,
            name: None,
            annotated_tid: None,
            window_start_ns: 0,
            window_end_ns: window,
            window_ns: window,
            rows: rows
                .iter()
                .map(|&(op, resource, cpu_level, time_ns)| Row {
                    phase: "(none)".into(),
                    operation: op.into(),
                    resource,
                    cpu_level,
                    thread_state: Default::default(),
                    time_ns,
                })
                .collect(),
            operations: Vec::new(),
            transitions: Vec::new(),
            device_ops: 0,
            device_ops_without_launch: 0,
        }
    }

    fn kernels(rows: &[(&str, u64, Ns)]) -> KernelStatsReport {
        let total: Ns = rows.iter().map(|r| r.2).sum();
        KernelStatsReport {
            ranks: vec![RankKernelStats {
                rank: 0,
                source: "x".into(),
                device_ops: rows.iter().map(|r| r.1).sum(),
                device_time_ns: total,
                kernels: rows
                    .iter()
                    .map(|&(name, count, total_ns)| StatRow {
                        name: name.into(),
                        count,
                        total_ns,
                        mean_ns: 0.0,
                        std_ns: 0.0,
                        min_ns: 0,
                        max_ns: 0,
                        share: 0.0,
                    })
                    .collect(),
                ops: Vec::new(),
                launch_latency: None,
                queue_latency: None,
                submit_latency: None,
            }],
        }
    }

    fn report(processes: Vec<ProcessBreakdown>) -> BreakdownReport {
        BreakdownReport {
            processes,
            unattributed_device_ops: 0,
            summary: None,
        }
    }

    #[test]
    fn rows_conserve_and_classify() {
        let a = report(vec![process(&[
            ("step", Resource::Cpu, Some(Level::Python), 100),
            ("step", Resource::Gpu, None, 50),
            ("load", Resource::Cpu, Some(Level::Library), 30),
        ])]);
        let b = report(vec![
            process(&[
                ("step", Resource::Cpu, Some(Level::Python), 60),
                ("step", Resource::Gpu, None, 70),
            ]),
            process(&[("eval", Resource::Cpu, Some(Level::Backend), 10)]),
        ]);
        let ka = kernels(&[("gemm", 2, 40), ("relu", 1, 10)]);
        let kb = kernels(&[("gemm", 2, 30), ("softmax", 3, 40)]);
        let d = diff("a", (&a, &ka), "b", (&b, &kb));

        assert_eq!(d.a.window_ns, 180);
        assert_eq!(d.b.window_ns, 140);
        for rows in [
            d.strata.iter().map(|s| &s.delta).collect::<Vec<_>>(),
            d.operations.iter().map(|s| &s.delta).collect(),
        ] {
            assert_eq!(rows.iter().map(|x| x.a_ns).sum::<Ns>(), 180);
            assert_eq!(rows.iter().map(|x| x.b_ns).sum::<Ns>(), 140);
            assert_eq!(rows.iter().map(|x| x.delta_ns).sum::<Ns>(), -40);
            let share: f64 = rows.iter().map(|x| x.b_share).sum();
            assert!((share - 1.0).abs() < 1e-12);
        }
        assert_eq!(d.added_operations().collect::<Vec<_>>(), vec!["eval"]);
        assert_eq!(d.removed_operations().collect::<Vec<_>>(), vec!["load"]);
        let step = d.operations.iter().find(|o| o.operation == "step");
        let step = step.map(|o| &o.delta);
        assert_eq!(
            step.map(|x| (x.a_ns, x.b_ns, x.change)),
            Some((150, 130, Change::Faster))
        );
        // Largest change first: step/CPU/Python (-40).
        assert_eq!(d.strata[0].stratum_label(), "CPU / Python");
        assert_eq!(d.strata[0].delta.delta_pct, Some(-40.0));

        let kt: Ns = d.kernels.iter().map(|k| k.delta.delta_ns).sum();
        assert_eq!(kt, d.b.device_time_ns - d.a.device_time_ns);
        let added: Vec<&str> = d.added_kernels().map(|k| k.name.as_str()).collect();
        let removed: Vec<&str> = d.removed_kernels().map(|k| k.name.as_str()).collect();
        assert_eq!((added, removed), (vec!["softmax"], vec!["relu"]));
        assert_eq!(d.kernels[0].name, "softmax");
        assert_eq!(d.kernels[0].delta.delta_pct, None);
    }

    #[test]
    fn identical_sides_are_the_same() {
        let a = report(vec![process(&[("s", Resource::Idle, None, 5)])]);
        let k = kernels(&[("k", 1, 5)]);
        let d = diff("a", (&a, &k), "a", (&a, &k));
        assert!(d.strata.iter().all(|s| s.delta.change == Change::Same));
        assert!(d.kernels.iter().all(|s| s.delta.change == Change::Same));
        assert_eq!(d.window.delta_pct, Some(0.0));
    }
}
