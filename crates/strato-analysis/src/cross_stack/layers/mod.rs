//! Layer / kernel / model tables and roofline (XSP analyses A1-A15, seed 001).
//!
//! - **Layer** instances are, by default, top-level framework ops: `Backend` spans with no
//!   `Backend` ancestor ([`LayerSource::Op`]); or annotations (`Operation` spans other than step
//!   markers, the innermost one enclosing) with [`LayerSource::Annotation`]. A layer instance
//!   owns the device work whose launch descends from it ([`crate::cross_stack::hierarchy`]) and the
//!   `[memory]` allocations recorded on its thread while it is the innermost layer there.
//!   Per layer name: occurrences, CPU latency (total, mean, trimmed mean, min, max), type
//!   distribution (share of occurrences and of CPU time), allocated bytes, its kernels and
//!   their total, GPU latency (sum of its kernels' durations per occurrence) beside CPU latency,
//!   and the roofline where FLOPs and bytes are known.
//! - **Kernels**: per kernel name, count and duration statistics (total, mean, std, min,
//!   median, max, trimmed mean), the most common grid and block, achieved occupancy, and the
//!   roofline where Nsight Compute metrics are attached.
//! - **Model**: per `ProfilerStep#N`, CPU latency, end-to-end latency (to the end of the last
//!   device op it launched), GPU busy time and FLOPs (of the layer instances of the process,
//!   on any thread, that start in the step); per process the step throughput.
//!
//! FLOPs and bytes (see `docs/analyses/layers-roofline.md`): an op's `flops` arg (PyTorch
//! `with_flops`), else the FLOP-carrying per-op models of [`crate::models::op_models`] (GEMM
//! family, attention, convolution forward/backward; the same formulas `strato ops` uses, from
//! `Input Dims`, `Input type` and `Concrete Inputs`); bytes are the compulsory traffic (each
//! input read once, the output written once) when element types are known. Ops modelled by
//! bytes only do not enter the layer roofline (it needs FLOPs). Only ops that launched
//! device work (themselves or through a descendant) count. A layer whose own cost is unknown
//! sums its descendants' known costs. Kernel FLOPs and DRAM bytes come only from
//! Nsight Compute. Anything missing stays `None` ("unknown"): nothing is guessed.
//!
//! Windows and conservation: every table covers the whole trace. Per layer name the occurrence
//! counts add up to the number of layer instances and the type-distribution shares to 100%;
//! every kernel counted under a layer is counted once; the kernel table's counts add up to the
//! number of kernels.

use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::Value;
use strato_trace::{Level, Ns, Trace, TrackKind};

use crate::analyzed::Analyzed;
use crate::cross_stack::hierarchy::UNDER_BACKEND;
use crate::models::devices::{detect, DeviceSpec, Precision};
use crate::models::op_models::{self, OpInputs};
use crate::scope::{effective_level, flatten_innermost, is_device_work, is_step_name, Scopes};

mod registration;
mod roofline;
pub mod text;
pub use registration::{LayerBy, Layers, LayersResult, LayersSettings};
pub use roofline::{RooflineAnalysis, RooflineResult, RooflineSettings};

/// What a layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerSource {
    /// Top-level framework ops.
    #[default]
    Op,
    /// User / module annotations.
    Annotation,
}

/// Options of [`layers`].
#[derive(Debug, Clone, Copy)]
pub struct LayersOptions {
    pub source: LayerSource,
    /// Fraction trimmed from each end for trimmed means (0.1 = 10% of the lowest and highest).
    pub trim: f64,
    /// Samples per step, to turn steps/s into samples/s.
    pub batch_size: Option<u64>,
}

impl Default for LayersOptions {
    fn default() -> Self {
        LayersOptions {
            source: LayerSource::Op,
            trim: 0.1,
            batch_size: None,
        }
    }
}

/// Memory- or compute-bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Memory,
    Compute,
}

/// Roofline figures; every field is `None` when its inputs are unknown.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Roofline {
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    pub precision: Option<Precision>,
    /// FLOP per byte.
    pub arithmetic_intensity: Option<f64>,
    /// FLOP/s over the device time.
    pub attained_flops_per_s: Option<f64>,
    /// Ridge point of the device at this precision (FLOP/byte).
    pub ridge: Option<f64>,
    pub bound: Option<Bound>,
    /// Attained / the roof at this intensity, in percent.
    pub roof_pct: Option<f64>,
}

