//! The per-op performance table (`strato ops`): framework ops grouped by (op, input shapes,
//! input types), with their count, device time, and — where [`crate::models::op_models`] has a
//! model — achieved TFLOP/s and TB/s, % of the device's peak for the op's precision and the
//! roofline bound.
//!
//! Attribution: every device op (kernel, copy, set) belongs to one op call: the *outermost*
//! framework (`Backend`) op in its launch's ancestor chain that has a model (`aten::linear`
//! rather than the `aten::addmm` beneath it; a Triton kernel to the `triton_*` op that launched
//! it; a graph-replayed kernel to the captured op the trace links it to); when no op of the
//! chain has a model, the outermost op (listed unmodelled, with the reason); without any
//! framework op, the row `(no framework op)`. An op call's device time is the sum of its device
//! ops' durations; a group's TFLOP/s is its FLOPs over its device time.
//!
//! % of peak: FLOP/s over the device's peak at the op's precision ([`crate::models::devices`]) for
//! ops with FLOPs; bytes/s over the memory bandwidth for ops modelled by bytes only. Bound:
//! arithmetic intensity against the ridge point (FLOP models), `memory` for bytes-only models.
//!
//! Over peak: a row above 100% of its peak is flagged (`over_peak`, counted in
//! [`OpsReport::over_peak_rows`]): no op runs faster than the hardware, so the op's model or the
//! device row is wrong, and the figure must not pass silently.
//!
//! Collectives: an NCCL/RCCL kernel is not an op call: it goes to a row per (collective kind,
//! message bytes, dtype) with the definitions of [`crate::distributed::collectives`] (bytes =
//! NCCL-tests' size, busbw = algbw x the kind's factor, one definition:
//! [`crate::distributed::collectives::bandwidths`]), over the kernels' device time (which includes
//! waiting for peers: `strato collectives` measures the transfer alone across ranks).
//!
//! Window: the whole trace. Conservation: the rows' `total_ns` add up to the device time of all
//! device ops (`device_ns`), and each device op is counted in exactly one row.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use strato_trace::{Ns, StrId, Trace};

use crate::analyzed::Analyzed;
use crate::cross_stack::layers::Bound;
use crate::distributed::collectives::{bandwidths, CollectiveKind};
use crate::models::devices::{detect, DeviceSpec, Precision};
use crate::models::op_models::{kernel_element_size, OpCost, OpInputs};

mod registration;
mod stream;
pub use registration::{Ops, OpsSettings};
pub use stream::OpsStream;

/// Name of the row of device ops launched outside any framework op.
pub const NO_OP: &str = "(no framework op)";

/// Name prefix of the collective rows (`collective:all_reduce`).
pub const COLLECTIVE_PREFIX: &str = "collective:";

/// What a collective row says beyond an op row's fields: its message and bandwidths by the
/// definitions of [`crate::distributed::collectives`], over the kernels' device time.
#[derive(Debug, Clone, Serialize)]
pub struct CollectiveRow {
    pub kind: CollectiveKind,
    /// Bytes of one call's message (NCCL-tests' size: max(in, out) elements x dtype size);
    /// `None` when the trace does not say.
    pub message_bytes: Option<u64>,
    /// The message's dtype as the args name it (lower case, without `c10::`).
    pub dtype: Option<String>,
    /// Ranks in the group (busbw's n): the group's, else the job's world size.
    pub group_size: Option<usize>,
    /// Decimal GB/s (10^9 B/s, not GiB/s): the calls' bytes over their kernels' device time.
    pub algbw_gbps: Option<f64>,
    /// algbw x the kind's NCCL bus factor for `group_size` ranks, decimal GB/s.
    pub busbw_gbps: Option<f64>,
}

