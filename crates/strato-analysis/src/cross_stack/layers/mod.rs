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

use serde::Serialize;
use serde_json::Value;
use strato_trace::{Ns, Trace};

use crate::analyzed::Analyzed;
use crate::device_time::memory::object_keys;
use crate::models::devices::{DeviceSpec, Precision};
use crate::models::op_models::{self, OpInputs};

mod registration;
mod roofline;
mod stream;
pub mod text;
pub use registration::{LayerBy, Layers, LayersResult, LayersSettings};
pub use roofline::{RooflineAnalysis, RooflineResult, RooflineSettings};
pub use stream::LayersStream;

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

/// [`op_cost`] of a framework op named `name` with the attributes `args` of `trace`, which are
/// parsed only when they may give a cost: when a model covers the name
/// ([`op_models::has_model`]) or when they may hold a `flops` figure. Most framework ops have
/// neither, and parsing their attributes is most of what reading them costs.
fn framework_op_cost(
    trace: &Trace,
    name: &str,
    args: Option<strato_trace::ArgsId>,
) -> Option<Cost> {
    let text = trace.args_text(args)?;
    // A key may be written with escapes: then the text is parsed to be sure.
    if !op_models::has_model(name) && !text.contains("flops") && !text.contains('\\') {
        return None;
    }
    let args = object_keys(&text, &OP_COST_ATTRIBUTES)?;
    op_cost(name, &Value::Object(args))
}

/// The attributes [`op_cost`] reads: a recorded `flops` figure, and the inputs the op models
/// read ([`OpInputs::from_args`]).
const OP_COST_ATTRIBUTES: [&str; 5] = [
    "flops",
    "Input type",
    "Input Dims",
    "Input dims",
    "Concrete Inputs",
];

fn parse_args(trace: &Trace, args: Option<strato_trace::ArgsId>) -> Option<Value> {
    trace
        .args_text(args)
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
}

fn i64_list(v: Option<&Value>) -> Option<Vec<i64>> {
    v?.as_array()?.iter().map(Value::as_i64).collect()
}

/// The attributes of a kernel its row reads: the launch configuration, the occupancy, and
/// the Nsight Compute figures [`ncu_cost`] reads (at the top level or under `ncu`).
const KERNEL_ATTRIBUTES: [&str; 10] = [
    "grid",
    "block",
    "est. achieved occupancy %",
    "occupancy_pct",
    "ncu",
    "flops",
    "dram_bytes",
    "flops_fp64",
    "flops_fp32",
    "flops_fp16",
];

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