fn roofline(
    flops: Option<f64>,
    bytes: Option<f64>,
    precision: Option<Precision>,
    device_ns: Ns,
    spec: Option<&DeviceSpec>,
) -> Roofline {
    let ai = match (flops, bytes) {
        (Some(f), Some(b)) if b > 0.0 => Some(f / b),
        _ => None,
    };
    let attained = flops
        .filter(|_| device_ns > 0)
        .map(|f| f / (device_ns as f64 * 1e-9));
    let peak = spec.zip(precision).and_then(|(s, p)| s.peak_flops(p));
    let ridge = spec.zip(precision).and_then(|(s, p)| s.ridge(p));
    let bound = ai
        .zip(ridge)
        .map(|(a, r)| if a < r { Bound::Memory } else { Bound::Compute });
    let roof_pct = match (ai, attained, peak, spec) {
        (Some(a), Some(x), Some(peak), Some(s)) => {
            let roof = peak.min(a * s.bandwidth());
            (roof > 0.0).then(|| 100.0 * x / roof)
        }
        _ => None,
    };
    Roofline {
        flops,
        bytes,
        precision,
        arithmetic_intensity: ai,
        attained_flops_per_s: attained,
        ridge,
        bound,
        roof_pct,
    }
}

/// Duration statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    pub count: usize,
    pub total_ns: Ns,
    pub mean_ns: f64,
    pub std_ns: f64,
    pub min_ns: Ns,
    pub median_ns: f64,
    pub max_ns: Ns,
    pub trimmed_mean_ns: f64,
}

/// Statistics of `values` (sorted in place).
pub fn stats(values: &mut [Ns], trim: f64) -> Stats {
    if values.is_empty() {
        return Stats::default();
    }
    values.sort_unstable();
    let n = values.len();
    let total: Ns = values.iter().sum();
    let mean = total as f64 / n as f64;
    let var = values
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n as f64;
    let median = if n % 2 == 1 {
        values[n / 2] as f64
    } else {
        (values[n / 2 - 1] + values[n / 2]) as f64 / 2.0
    };
    Stats {
        count: n,
        total_ns: total,
        mean_ns: mean,
        std_ns: var.sqrt(),
        min_ns: values[0],
        median_ns: median,
        max_ns: values[n - 1],
        trimmed_mean_ns: trimmed_mean(values, trim),
    }
}

/// Mean of sorted `values` without the lowest and highest `floor(trim * n)` each.
pub fn trimmed_mean(sorted: &[Ns], trim: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let k = ((trim.clamp(0.0, 0.499) * n as f64).floor() as usize).min((n - 1) / 2);
    let kept = &sorted[k..n - k];
    kept.iter().map(|&v| v as f64).sum::<f64>() / kept.len() as f64
}

/// One kernel name of a layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerKernel {
    pub name: String,
    pub count: usize,
    pub total_ns: Ns,
}

/// One layer name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerRow {
    pub name: String,
    pub occurrences: usize,
    pub cpu: Stats,
    pub share_of_occurrences_pct: f64,
    pub share_of_cpu_time_pct: f64,
    /// Sum of positive `[memory]` `Bytes` while it ran (`None`: the trace has no memory events).
    pub allocated_bytes: Option<i64>,
    pub allocations: usize,
    pub kernels: usize,
    pub kernel_time_ns: Ns,
    /// Per occurrence: sum of its kernels' durations (occurrences without kernels count 0).
    pub gpu: Stats,
    /// Top kernels by time (at most 5).
    pub top_kernels: Vec<LayerKernel>,
    /// Occurrences whose FLOPs are known.
    pub flops_known: usize,
    pub roofline: Roofline,
}

/// One kernel name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    pub name: String,
    pub duration: Stats,
    pub grid: Option<Vec<i64>>,
    pub block: Option<Vec<i64>>,
    /// Distinct (grid, block) launch configurations.
    pub configurations: usize,
    pub occupancy_pct: Option<f64>,
    /// Launches with Nsight Compute metrics.
    pub with_metrics: usize,
    pub roofline: Roofline,
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRow {
    pub rank: i64,
    pub pid: i64,
    pub name: String,
    pub start_ns: Ns,
    pub cpu_ns: Ns,
    pub end_to_end_ns: Ns,
    pub gpu_busy_ns: Ns,
    pub device_ops: usize,
    pub flops: Option<f64>,
}