/// One (op, shapes, dtypes) group, or one (collective, message bytes, dtype) group.
#[derive(Debug, Clone, Serialize)]
pub struct OpRow {
    pub op: String,
    /// `Input Dims` as recorded (empty when not recorded; `[]` for a list input).
    pub shapes: Vec<Vec<i64>>,
    /// The shapes of the tensors of each list input (`TensorList`), parallel to `shapes`;
    /// absent when no input is a list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_lists: Vec<Vec<Vec<i64>>>,
    /// `Input type` as recorded.
    pub dtypes: Vec<String>,
    /// Op calls that launched device work.
    pub count: usize,
    /// Device ops of those calls.
    pub device_ops: usize,
    pub total_ns: Ns,
    pub mean_ns: f64,
    /// FLOPs of all calls.
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    pub precision: Option<Precision>,
    pub tflops: Option<f64>,
    pub tbps: Option<f64>,
    /// FLOP/byte.
    pub arithmetic_intensity: Option<f64>,
    pub peak_pct: Option<f64>,
    /// `peak_pct` is above 100: impossible, so the model or the device row is wrong.
    pub over_peak: bool,
    pub bound: Option<Bound>,
    /// The formula's name; `None` when the op is not modelled.
    pub model: Option<&'static str>,
    /// Why the op is not modelled, or why a modelled row lacks its bytes.
    pub reason: Option<String>,
    /// Table name of the device the group's device ops ran on (most of them), when known.
    pub device: Option<String>,
    /// For a collective row (op `collective:<kind>`): its message and bandwidths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective: Option<CollectiveRow>,
}

/// A device of the trace and its table row.
#[derive(Debug, Clone, Serialize)]
pub struct OpsDevice {
    pub rank: i64,
    pub index: i64,
    pub name: Option<String>,
    pub spec: Option<DeviceSpec>,
    pub detected_by: Option<crate::models::devices::DetectedBy>,
}

/// The op table.
#[derive(Debug, Clone, Serialize)]
pub struct OpsReport {
    pub window_start_ns: Ns,
    pub window_end_ns: Ns,
    /// Device time of every device op of the trace (the rows add up to it).
    pub device_ns: Ns,
    pub device_ops: usize,
    /// Device time in rows with a model.
    pub modelled_ns: Ns,
    /// Rows above 100% of their peak (each flagged `over_peak`).
    pub over_peak_rows: usize,
    pub devices: Vec<OpsDevice>,
    /// Sorted by device time, largest first.
    pub ops: Vec<OpRow>,
}

#[derive(Default)]
struct Group {
    /// Op calls (or collective kernels) counted in the row.
    calls: usize,
    device_ops: usize,
    total_ns: Ns,
    flops: Option<f64>,
    bytes: Option<f64>,
    cost: Option<OpCost>,
    reason: Option<String>,
    devices: FxHashMap<(u32, i64), usize>,
    /// Set on a collective row's group.
    collective: Option<CollectiveRow>,
}

/// Key of a collective row: (kind, message bytes, dtype).
type CollectiveKey = (CollectiveKind, Option<u64>, Option<String>);

/// A row's recorded inputs: (`Input Dims`, `Input type`, list shapes).
type RowInputs = (Vec<Vec<i64>>, Vec<String>, Vec<Vec<Vec<i64>>>);

/// The `model` of collective rows whose message size is known.
pub const COLLECTIVE_MODEL: &str = "collective: NCCL-tests bytes, algbw, busbw";

/// The model of op calls with one name and the same recorded inputs.
#[derive(Debug)]
struct DistinctCall {
    name: StrId,
    inputs: Option<OpInputs>,
    model: Result<OpCost, String>,
}

impl DistinctCall {
    /// The row these calls go to: (op name, `Input Dims`/`Input type`/list shapes as JSON;
    /// empty without recorded inputs).
    fn row_key(&self, trace: &Trace) -> (String, String) {
        (
            trace.str(self.name).to_owned(),
            self.inputs.as_ref().map_or(String::new(), |x| {
                serde_json::to_string(&(&x.dims, &x.types, &x.lists)).unwrap_or_default()
            }),
        )
    }
}

/// Op calls' models: each distinct (name, inputs) modelled once, each call an index to it.
#[derive(Debug, Default)]
struct Models {
    distinct: Vec<DistinctCall>,
    index: FxHashMap<(StrId, Option<OpInputs>), u32>,
}

impl Models {
    /// The index of the distinct call of an op call named `name` whose inputs and model
    /// `read` gives; modelled the first time its (name, inputs) is met.
    fn intern(
        &mut self,
        name: StrId,
        read: impl FnOnce() -> (Option<OpInputs>, Result<OpCost, String>),
    ) -> u32 {
        let (inputs, model) = read();
        let key = (name, inputs);
        if let Some(&at) = self.index.get(&key) {
            return at;
        }
        let at = self.distinct.len() as u32;
        self.distinct.push(DistinctCall {
            name,
            inputs: key.1.clone(),
            model,
        });
        self.index.insert(key, at);
        at
    }