/// Computes every table: the whole trace read as one batch of [`LayersStream`] (one code
/// path for a held trace and a streamed one).
pub fn layers(analyzed: &Analyzed, options: &LayersOptions) -> LayersReport {
    let trace = analyzed.trace();
    let mut stream = LayersStream::new(*options);
    stream.add(trace);
    stream.finish(trace)
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

    /// Skipping the attributes that cannot give a cost changes no cost: for every name (with a
    /// model or without) and every attribute text (shapes, a `flops` figure, an escaped key,
    /// none of them, not JSON), the cost is the one the parsed attributes give.
    #[test]
    fn framework_op_costs_skip_only_the_attributes_that_give_none() {
        let texts = [
            r#"{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}"#,
            r#"{"flops": 1234.0}"#,
            r#"{"fl\u006fps": 99.0}"#,
            r#"{"Input Dims": [[8, 16]], "Input type": ["float"], "Sequence number": 7}"#,
            r#"{"External id": 3}"#,
            r#"{"External id": 9, "Record function id": 0, "Ev Idx": 4, "Input Dims": [[64, 128], [128, 32], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"], "Input Strides": [[128, 1], [32, 1], []], "Concrete Inputs": ["", "", "1"], "Fwd thread id": 0, "Sequence number": 12}"#,
            r#"{"Input dims": [[4, 8], [8, 2]], "Input type": ["float", "float"], "Input Dims": [[2, 3], [3, 4]]}"#,
            r#"{"Input Dims": [[2, 3], [3, 4]], "Input Dims": [[5, 6], [6, 7]], "Input type": ["double", "double"]}"#,
            r#"{"Input \u0044ims": [[8, 8], [8, 8]], "Input type": ["float", "float"]}"#,
            r#"[{"Input Dims": [[2, 3], [3, 4]]}]"#,
            "not json",
        ];
        let names = [
            "aten::mm",
            "aten::linear",
            "aten::add",
            "aten::anything",
            "Optimizer.step#SGD.step",
            "triton_poi_fused_0",
        ];
        let mut trace = Trace::default();
        let ids: Vec<_> = texts.iter().map(|t| trace.add_args(t)).collect();
        let mut costed = 0;
        for name in names {
            for (text, id) in texts.iter().zip(&ids) {
                let parsed = serde_json::from_str::<Value>(text)
                    .ok()
                    .and_then(|a| op_cost(name, &a));
                costed += usize::from(parsed.is_some());
                assert_eq!(
                    framework_op_cost(&trace, name, Some(*id)),
                    parsed,
                    "{name} {text}"
                );
            }
            assert_eq!(framework_op_cost(&trace, name, None), None);
        }
        // The grid has costs to lose: by a model, by a figure, by an escaped figure.
        assert!(costed >= 3 * names.len() / 2, "{costed}");
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

    /// Every rule of the tables by construction, whole and streamed one event at a time: a
    /// layer is a framework op with none above it, the thread's state spans taking no part;
    /// a kernel belongs to the layer above its launch, however deep; an op's own cost counts
    /// only when it launched device work, else a layer sums its children's; an allocation
    /// goes to the layer innermost on its thread; a step's device ops are those its process
    /// launched in it (a kernel without a launch on a rank of two processes is no one's).
    #[test]
    fn tables_by_construction() {
        use strato_trace::testing::TraceBuilder;
        use strato_trace::Level;
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let other = b.thread(2, 2);
        let q = b.queue(0, 7);
        let (op, api) = (Level::Backend, Level::AcceleratorApi);
        let kernel = Level::DeviceKernel;
        let linear = r#"{"Input Dims": [[8, 16], [32, 16], [32]], "Input type": ["float", "float", "float"]}"#;
        let mm = r#"{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}"#;
        b.span(t, Level::Os, "running", 0, 20_000)
            .category(strato_trace::names::THREAD_STATE_CATEGORY);
        b.span(t, Level::Python, "ProfilerStep#1", 0, 10_000);
        b.span(t, Level::Operation, "my_block", 50, 1550);
        b.span(t, op, "aten::linear", 100, 1000).args(linear);
        b.span(t, op, "aten::addmm", 200, 900).args(mm);
        b.span(t, api, "cudaLaunchKernel", 300, 310).correlation(1);
        b.span(q, kernel, "k1", 2000, 2100).correlation(1);
        b.span(t, op, "aten::relu", 1200, 1500);
        // An annotation inside the op: innermost of the annotations at the allocation.
        b.span(t, Level::Operation, "inner_block", 1210, 1290);
        b.span(t, api, "cudaLaunchKernel", 1300, 1310)
            .correlation(2);
        b.span(q, kernel, "k2", 2200, 2250).correlation(2);
        b.span(t, op, "aten::empty", 1600, 1650);
        // Modelled, but it launched nothing: its FLOPs do not count.
        b.span(t, op, "aten::matmul", 1700, 1800).args(mm);
        // Cost unknown of its own: the sum of its children's.
        b.span(t, op, "aten::custom", 5000, 6000);
        b.span(t, op, "aten::mm", 5100, 5500).args(mm);
        b.span(t, api, "cudaLaunchKernel", 5200, 5210)
            .correlation(5);
        b.span(q, kernel, "k5", 6000, 6030).correlation(5);
        // Another process: its kernel is not in the first one's step.
        b.span(other, op, "aten::mm", 0, 500).args(mm);
        b.span(other, api, "cudaLaunchKernel", 10, 20)
            .correlation(3);
        b.span(q, kernel, "k3", 2300, 2400).correlation(3);
        b.span(q, kernel, "k4", 3000, 3010);
        for (ts, bytes) in [(1250, 4096), (1260, -4096), (5050, 100), (7000, 64)] {
            b.instant(t, Level::Backend, "cpu_instant_event", "[memory]", ts);
            let trace = b.trace_mut();
            let args = trace.add_args(&format!(r#"{{"Bytes": {bytes}}}"#));
            trace.instants.last_mut().unwrap().args = Some(args);
        }
        let trace = b.build();
        let check = |source| {
            let options = LayersOptions {
                source,
                ..LayersOptions::default()
            };
            let whole = layers(&Analyzed::new(&trace), &options);
            let stream = crate::registry::streamed(
                LayersStream::new(options),
                LayersStream::add,
                LayersStream::finish,
            );
            let streamed = crate::registry::fed_span_by_span(&trace, stream);
            assert_eq!(streamed, whole, "{source:?}: streamed one event at a time");
            whole
        };
        let r = check(LayerSource::Op);
        let row = |name: &str| r.layers.iter().find(|l| l.name == name).unwrap();
        assert_eq!(r.layer_instances, 6);
        let occurrences: usize = r.layers.iter().map(|l| l.occurrences).sum();
        assert_eq!(occurrences, r.layer_instances);
        assert!(r.layers.iter().all(|l| l.name != "aten::addmm"));
        let linear = row("aten::linear");
        assert_eq!((linear.kernels, linear.kernel_time_ns), (1, 100));
        assert_eq!(
            (linear.flops_known, linear.roofline.flops),
            (1, Some(8192.0))
        );
        let relu = row("aten::relu");
        assert_eq!(
            (relu.kernels, relu.kernel_time_ns, relu.flops_known),
            (1, 50, 0)
        );
        assert_eq!((relu.allocated_bytes, relu.allocations), (Some(4096), 1));
        assert_eq!(row("aten::matmul").flops_known, 0);
        let custom = row("aten::custom");
        assert_eq!(
            (custom.roofline.flops, custom.allocated_bytes),
            (Some(48.0), Some(100))
        );
        // Both `aten::mm` layers launched: 48 FLOPs each.
        let mm_row = row("aten::mm");
        assert_eq!((mm_row.occurrences, mm_row.flops_known), (1, 1));
        assert_eq!(r.kernel_count, 5);
        let kernels: usize = r.kernels.iter().map(|k| k.duration.count).sum();
        assert_eq!(kernels, r.kernel_count);
        // The step: k1, k2 and k5 of process 1 (not k3, launched by process 2, nor k4).
        assert_eq!(r.steps.len(), 1);
        let step = &r.steps[0];
        assert_eq!((step.pid, step.cpu_ns, step.device_ops), (1, 10_000, 3));
        assert_eq!((step.gpu_busy_ns, step.end_to_end_ns), (180, 10_000));
        assert_eq!(step.flops, Some(8192.0 + 48.0));
        assert_eq!(r.models.len(), 1);

        let r = check(LayerSource::Annotation);
        assert_eq!(r.layer_instances, 2);
        let row = |name: &str| r.layers.iter().find(|l| l.name == name).unwrap();
        let block = row("my_block");
        assert_eq!((block.kernels, block.kernel_time_ns), (2, 150));
        assert_eq!(block.roofline.flops, Some(8192.0));
        assert_eq!((block.allocated_bytes, block.allocations), (Some(0), 0));
        let inner = row("inner_block");
        assert_eq!((inner.kernels, inner.roofline.flops), (0, None));
        assert_eq!((inner.allocated_bytes, inner.allocations), (Some(4096), 1));
    }
}