/// Per process model summary (A1, A15).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRow {
    pub rank: i64,
    pub pid: i64,
    pub steps: usize,
    pub latency: Stats,
    pub end_to_end: Stats,
    pub steps_per_s: f64,
    pub samples_per_s: Option<f64>,
    pub gpu_busy_ns: Ns,
    pub roofline: Roofline,
}

/// The device the roofline is drawn against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoofDevice {
    pub rank: i64,
    pub device: i64,
    pub name: Option<String>,
    /// The device table row, when the name is in the table.
    pub spec: Option<DeviceSpec>,
}

/// All tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayersReport {
    pub source: LayerSource,
    pub trim: f64,
    pub device: Option<RoofDevice>,
    pub layer_instances: usize,
    pub layers: Vec<LayerRow>,
    pub kernel_count: usize,
    pub kernels: Vec<KernelRow>,
    pub steps: Vec<StepRow>,
    pub models: Vec<ModelRow>,
    pub notes: Vec<String>,
}

/// FLOPs / bytes / precision of one op.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cost {
    flops: Option<f64>,
    bytes: Option<f64>,
    precision: Option<Precision>,
}

impl Cost {
    fn add(&mut self, o: &Cost) {
        if let Some(f) = o.flops {
            *self.flops.get_or_insert(0.0) += f;
        }
        if let Some(b) = o.bytes {
            *self.bytes.get_or_insert(0.0) += b;
        }
        if self.precision.is_none() {
            self.precision = o.precision;
        }
    }
}

/// The cost of one op for the layer roofline: the op's `flops` arg (PyTorch `with_flops`)
/// when recorded, else the FLOP-carrying models of [`crate::models::op_models`] (the one source of
/// the formulas, shared with `strato ops`). Ops modelled by bytes only (elementwise, norms, ...)
/// and ops without a model give `None` here: the layer roofline needs FLOPs, and a layer whose
/// own FLOPs are unknown sums its descendants' known costs instead.
fn op_cost(name: &str, args: &Value) -> Option<Cost> {
    if let Some(f) = args.get("flops").and_then(Value::as_f64) {
        let precision = args
            .get("Input type")
            .and_then(Value::as_array)
            .and_then(|v| {
                v.iter()
                    .find_map(|t| Precision::from_torch_type(t.as_str()?))
            })
            .map(|p| p.0);
        return Some(Cost {
            flops: Some(f),
            bytes: None,
            precision,
        });
    }
    let inputs = OpInputs::from_args(args)?;
    let c = op_models::model(name, Some(&inputs)).ok()?;
    c.flops?;
    Some(Cost {
        flops: c.flops,
        bytes: c.bytes,
        precision: c.precision,
    })
}

fn parse_args(trace: &Trace, args: Option<strato_trace::ArgsId>) -> Option<Value> {
    trace
        .args_text(args)
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
}

fn i64_list(v: Option<&Value>) -> Option<Vec<i64>> {
    v?.as_array()?.iter().map(Value::as_i64).collect()
}

/// Nsight Compute figures of a kernel: (flops, dram bytes, dominant precision).
fn ncu_cost(args: &Value) -> Option<Cost> {
    let m = args.get("ncu").unwrap_or(args);
    let flops = m.get("flops").and_then(Value::as_f64);
    let bytes = m.get("dram_bytes").and_then(Value::as_f64);
    if flops.is_none() && bytes.is_none() {
        return None;
    }
    let precision = [
        ("flops_fp64", Precision::Fp64),
        ("flops_fp32", Precision::Fp32),
        ("flops_fp16", Precision::Fp16),
    ]
    .into_iter()
    .filter_map(|(k, p)| m.get(k).and_then(Value::as_f64).map(|v| (v, p)))
    .filter(|(v, _)| *v > 0.0)
    .max_by(|a, b| a.0.total_cmp(&b.0))
    .map(|x| x.1);
    Some(Cost {
        flops,
        bytes,
        precision,
    })
}