    /// Whether the distinct call `at` has a model.
    fn is_modelled(&self, at: u32) -> bool {
        self.distinct[at as usize].model.is_ok()
    }
}

/// Builds the op table. `device_spec` overrides the detected device row of every device.
/// The whole trace read as one batch of [`OpsStream`].
pub fn ops(analyzed: &Analyzed, device_spec: Option<&DeviceSpec>) -> OpsReport {
    let trace = analyzed.trace();
    let mut stream = OpsStream::held(device_spec.cloned());
    stream.add(trace);
    stream.finish(trace)
}

/// A device op with what its row depends on.
struct AttributedOp<'a> {
    duration: Ns,
    rank: u32,
    device: i64,
    name: StrId,
    /// (distinct call, op span index) of the op that owns it.
    owner: Option<(u32, u32)>,
    /// Its collective row's key and group size, for a collective kernel.
    collective: Option<&'a (CollectiveKey, Option<usize>)>,
}

/// The rows being filled, device op by device op in trace order.
struct OpsGroups {
    models: Models,
    /// Rows by (op name, recorded inputs as JSON), in the order they are first met.
    row_of: FxHashMap<(String, String), usize>,
    groups: Vec<((String, String), Group)>,
    /// Per distinct call (`Models::distinct`), its row once known.
    row_of_distinct: Vec<Option<usize>>,
    /// Op calls (span indexes) already counted in their row.
    counted: FxHashSet<u32>,
    device_ns: Ns,
    device_ops: usize,
    no_op: Group,
    collective_groups: FxHashMap<CollectiveKey, (Group, Option<usize>)>,
}

impl OpsGroups {
    fn new(models: Models) -> OpsGroups {
        OpsGroups {
            row_of_distinct: vec![None; models.distinct.len()],
            models,
            row_of: FxHashMap::default(),
            groups: Vec::new(),
            counted: FxHashSet::default(),
            device_ns: 0,
            device_ops: 0,
            no_op: Group::default(),
            collective_groups: FxHashMap::default(),
        }
    }

    /// Counts device op `op` in its row.
    fn add(&mut self, trace: &Trace, op: &AttributedOp) {
        let dur = op.duration;
        self.device_ns += dur;
        self.device_ops += 1;
        let device = (op.rank, op.device);
        if let Some((key, n)) = op.collective {
            let (g, size) = self.collective_groups.entry(key.clone()).or_default();
            g.calls += 1;
            *size = size.or(*n);
            if let Some(b) = key.1 {
                *g.bytes.get_or_insert(0.0) += b as f64;
            }
            g.device_ops += 1;
            g.total_ns += dur;
            *g.devices.entry(device).or_insert(0) += 1;
            return;
        }
        let g = match op.owner {
            Some((at, call)) => {
                let distinct = &self.models.distinct[at as usize];
                let (row_of, groups) = (&mut self.row_of, &mut self.groups);
                let row = *self.row_of_distinct[at as usize].get_or_insert_with(|| {
                    *row_of
                        .entry(distinct.row_key(trace))
                        .or_insert_with_key(|key| {
                            groups.push((key.clone(), Group::default()));
                            groups.len() - 1
                        })
                });
                let g = &mut self.groups[row].1;
                if self.counted.insert(call) {
                    g.calls += 1;
                    match &distinct.model {
                        Ok(c) => {
                            let mut c = c.clone();
                            // A list's element size, from the kernel's name when it says it.
                            if let (None, Some(e)) = (c.bytes, c.unsized_elements) {
                                match kernel_element_size(trace.str(op.name)) {
                                    Some(size) => c.bytes = Some(e * size as f64),
                                    None => {
                                        g.reason = Some(
                                            "bytes unknown: the list's element type is not \
                                             recorded and the kernel's name does not say it"
                                                .into(),
                                        )
                                    }
                                }
                            }
                            if let Some(f) = c.flops {
                                *g.flops.get_or_insert(0.0) += f;
                            }
                            if let Some(b) = c.bytes {
                                *g.bytes.get_or_insert(0.0) += b;
                            }
                            g.cost = Some(c);
                        }
                        Err(r) => g.reason = Some(r.clone()),
                    }
                }
                g
            }
            None => &mut self.no_op,
        };
        g.device_ops += 1;
        g.total_ns += dur;
        *g.devices.entry(device).or_insert(0) += 1;
    }

