//! The per-op performance table (`strato ops`): framework ops grouped by (op, input shapes,
//! input types), with their count, device time, and — where [`crate::op_models`] has a model —
//! achieved TFLOP/s and TB/s, % of the device's peak for the op's precision and the roofline
//! bound.
//!
//! Attribution: every device op (kernel, copy, set) belongs to one op call: the *outermost*
//! framework (`Backend`) op in its launch's ancestor chain that has a model (`aten::linear`
//! rather than the `aten::addmm` beneath it; a Triton kernel to the `triton_*` op that launched
//! it; a graph-replayed kernel to the captured op the trace links it to); when no op of the
//! chain has a model, the outermost op (listed unmodelled, with the reason); without any
//! framework op, the row `(no framework op)`. An op call's device time is the sum of its device
//! ops' durations; a group's TFLOP/s is its FLOPs over its device time.
//!
//! % of peak: FLOP/s over the device's peak at the op's precision ([`crate::devices`]) for
//! ops with FLOPs; bytes/s over the memory bandwidth for ops modelled by bytes only. Bound:
//! arithmetic intensity against the ridge point (FLOP models), `memory` for bytes-only models.
//!
//! Window: the whole trace. Conservation: the rows' `total_ns` add up to the device time of all
//! device ops (`device_ns`), and each device op is counted in exactly one row.

use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::Value;
use strato_trace::{Level, Ns, TrackKind};

use crate::analyzed::Analyzed;
use crate::devices::{detect, DeviceSpec, Precision};
use crate::layers::Bound;
use crate::op_models::{model, OpCost, OpInputs};
use crate::scope::{effective_level, is_device_work};

/// Name of the row of device ops launched outside any framework op.
pub const NO_OP: &str = "(no framework op)";

/// One (op, shapes, dtypes) group.
#[derive(Debug, Clone, Serialize)]
pub struct OpRow {
    pub op: String,
    /// `Input Dims` as recorded (empty when not recorded).
    pub shapes: Vec<Vec<i64>>,
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
    pub bound: Option<Bound>,
    /// The formula's name; `None` when the op is not modelled.
    pub model: Option<&'static str>,
    /// Why the op is not modelled.
    pub reason: Option<String>,
    /// Table name of the device the group's device ops ran on (most of them), when known.
    pub device: Option<String>,
}

/// A device of the trace and its table row.
#[derive(Debug, Clone, Serialize)]
pub struct OpsDevice {
    pub rank: i64,
    pub index: i64,
    pub name: Option<String>,
    pub spec: Option<DeviceSpec>,
    pub detected_by: Option<crate::devices::DetectedBy>,
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
    pub devices: Vec<OpsDevice>,
    /// Sorted by device time, largest first.
    pub ops: Vec<OpRow>,
}

#[derive(Default)]
struct Group {
    calls: FxHashMap<u32, ()>,
    device_ops: usize,
    total_ns: Ns,
    flops: Option<f64>,
    bytes: Option<f64>,
    cost: Option<OpCost>,
    reason: Option<String>,
    devices: FxHashMap<(u32, i64), usize>,
}