/// Computes every table (the context's scopes and hierarchy, built once).
pub fn layers(analyzed: &Analyzed, options: &LayersOptions) -> LayersReport {
    let (trace, scopes, h) = (analyzed.trace(), analyzed.scopes(), analyzed.hierarchy());
    let n = trace.spans.len();
    let mut notes = Vec::new();
    let levels: Vec<Level> = trace
        .spans
        .iter()
        .map(|s| effective_level(trace, s))
        .collect();
    // Thread spans in an order where parents come before children.
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&i| {
            matches!(
                trace.track(trace.spans[i as usize].track).kind,
                TrackKind::Thread { .. }
            )
        })
        .collect();
    order.sort_unstable_by_key(|&i| {
        let s = &trace.spans[i as usize];
        (
            s.start,
            std::cmp::Reverse(s.end),
            levels[i as usize].code(),
            i,
        )
    });
    let is_layer = |i: u32| -> bool {
        let s = &trace.spans[i as usize];
        match options.source {
            LayerSource::Op => {
                levels[i as usize] == Level::Backend
                    && h.parent[i as usize].is_none_or(|p| h.flags[p as usize] & UNDER_BACKEND == 0)
            }
            LayerSource::Annotation => {
                levels[i as usize] == Level::Operation && !is_step_name(trace.str(s.name))
            }
        }
    };
    let mut layer_of: Vec<Option<u32>> = vec![None; n];
    for &i in &order {
        layer_of[i as usize] = if is_layer(i) {
            Some(i)
        } else {
            h.parent[i as usize].and_then(|p| layer_of[p as usize])
        };
    }
    // Spans that launched device work themselves or through a descendant: only their FLOPs
    // count (an op that ran on the CPU must not count against device time).
    let mut launched = vec![false; n];
    for o in &scopes.device_owners {
        if let Some(l) = o.launch {
            launched[l as usize] = true;
        }
    }
    for &i in order.iter().rev() {
        if launched[i as usize] {
            if let Some(p) = h.parent[i as usize] {
                launched[p as usize] = true;
            }
        }
    }
    // Costs bottom-up: own cost, else the sum of the children's. A parent comes before its
    // children in `order`: walking it backwards, a span's children are summed when it is
    // reached. Held: the sums of the spans not reached yet (those open where the walk is) and
    // the costs of the layer instances, not a cost per span (40 bytes each).
    let mut sums: FxHashMap<u32, Cost> = FxHashMap::default();
    let mut layer_cost: FxHashMap<u32, Cost> = FxHashMap::default();
    for &i in order.iter().rev() {
        let s = &trace.spans[i as usize];
        let own = if levels[i as usize] == Level::Backend && launched[i as usize] {
            parse_args(trace, s.args).and_then(|a| op_cost(trace.str(s.name), &a))
        } else {
            None
        };
        let children = sums.remove(&i);
        let Some(c) = own.or(children) else { continue };
        if is_layer(i) {
            layer_cost.insert(i, c);
        }
        if let Some(p) = h.parent[i as usize] {
            sums.entry(p).or_default().add(&c);
        }
    }
    let cost_of = |i: u32| layer_cost.get(&i).copied().unwrap_or_default();
    let layer_instances: Vec<u32> = order.iter().copied().filter(|&i| is_layer(i)).collect();

    // Device work per layer instance, the roofline device, the kernel table.
    let mut device_count: FxHashMap<(u32, i64), usize> = FxHashMap::default();
    let mut per_instance_gpu: FxHashMap<u32, (usize, Ns)> = FxHashMap::default();
    let mut layer_kernels: FxHashMap<(u32, u32), (usize, Ns)> = FxHashMap::default();
    struct KAcc {
        durations: Vec<Ns>,
        configs: FxHashMap<(Vec<i64>, Vec<i64>), usize>,
        occupancy: (f64, usize),
        with_metrics: usize,
        cost: Cost,
        metric_ns: Ns,
    }
    let mut kernels: FxHashMap<u32, KAcc> = FxHashMap::default();
    let mut kernel_count = 0usize;
    for (i, s) in trace.spans.iter().enumerate() {
        let track = trace.track(s.track);
        let TrackKind::DeviceQueue { device, .. } = track.kind else {
            continue;
        };
        if !is_device_work(s.level) {
            continue;
        }
        *device_count.entry((track.rank.0, device)).or_insert(0) += 1;
        let dur = s.duration();
        if let Some(layer) = scopes
            .launch_of(trace, i as u32)
            .and_then(|l| layer_of[l as usize])
        {
            let e = per_instance_gpu.entry(layer).or_insert((0, 0));
            e.0 += 1;
            e.1 += dur;
            let lk = layer_kernels
                .entry((trace.spans[layer as usize].name.0, s.name.0))
                .or_insert((0, 0));
            lk.0 += 1;
            lk.1 += dur;
        }
        if s.level != Level::DeviceKernel {
            continue;
        }
        kernel_count += 1;
        let k = kernels.entry(s.name.0).or_insert_with(|| KAcc {
            durations: Vec::new(),
            configs: FxHashMap::default(),
            occupancy: (0.0, 0),
            with_metrics: 0,
            cost: Cost::default(),
            metric_ns: 0,
        });
        k.durations.push(dur);
        if let Some(args) = parse_args(trace, s.args) {
            let grid = i64_list(args.get("grid"));
            let block = i64_list(args.get("block"));
            if let (Some(g), Some(b)) = (grid, block) {
                *k.configs.entry((g, b)).or_insert(0) += 1;
            }
            if let Some(o) = args
                .get("est. achieved occupancy %")
                .and_then(Value::as_f64)
                .or_else(|| {
                    args.get("ncu")
                        .unwrap_or(&args)
                        .get("occupancy_pct")
                        .and_then(Value::as_f64)
                })
            {
                k.occupancy.0 += o;
                k.occupancy.1 += 1;
            }
            if let Some(c) = ncu_cost(&args) {
                k.with_metrics += 1;
                k.cost.add(&c);
                k.metric_ns += dur;
            }
        }
    }
    let roof_device = device_count
        .iter()
        .max_by_key(|(k, v)| (**v, std::cmp::Reverse(**k)))
        .map(|(&(rank, device), _)| {
            let d = trace
                .devices
                .iter()
                .find(|d| d.index == device && d.rank.is_none_or(|r| r.0 == rank));
            let name = d.and_then(|d| d.name.clone());
            let spec = d.and_then(|d| detect(d, None)).map(|found| found.spec);
            RoofDevice {
                rank: trace.ranks[rank as usize].rank.unwrap_or(i64::from(rank)),
                device,
                name,
                spec,
            }
        });
    let spec = roof_device.as_ref().and_then(|d| d.spec.as_ref());
    match &roof_device {
        Some(d) if d.spec.is_none() => notes.push(format!(
            "device {} ({}) is not in the device table: ridge points and bounds are unknown",
            d.device,
            d.name
                .as_deref()
                .filter(|n| !n.trim().is_empty())
                .unwrap_or("unnamed")
        )),
        None => notes.push("no device work: no roofline".into()),
        _ => {}
    }

    // Memory allocations per layer instance.
    let has_memory = trace
        .instants
        .iter()
        .any(|e| trace.str(e.name) == "[memory]");
    let mut alloc: FxHashMap<u32, (i64, usize)> = FxHashMap::default();
    if has_memory {
        let mut by_track: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for &i in &layer_instances {
            by_track
                .entry(trace.spans[i as usize].track.0)
                .or_default()
                .push(i);
        }
        let segments: FxHashMap<u32, Vec<(Ns, Ns, u32)>> = by_track
            .into_iter()
            .map(|(t, list)| (t, flatten_innermost(trace, &list)))
            .collect();
        for e in &trace.instants {
            if trace.str(e.name) != "[memory]" {
                continue;
            }
            let Some(seg) = segments.get(&e.track.0) else {
                continue;
            };
            let k = seg.partition_point(|s| s.0 <= e.ts);
            let Some(&(_, end, layer)) = k.checked_sub(1).and_then(|k| seg.get(k)) else {
                continue;
            };
            if e.ts >= end {
                continue;
            }
            let bytes = parse_args(trace, e.args)
                .and_then(|a| a.get("Bytes").and_then(Value::as_i64))
                .unwrap_or(0);
            if bytes > 0 {
                let a = alloc.entry(layer).or_insert((0, 0));
                a.0 += bytes;
                a.1 += 1;
            }
        }
    } else {
        notes.push(
            "no [memory] events (profile_memory off or args not kept): allocated bytes unknown"
                .into(),
        );
    }

    // Layer rows.
    struct LAcc {
        cpu: Vec<Ns>,
        gpu: Vec<Ns>,
        kernels: usize,
        kernel_ns: Ns,
        alloc: i64,
        allocations: usize,
        flops_known: usize,
        cost: Cost,
        cost_ns: Ns,
    }
    let mut by_name: FxHashMap<u32, LAcc> = FxHashMap::default();
    for &i in &layer_instances {
        let s = &trace.spans[i as usize];
        let a = by_name.entry(s.name.0).or_insert_with(|| LAcc {
            cpu: Vec::new(),
            gpu: Vec::new(),
            kernels: 0,
            kernel_ns: 0,
            alloc: 0,
            allocations: 0,
            flops_known: 0,
            cost: Cost::default(),
            cost_ns: 0,
        });
        a.cpu.push(s.duration());
        let (k, g) = per_instance_gpu.get(&i).copied().unwrap_or((0, 0));
        a.gpu.push(g);
        a.kernels += k;
        a.kernel_ns += g;
        if let Some(&(b, c)) = alloc.get(&i) {
            a.alloc += b;
            a.allocations += c;
        }
        let c = cost_of(i);
        if c.flops.is_some() {
            a.flops_known += 1;
            a.cost.add(&c);
            a.cost_ns += g;
        }
    }
    let total_instances = layer_instances.len().max(1) as f64;
    let total_cpu: Ns = layer_instances
        .iter()
        .map(|&i| trace.spans[i as usize].duration())
        .sum();
    let mut kernels_of: FxHashMap<u32, Vec<LayerKernel>> = FxHashMap::default();
    for ((layer, kernel), (count, total)) in layer_kernels {
        kernels_of.entry(layer).or_default().push(LayerKernel {
            name: trace.strings.get(strato_trace::StrId(kernel)).to_owned(),
            count,
            total_ns: total,
        });
    }
    let mut layers: Vec<LayerRow> = by_name
        .into_iter()
        .map(|(name, mut a)| {
            let mut top = kernels_of.remove(&name).unwrap_or_default();
            top.sort_by(|x, y| {
                y.total_ns
                    .cmp(&x.total_ns)
                    .then_with(|| x.name.cmp(&y.name))
            });
            top.truncate(5);
            let cpu = stats(&mut a.cpu, options.trim);
            LayerRow {
                name: trace.strings.get(strato_trace::StrId(name)).to_owned(),
                occurrences: cpu.count,
                share_of_occurrences_pct: 100.0 * cpu.count as f64 / total_instances,
                share_of_cpu_time_pct: if total_cpu > 0 {
                    100.0 * cpu.total_ns as f64 / total_cpu as f64
                } else {
                    0.0
                },
                cpu,
                allocated_bytes: has_memory.then_some(a.alloc),
                allocations: a.allocations,
                kernels: a.kernels,
                kernel_time_ns: a.kernel_ns,
                gpu: stats(&mut a.gpu, options.trim),
                top_kernels: top,
                flops_known: a.flops_known,
                roofline: roofline(
                    a.cost.flops,
                    a.cost.bytes,
                    a.cost.precision,
                    a.cost_ns,
                    spec,
                ),
            }
        })
        .collect();
    layers.sort_by(|a, b| {
        b.cpu
            .total_ns
            .cmp(&a.cpu.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    if layers.iter().all(|l| l.flops_known == 0) {
        notes.push(
            "no layer has known FLOPs (needs with_flops, or record_shapes for matmul/linear, \
             plus Concrete Inputs for conv)"
                .into(),
        );
    }

    // Kernel rows.
    let mut kernel_rows: Vec<KernelRow> = kernels
        .into_iter()
        .map(|(name, mut k)| {
            let duration = stats(&mut k.durations, options.trim);
            let best = k
                .configs
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(c, _)| c.clone());
            KernelRow {
                name: trace.strings.get(strato_trace::StrId(name)).to_owned(),
                duration,
                grid: best.as_ref().map(|c| c.0.clone()),
                block: best.map(|c| c.1),
                configurations: k.configs.len(),
                occupancy_pct: (k.occupancy.1 > 0).then(|| k.occupancy.0 / k.occupancy.1 as f64),
                with_metrics: k.with_metrics,
                roofline: roofline(
                    k.cost.flops,
                    k.cost.bytes,
                    k.cost.precision,
                    k.metric_ns,
                    spec,
                ),
            }
        })
        .collect();
    kernel_rows.sort_by(|a, b| {
        b.duration
            .total_ns
            .cmp(&a.duration.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });

    // Steps and models.
    let (steps, models) =
        steps_and_models(trace, scopes, &layer_cost, &layer_instances, options, spec);
    if steps.is_empty() {
        notes.push("no ProfilerStep#N annotations: no model (step) table".into());
    }
    LayersReport {
        source: options.source,
        trim: options.trim,
        device: roof_device,
        layer_instances: layer_instances.len(),
        layers,
        kernel_count,
        kernels: kernel_rows,
        steps,
        models,
        notes,
    }
}

fn steps_and_models(
    trace: &Trace,
    scopes: &Scopes,
    layer_cost: &FxHashMap<u32, Cost>,
    layer_instances: &[u32],
    options: &LayersOptions,
    spec: Option<&DeviceSpec>,
) -> (Vec<StepRow>, Vec<ModelRow>) {
    let mut steps_out = Vec::new();
    let mut models = Vec::new();
    for (p, scope) in scopes.processes.iter().enumerate() {
        let mut steps: Vec<u32> = scope
            .threads
            .iter()
            .flat_map(|t| scopes.by_track[t.0 as usize].iter().copied())
            .filter(|&i| is_step_name(trace.str(trace.spans[i as usize].name)))
            .collect();
        if steps.is_empty() {
            continue;
        }
        steps.sort_by_key(|&i| trace.spans[i as usize].start);
        let mut ops: Vec<Vec<(Ns, Ns)>> = vec![Vec::new(); steps.len()];
        for o in scopes.device_owners.iter().filter(|o| o.process == p) {
            let s = &trace.spans[o.span as usize];
            let at = o.launch.map_or(s.start, |l| trace.spans[l as usize].start);
            let k = steps.partition_point(|&st| trace.spans[st as usize].start <= at);
            if let Some(k) = k.checked_sub(1) {
                if at < trace.spans[steps[k] as usize].end {
                    ops[k].push((s.start, s.end));
                }
            }
        }
        // FLOPs of a step: the layer instances of the process (any thread) starting in it.
        let mut step_cost: Vec<Cost> = vec![Cost::default(); steps.len()];
        for &i in layer_instances {
            let s = &trace.spans[i as usize];
            if scopes.process_of_track[s.track.0 as usize] != Some(p) {
                continue;
            }
            let k = steps.partition_point(|&st| trace.spans[st as usize].start <= s.start);
            if let Some(k) = k.checked_sub(1) {
                if s.start < trace.spans[steps[k] as usize].end {
                    step_cost[k].add(&layer_cost.get(&i).copied().unwrap_or_default());
                }
            }
        }
        let rank = &trace.ranks[scope.key.rank.0 as usize];
        let rank_number = rank.rank.unwrap_or(i64::from(scope.key.rank.0));
        let mut lat = Vec::new();
        let mut e2e = Vec::new();
        let mut busy_total = 0;
        let mut model_cost = Cost::default();
        for (k, &st) in steps.iter().enumerate() {
            let s = &trace.spans[st as usize];
            let gpu_end = ops[k].iter().map(|o| o.1).max().unwrap_or(s.end);
            let busy = crate::device_time::gpu_time::length(&crate::device_time::gpu_time::merge(
                ops[k].iter().copied(),
            ));
            busy_total += busy;
            let c = step_cost[k];
            model_cost.add(&c);
            lat.push(s.duration());
            e2e.push(gpu_end.max(s.end) - s.start);
            steps_out.push(StepRow {
                rank: rank_number,
                pid: scope.key.pid,
                name: trace.str(s.name).to_owned(),
                start_ns: s.start,
                cpu_ns: s.duration(),
                end_to_end_ns: gpu_end.max(s.end) - s.start,
                gpu_busy_ns: busy,
                device_ops: ops[k].len(),
                flops: c.flops,
            });
        }
        let latency = stats(&mut lat, options.trim);
        let steps_per_s = if latency.mean_ns > 0.0 {
            1e9 / latency.mean_ns
        } else {
            0.0
        };
        models.push(ModelRow {
            rank: rank_number,
            pid: scope.key.pid,
            steps: steps.len(),
            end_to_end: stats(&mut e2e, options.trim),
            latency,
            steps_per_s,
            samples_per_s: options.batch_size.map(|b| b as f64 * steps_per_s),
            gpu_busy_ns: busy_total,
            roofline: roofline(
                model_cost.flops,
                model_cost.bytes,
                model_cost.precision,
                busy_total,
                spec,
            ),
        });
    }
    (steps_out, models)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flop_formulas() {
        let mm = json!({"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]});
        let c = op_cost("aten::mm", &mm).unwrap();
        assert_eq!(c.flops, Some(48.0));
        assert_eq!(c.bytes, Some(4.0 * (6.0 + 12.0 + 8.0)));
        assert_eq!(c.precision, Some(Precision::Fp32));
        let lin = json!({"Input Dims": [[8, 5, 16], [32, 16], [32]], "Input type": ["c10::Half"]});
        let c = op_cost("aten::linear", &lin).unwrap();
        assert_eq!(c.flops, Some(2.0 * 40.0 * 16.0 * 32.0));
        assert_eq!(c.precision, Some(Precision::Fp16));
        // Types unknown (2021 schema): FLOPs known, bytes unknown.
        let bmm = json!({"Input dims": [[2, 3, 4], [2, 4, 5]], "Input type": []});
        let c = op_cost("aten::bmm", &bmm).unwrap();
        assert_eq!((c.flops, c.bytes), (Some(240.0), None));
        // Conv without stride/padding is unknown; with them it is known.
        let conv = json!({"Input dims": [[32, 3, 224, 224], [64, 3, 7, 7]]});
        assert!(op_cost("aten::conv2d", &conv).is_none());
        let conv = json!({"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []],
            "Input type": ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Int"],
            "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]});
        let c = op_cost("aten::conv2d", &conv).unwrap();
        assert_eq!(c.flops, Some(2.0 * 4.0 * 64.0 * 27.0));
        assert_eq!(op_cost("aten::relu", &mm), None);
        let bad = json!({"Input Dims": [[2048, 1953], [2048, 1953], [2048, 1953], [2048, 1024], [541, 1024], [541]]});
        assert!(op_cost("aten::linear", &bad).is_none());
        let bad = json!({"Input Dims": [[2, 3], [4, 5]]});
        assert!(op_cost("aten::mm", &bad).is_none());
        // One source of formulas: the layer roofline takes the FLOP models of `op_models`
        // (attention included); byte-only models (softmax) stay out of it.
        let bf = "c10::BFloat16";
        let sdpa = json!({
            "Input Dims": [[4, 12, 197, 64], [4, 12, 197, 64], [4, 12, 197, 64], [], [], [], [], []],
            "Input type": [bf, bf, bf, "", "Scalar", "Scalar", "", "Scalar"],
            "Concrete Inputs": ["", "", "", "", "0.", "False", "", "False"]});
        let c = op_cost("aten::scaled_dot_product_attention", &sdpa).unwrap();
        let inputs = OpInputs::from_args(&sdpa).unwrap();
        let m = op_models::model("aten::scaled_dot_product_attention", Some(&inputs)).unwrap();
        assert_eq!(
            (c.flops, c.bytes, c.precision),
            (m.flops, m.bytes, m.precision)
        );
        assert!(c.flops.is_some());
        let soft =
            json!({"Input Dims": [[8, 16], [], []], "Input type": ["float", "Scalar", "Scalar"]});
        let inputs = OpInputs::from_args(&soft).unwrap();
        assert!(op_models::model("aten::_softmax", Some(&inputs)).is_ok_and(|m| m.flops.is_none()));
        assert_eq!(op_cost("aten::_softmax", &soft), None);
        let flops = json!({"flops": 1234.0});
        assert_eq!(
            op_cost("aten::anything", &flops).unwrap().flops,
            Some(1234.0)
        );
    }

    #[test]
    fn stats_and_trimmed_mean() {
        let mut v = vec![100, 1, 2, 3, 4, 5, 6, 7, 8, 9];
        let s = stats(&mut v, 0.1);
        assert_eq!((s.count, s.min_ns, s.max_ns, s.total_ns), (10, 1, 100, 145));
        assert!((s.trimmed_mean_ns - 5.5).abs() < 1e-9);
        assert!((s.median_ns - 5.5).abs() < 1e-9);
    }

    #[test]
    fn roofline_classifies_against_the_ridge() {
        let spec = crate::models::devices::lookup("Tesla V100-SXM2-32GB", None);
        // AI 1 FLOP/byte << ridge 17.4: memory-bound.
        let r = roofline(Some(1e9), Some(1e9), Some(Precision::Fp32), 1_000_000, spec);
        assert_eq!(r.bound, Some(Bound::Memory));
        assert!((r.attained_flops_per_s.unwrap() - 1e12).abs() < 1.0);
        let r = roofline(
            Some(1e12),
            Some(1e9),
            Some(Precision::Fp32),
            1_000_000,
            spec,
        );
        assert_eq!(r.bound, Some(Bound::Compute));
        let r = roofline(Some(1e12), None, Some(Precision::Fp32), 1_000_000, spec);
        assert_eq!((r.bound, r.arithmetic_intensity), (None, None));
    }
}