    /// The table over `window` (the trace's first start to last end).
    fn report(
        self,
        trace: &Trace,
        mut window: (Ns, Ns),
        device_spec: Option<&DeviceSpec>,
    ) -> OpsReport {
        let OpsGroups {
            groups,
            device_ns,
            device_ops,
            mut no_op,
            collective_groups,
            ..
        } = self;
        // Devices and their table rows.
        let mut specs: FxHashMap<(u32, i64), Option<DeviceSpec>> = FxHashMap::default();
        let mut devices = Vec::new();
        let mut seen: Vec<(u32, i64)> = groups
            .iter()
            .map(|(_, g)| g)
            .chain(std::iter::once(&no_op))
            .flat_map(|g| g.devices.keys().copied())
            .collect();
        seen.sort_unstable();
        seen.dedup();
        for (rank, index) in seen {
            let d = trace
                .devices
                .iter()
                .find(|d| d.index == index && d.rank.is_none_or(|r| r.0 == rank));
            let found = match d {
                Some(d) => detect(d, device_spec),
                None => device_spec.map(|s| crate::models::devices::Detected {
                    spec: s.clone(),
                    by: crate::models::devices::DetectedBy::UserSpec,
                }),
            };
            specs.insert((rank, index), found.as_ref().map(|f| f.spec.clone()));
            devices.push(OpsDevice {
                rank: trace.ranks[rank as usize].rank.unwrap_or(i64::from(rank)),
                index,
                name: d.and_then(|d| d.name.clone()),
                spec: found.as_ref().map(|f| f.spec.clone()),
                detected_by: found.map(|f| f.by),
            });
        }

        let mut rows: Vec<OpRow> = Vec::with_capacity(groups.len() + collective_groups.len() + 1);
        let mut modelled_ns = 0;
        let mut add_row = |op: String, inputs: Option<RowInputs>, mut g: Group| {
            let collective = g.collective.take();
            let main_device = g
                .devices
                .iter()
                .max_by_key(|(k, v)| (**v, std::cmp::Reverse(**k)))
                .map(|(k, _)| *k);
            let spec = main_device.and_then(|k| specs.get(&k).cloned().flatten());
            let secs = g.total_ns as f64 * 1e-9;
            let per_s = |x: Option<f64>| x.filter(|_| g.total_ns > 0).map(|x| x / secs);
            let (tflops, tbps) = (
                per_s(g.flops).map(|f| f / 1e12),
                // A collective's bytes cross links, not memory: its rate is algbw, not TB/s.
                per_s(g.bytes)
                    .filter(|_| collective.is_none())
                    .map(|b| b / 1e12),
            );
            let precision = g.cost.as_ref().and_then(|c| c.precision);
            let ai = match (g.flops, g.bytes) {
                (Some(f), Some(b)) if b > 0.0 => Some(f / b),
                _ => None,
            };
            let (peak_pct, bound) = match (&g.cost, &spec) {
                (Some(c), Some(s)) if c.flops.is_some() => {
                    let peak = precision.and_then(|p| s.peak_flops(p));
                    let ridge = precision.and_then(|p| s.ridge(p));
                    (
                        peak.zip(tflops).map(|(p, t)| 100.0 * t * 1e12 / p),
                        ai.zip(ridge)
                            .map(|(a, r)| if a < r { Bound::Memory } else { Bound::Compute }),
                    )
                }
                (Some(_), Some(s)) => (
                    tbps.map(|t| 100.0 * t * 1e12 / s.bandwidth()),
                    Some(Bound::Memory),
                ),
                (Some(c), None) if c.flops.is_none() => (None, Some(Bound::Memory)),
                _ => (None, None),
            };
            let model = match &collective {
                Some(c) => c.message_bytes.map(|_| COLLECTIVE_MODEL),
                None => g.cost.as_ref().map(|c| c.model),
            };
            if model.is_some() {
                modelled_ns += g.total_ns;
            }
            let (shapes, dtypes, input_lists) = inputs.unwrap_or_default();
            rows.push(OpRow {
                op,
                shapes,
                input_lists,
                dtypes,
                count: g.calls,
                device_ops: g.device_ops,
                total_ns: g.total_ns,
                mean_ns: if g.calls == 0 {
                    0.0
                } else {
                    g.total_ns as f64 / g.calls as f64
                },
                flops: g.flops,
                bytes: g.bytes,
                precision,
                tflops,
                tbps,
                arithmetic_intensity: ai,
                peak_pct,
                over_peak: peak_pct.is_some_and(|p| p > 100.0),
                bound,
                model,
                reason: g.reason,
                device: spec.map(|s| s.name.into_owned()),
                collective,
            });
        };
        for ((op, key), g) in groups {
            let inputs = serde_json::from_str::<RowInputs>(&key).ok();
            add_row(op, inputs, g);
        }
        for ((kind, message_bytes, dtype), (mut g, group_size)) in collective_groups {
            let bw = g
                .bytes
                .and_then(|b| bandwidths(kind, b, g.total_ns, group_size));
            if message_bytes.is_none() {
                g.reason = Some("the trace does not record the collective's message size".into());
            }
            g.collective = Some(CollectiveRow {
                kind,
                message_bytes,
                dtype: dtype.clone(),
                group_size,
                algbw_gbps: bw.map(|b| b.0),
                busbw_gbps: bw.and_then(|b| b.1),
            });
            add_row(
                format!("{COLLECTIVE_PREFIX}{}", kind.as_str()),
                Some((Vec::new(), dtype.into_iter().collect(), Vec::new())),
                g,
            );
        }
        if no_op.device_ops > 0 {
            no_op.reason = Some("launched outside any framework op".into());
            add_row(NO_OP.to_owned(), None, no_op);
        }
        rows.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.op.cmp(&b.op))
                .then_with(|| a.shapes.cmp(&b.shapes))
                .then_with(|| a.dtypes.cmp(&b.dtypes))
                .then_with(|| a.input_lists.cmp(&b.input_lists))
        });
        let over_peak_rows = rows.iter().filter(|r| r.over_peak).count();
        if window.0 > window.1 {
            window = (0, 0);
        }
        OpsReport {
            window_start_ns: window.0,
            window_end_ns: window.1,
            device_ns,
            device_ops,
            modelled_ns,
            over_peak_rows,
            devices,
            ops: rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;
    use strato_trace::Level;

    /// linear > addmm > launch -> gemm kernel (1000 ns); a top-level `aten::foo` (no model)
    /// -> kernel (300 ns); a kernel without launch (200 ns). Known by construction: the GEMM
    /// kernel belongs to `aten::linear` (outermost with a model), 2·8·16·32 FLOPs over 1 us.
    #[test]
    fn kernels_go_to_the_outermost_modelled_op_and_time_is_conserved() {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let q = b.queue(0, 7);
        let lin = r#"{"Input Dims":[[8,16],[32,16],[32]],"Input type":["float","float","float"]}"#;
        b.span(t, Level::Backend, "aten::linear", 0, 100).args(lin);
        let mm = r#"{"Input Dims":[[32],[8,16],[16,32]],"Input type":["float","float","float"]}"#;
        b.span(t, Level::Backend, "aten::addmm", 10, 90).args(mm);
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 20, 30)
            .correlation(1);
        b.span(q, Level::DeviceKernel, "gemm", 200, 1200)
            .correlation(1);
        b.span(t, Level::Backend, "aten::foo", 150, 190);
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 160, 170)
            .correlation(2);
        b.span(q, Level::DeviceKernel, "foo_kernel", 1300, 1600)
            .correlation(2);
        b.span(q, Level::DeviceKernel, "orphan", 1700, 1900);
        let trace = b.build();
        let r = ops(&Analyzed::new(&trace), None);
        assert_eq!(r.device_ops, 3);
        assert_eq!(r.device_ns, 1000 + 300 + 200);
        assert_eq!(r.ops.iter().map(|o| o.total_ns).sum::<Ns>(), r.device_ns);
        assert_eq!(r.ops.iter().map(|o| o.device_ops).sum::<usize>(), 3);
        let lin = r.ops.iter().find(|o| o.op == "aten::linear").unwrap();
        assert_eq!(lin.flops, Some(2.0 * 8.0 * 16.0 * 32.0));
        assert_eq!(lin.tflops, Some(2.0 * 8.0 * 16.0 * 32.0 / 1e-6 / 1e12));
        assert_eq!(lin.shapes, vec![vec![8, 16], vec![32, 16], vec![32]]);
        assert!(r.ops.iter().all(|o| o.op != "aten::addmm"));
        let foo = r.ops.iter().find(|o| o.op == "aten::foo").unwrap();
        assert_eq!((foo.model, foo.total_ns), (None, 300));
        assert!(foo.reason.as_deref().unwrap().contains("no model"));
        let orphan = r.ops.iter().find(|o| o.op == NO_OP).unwrap();
        assert_eq!(orphan.total_ns, 200);
        assert_eq!(r.modelled_ns, 1000);
        // No device row is known: no peak, but the TFLOP/s stands.
        assert_eq!(lin.peak_pct, None);
        let spec = DeviceSpec::from_json(
            r#"{"name":"lab","memory_bandwidth_gbs":1000,"fp32_tflops":0.5}"#,
        )
        .unwrap();
        let r = ops(&Analyzed::new(&trace), Some(&spec));
        let lin = r.ops.iter().find(|o| o.op == "aten::linear").unwrap();
        let want = 100.0 * (8192.0 / 1e-6) / 0.5e12;
        assert!((lin.peak_pct.unwrap() - want).abs() < 1e-9);
    }

    /// A memory device of 1000 GB/s (1 TB/s) and no compute peaks.
    fn lab(bandwidth_gbs: f64) -> DeviceSpec {
        DeviceSpec::from_json(&format!(
            r#"{{"name":"lab","memory_bandwidth_gbs":{bandwidth_gbs}}}"#
        ))
        .unwrap()
    }

    /// A bf16 <- fp32 `_to_copy` of 2^20 elements (under `aten::to`, unmodelled here: only
    /// `_to_copy`'s dtype is recorded) whose kernel takes 2 us: 6 MiB moved (4 + 2 bytes per
    /// element, not 8), 3.15 TB/s. On a 4 TB/s device that is 78.6% of peak; on a 3 TB/s one it
    /// is above 100%, and the row and the summary say so.
    #[test]
    fn a_conversion_counts_each_dtype_once_and_over_peak_is_flagged() {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let q = b.queue(0, 7);
        b.span(t, Level::Backend, "aten::to", 0, 100).args(
            r#"{"Input Dims":[[1048576],[],[],[],[],[],[],[]],
                "Input type":["float","Scalar","Scalar","","","Scalar","Scalar",""]}"#,
        );
        b.span(t, Level::Backend, "aten::_to_copy", 10, 90).args(
            r#"{"Input Dims":[[1048576],[],[],[],[],[],[]],
                "Input type":["float","Scalar","","","","Scalar",""],
                "Concrete Inputs":["","15","","","","False",""]}"#,
        );
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 20, 30)
            .correlation(1);
        b.span(q, Level::DeviceKernel, "convert_kernel", 200, 2200)
            .correlation(1);
        let trace = b.build();
        let bytes = 6.0 * 1048576.0;
        let r = ops(&Analyzed::new(&trace), Some(&lab(4000.0)));
        let row = r.ops.iter().find(|o| o.op == "aten::_to_copy").unwrap();
        assert_eq!(row.bytes, Some(bytes));
        let tbps = bytes / 2e-6 / 1e12;
        assert!((row.tbps.unwrap() - tbps).abs() < 1e-12);
        assert!((row.peak_pct.unwrap() - 100.0 * tbps / 4.0).abs() < 1e-9);
        assert!(!row.over_peak);
        assert_eq!(r.over_peak_rows, 0);
        let r = ops(&Analyzed::new(&trace), Some(&lab(3000.0)));
        let row = r.ops.iter().find(|o| o.op == "aten::_to_copy").unwrap();
        assert!(row.peak_pct.unwrap() > 100.0);
        assert!(row.over_peak);
        assert_eq!(r.over_peak_rows, 1);
    }

    /// `aten::cat` of a [4,1,768] and a [4,196,768] tensor (the H100 Falconsai trace's call)
    /// launching the kernel PyTorch names `CatArrayBatchedCopy<OpaqueType<2u>...>` for 1 us:
    /// bytes = 2 x 2 x (4·768 + 4·196·768), the element size from the kernel's name. Two calls
    /// of other shapes make another row; a kernel whose name says nothing leaves the bytes
    /// unknown with the reason.
    #[test]
    fn cat_of_a_tensor_list_is_a_copy_with_known_bytes() {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let q = b.queue(0, 7);
        let cat = |dims: &str| {
            format!(r#"{{"Input Dims":[{dims},[]],"Input type":["TensorList","Scalar"]}}"#)
        };
        let kernel = "CatArrayBatchedCopy<at::native::OpaqueType<2u>, unsigned int, 3, 64, 64>";
        b.span(t, Level::Backend, "aten::cat", 0, 100)
            .args(&cat("[[4,1,768],[4,196,768]]"));
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(q, Level::DeviceKernel, kernel, 200, 1200)
            .correlation(1);
        b.span(t, Level::Backend, "aten::cat", 300, 400)
            .args(&cat("[[8,8],[8,8]]"));
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 310, 320)
            .correlation(2);
        b.span(q, Level::DeviceKernel, "some_copy_kernel", 1300, 1400)
            .correlation(2);
        let trace = b.build();
        let r = ops(&Analyzed::new(&trace), None);
        let big = r
            .ops
            .iter()
            .find(|o| {
                o.input_lists
                    .first()
                    .is_some_and(|l| l.len() == 2 && l[0] == [4, 1, 768])
            })
            .unwrap();
        let elements = 4.0 * 768.0 + 4.0 * 196.0 * 768.0;
        assert_eq!(big.bytes, Some(2.0 * 2.0 * elements));
        assert!((big.tbps.unwrap() - 4.0 * elements / 1e-6 / 1e12).abs() < 1e-12);
        assert!(big.model.unwrap().starts_with("concatenation"));
        let small = r
            .ops
            .iter()
            .find(|o| o.input_lists.first().is_some_and(|l| l[0] == [8, 8]))
            .unwrap();
        assert_eq!(small.bytes, None);
        assert!(small.reason.as_deref().unwrap().contains("kernel's name"));
        assert_eq!(r.ops.iter().map(|o| o.total_ns).sum::<Ns>(), r.device_ns);
    }

    /// Two all-reduce kernels of 1000 floats (4000 bytes) in a group of 4, 1 us each, and one
    /// of another size: a row per (kind, size, dtype); algbw = 8000 B / 2000 ns = 4 GB/s,
    /// busbw = 4 x 2·3/4 = 6 GB/s; the collective rows and the op rows add up to the device
    /// time, and the collective kernels are in no op's row.
    #[test]
    fn collectives_get_rows_with_bytes_algbw_and_busbw() {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let q = b.queue(0, 7);
        let args = |n: u64| {
            format!(
                r#"{{"Collective name":"allreduce","In msg nelems":{n},"Out msg nelems":{n},
                    "dtype":"Float","Group size":4}}"#
            )
        };
        let kernel = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)";
        for (k, (start, n)) in [(0, 1000), (2000, 1000), (4000, 64)]
            .into_iter()
            .enumerate()
        {
            let c = k as u64 + 1;
            b.span(t, Level::Backend, "nccl:all_reduce", start, start + 100);
            b.span(
                t,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                start + 10,
                start + 20,
            )
            .correlation(c);
            b.span(q, Level::DeviceKernel, kernel, start + 500, start + 1500)
                .correlation(c)
                .args(&args(n));
        }
        let trace = b.build();
        let r = ops(&Analyzed::new(&trace), None);
        assert_eq!(r.ops.iter().map(|o| o.total_ns).sum::<Ns>(), r.device_ns);
        assert!(r.ops.iter().all(|o| o.op != "nccl:all_reduce"));
        let rows: Vec<&OpRow> = r.ops.iter().filter(|o| o.collective.is_some()).collect();
        assert_eq!(rows.len(), 2);
        let big = rows
            .iter()
            .find(|o| o.collective.as_ref().unwrap().message_bytes == Some(4000))
            .unwrap();
        let c = big.collective.as_ref().unwrap();
        assert_eq!(big.op, "collective:all_reduce");
        assert_eq!(
            (big.count, big.total_ns, big.bytes),
            (2, 2000, Some(8000.0))
        );
        assert_eq!(c.dtype.as_deref(), Some("float"));
        assert_eq!(c.group_size, Some(4));
        assert_eq!(c.algbw_gbps, Some(4.0));
        assert_eq!(c.busbw_gbps, Some(6.0));
        assert_eq!(big.tbps, None);
        assert_eq!(big.model, Some(COLLECTIVE_MODEL));
        assert_eq!(r.modelled_ns, 3000);
    }

    /// `trace` handed to [`OpsStream`] `n` spans at a time (each batch with every table).
    fn streamed(trace: &Trace, n: usize) -> OpsReport {
        let mut stream = OpsStream::new(None);
        for chunk in trace.spans.chunks(n) {
            let batch = Trace {
                spans: chunk.to_vec(),
                ..trace.clone()
            };
            stream.add(&batch);
        }
        let mut tables = trace.clone();
        tables.spans.clear();
        stream.finish(&tables)
    }

    /// The rules the op table shares with the whole-trace analyses, by construction, whole
    /// and streamed one span at a time: a span that overlaps the op around it without nesting
    /// ends that op (the launch after it has no op); of two spans with one correlation the
    /// accelerator API call is the launch, even when it comes second; a collective's message
    /// is read from the `record_param_comms` op around its launch, in another batch.
    #[test]
    fn launch_rules_and_collectives_by_construction() {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let q = b.queue(0, 7);
        // aten::foo [0, 100]; a Python frame [50, 150] overlaps it without nesting; the
        // launch at [60, 70] is then outside any op.
        b.span(t, Level::Backend, "aten::foo", 0, 100);
        b.span(t, Level::Python, "frame.py(1): f", 50, 150);
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 60, 70)
            .correlation(1);
        b.span(q, Level::DeviceKernel, "k1", 200, 300)
            .correlation(1);
        // Correlation 2: first a non-API span under aten::bar, then the API call under
        // aten::baz: the kernel is baz's.
        b.span(t, Level::Backend, "aten::bar", 400, 500);
        b.span(t, Level::Library, "marker", 410, 420).correlation(2);
        b.span(t, Level::Backend, "aten::baz", 600, 700);
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 610, 620)
            .correlation(2);
        b.span(q, Level::DeviceKernel, "k2", 800, 900)
            .correlation(2);
        // A collective: its size on the CPU op around the launch only.
        b.span(t, Level::Backend, "record_param_comms", 1000, 1100).args(
            r#"{"Collective name":"allreduce","In msg nelems":256,"Out msg nelems":256,"dtype":"Float","Group size":2}"#,
        );
        b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", 1010, 1020)
            .correlation(3);
        b.span(
            q,
            Level::DeviceKernel,
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            1200,
            2200,
        )
        .correlation(3);
        let trace = b.build();
        let whole = ops(&Analyzed::new(&trace), None);
        let row = |r: &OpsReport, op: &str| {
            r.ops
                .iter()
                .find(|o| o.op == op)
                .map(|o| (o.count, o.total_ns))
        };
        assert_eq!(row(&whole, NO_OP), Some((0, 100)));
        assert_eq!(row(&whole, "aten::foo"), None);
        assert_eq!(row(&whole, "aten::baz"), Some((1, 100)));
        assert_eq!(row(&whole, "aten::bar"), None);
        let c = whole.ops.iter().find(|o| o.collective.is_some()).unwrap();
        let cr = c.collective.as_ref().unwrap();
        assert_eq!((c.op.as_str(), c.total_ns), ("collective:all_reduce", 1000));
        assert_eq!((cr.message_bytes, cr.group_size), (Some(1024), Some(2)));
        assert_eq!(whole.device_ns, 1200);
        let expected = serde_json::to_string(&whole).unwrap();
        for n in [1, 2, 5] {
            let got = serde_json::to_string(&streamed(&trace, n)).unwrap();
            assert_eq!(got, expected, "batches of {n}");
        }
    }
}