/// Builds the op table. `device_spec` overrides the detected device row of every device.
pub fn ops(analyzed: &Analyzed, device_spec: Option<&DeviceSpec>) -> OpsReport {
    let (trace, scopes) = (analyzed.trace(), analyzed.scopes());
    let is_op: Vec<bool> = trace
        .spans
        .iter()
        .map(|s| effective_level(trace, s) == Level::Backend)
        .collect();
    // By time containment, not the hierarchy's parents: PyTorch records Python frames inside
    // custom ops (`vllm::unified_attention_with_output` > its Python code > the launch), and a
    // Python frame's hierarchy parent skips the op.
    let op_around = crate::modules::enclosing(trace, &is_op);
    // Per op span, the model result, computed once and only for ops on some launch chain.
    type Modelled = FxHashMap<u32, (Option<OpInputs>, Result<OpCost, String>)>;
    let mut modelled: Modelled = FxHashMap::default();
    let model_of = |modelled: &mut Modelled, i: u32| -> bool {
        modelled
            .entry(i)
            .or_insert_with(|| {
                let s = &trace.spans[i as usize];
                let inputs = trace
                    .args_text(s.args)
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .and_then(|a| OpInputs::from_args(&a));
                let r = model(trace.str(s.name), inputs.as_ref()).map_err(|e| e.to_string());
                (inputs, r)
            })
            .1
            .is_ok()
    };
    // Per launch span, its owning op (cached: many kernels share a launch chain).
    let mut owner_of_launch: FxHashMap<u32, Option<u32>> = FxHashMap::default();
    let mut groups: FxHashMap<(String, String), Group> = FxHashMap::default();
    let mut group_of_call: FxHashMap<u32, (String, String)> = FxHashMap::default();
    let (mut device_ns, mut device_ops, mut window) = (0, 0usize, (Ns::MAX, Ns::MIN));
    for s in &trace.spans {
        window = (window.0.min(s.start), window.1.max(s.end));
    }
    let mut no_op = Group::default();
    for (i, s) in trace.spans.iter().enumerate() {
        let track = trace.track(s.track);
        let TrackKind::DeviceQueue { device, .. } = track.kind else {
            continue;
        };
        if !is_device_work(s.level) {
            continue;
        }
        let dur = s.duration();
        device_ns += dur;
        device_ops += 1;
        let owner = scopes.launch_of(trace, i as u32).and_then(|l| {
            *owner_of_launch.entry(l).or_insert_with(|| {
                let mut outermost_op = None;
                let mut outermost_modelled = None;
                let mut cur = if is_op[l as usize] {
                    Some(l)
                } else {
                    op_around[l as usize]
                };
                while let Some(c) = cur {
                    outermost_op = Some(c);
                    if model_of(&mut modelled, c) {
                        outermost_modelled = Some(c);
                    }
                    cur = op_around[c as usize];
                }
                outermost_modelled.or(outermost_op)
            })
        });
        let g = match owner {
            Some(op) => {
                let key = group_of_call.entry(op).or_insert_with(|| {
                    let sp = &trace.spans[op as usize];
                    let inputs = modelled.get(&op).and_then(|m| m.0.as_ref());
                    (
                        trace.str(sp.name).to_owned(),
                        inputs.map_or(String::new(), |x| {
                            serde_json::to_string(&(&x.dims, &x.types)).unwrap_or_default()
                        }),
                    )
                });
                let g = groups.entry(key.clone()).or_default();
                if g.calls.insert(op, ()).is_none() {
                    match &modelled[&op].1 {
                        Ok(c) => {
                            if let Some(f) = c.flops {
                                *g.flops.get_or_insert(0.0) += f;
                            }
                            if let Some(b) = c.bytes {
                                *g.bytes.get_or_insert(0.0) += b;
                            }
                            g.cost = Some(c.clone());
                        }
                        Err(r) => g.reason = Some(r.clone()),
                    }
                }
                g
            }
            None => &mut no_op,
        };
        g.device_ops += 1;
        g.total_ns += dur;
        *g.devices.entry((track.rank.0, device)).or_insert(0) += 1;
    }

    // Devices and their table rows.
    let mut specs: FxHashMap<(u32, i64), Option<DeviceSpec>> = FxHashMap::default();
    let mut devices = Vec::new();
    let mut seen: Vec<(u32, i64)> = groups
        .values()
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
            None => device_spec.map(|s| crate::devices::Detected {
                spec: s.clone(),
                by: crate::devices::DetectedBy::UserSpec,
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

    let mut rows: Vec<OpRow> = Vec::with_capacity(groups.len() + 1);
    let mut modelled_ns = 0;
    let mut add_row = |op: String, shapes_types: Option<(Vec<Vec<i64>>, Vec<String>)>, g: Group| {
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
            per_s(g.bytes).map(|b| b / 1e12),
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
        if g.cost.is_some() {
            modelled_ns += g.total_ns;
        }
        let (shapes, dtypes) = shapes_types.unwrap_or_default();
        rows.push(OpRow {
            op,
            shapes,
            dtypes,
            count: g.calls.len(),
            device_ops: g.device_ops,
            total_ns: g.total_ns,
            mean_ns: if g.calls.is_empty() {
                0.0
            } else {
                g.total_ns as f64 / g.calls.len() as f64
            },
            flops: g.flops,
            bytes: g.bytes,
            precision,
            tflops,
            tbps,
            arithmetic_intensity: ai,
            peak_pct,
            bound,
            model: g.cost.as_ref().map(|c| c.model),
            reason: g.reason,
            device: spec.map(|s| s.name.into_owned()),
        });
    };
    for ((op, key), g) in groups {
        let st = serde_json::from_str::<(Vec<Vec<i64>>, Vec<String>)>(&key).ok();
        add_row(op, st, g);
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
    });
    if window.0 > window.1 {
        window = (0, 0);
    }
    OpsReport {
        window_start_ns: window.0,
        window_end_ns: window.1,
        device_ns,
        device_ops,
        modelled_ns,
        devices,
        ops: rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;

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
}
