//! The device table: peak FLOP/s per precision and memory bandwidth of common accelerators,
//! keyed by device name, for roofline ridge points. Every number is the vendor's published
//! *dense* peak (no structured sparsity) at boost clock; the source of each row is in
//! `docs/analyses/layers-roofline.md`. A precision the table does not list is unknown (`None`):
//! nothing is extrapolated.
//!
//! No window or conservation rule: this is reference data.

use serde::Serialize;

/// Numeric precision of a computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }

    /// Precision and element size of a PyTorch `Input type` string.
    pub fn from_torch_type(t: &str) -> Option<(Precision, u64)> {
        match t {
            "float" | "c10::complex<float>" => Some((Precision::Fp32, 4)),
            "double" => Some((Precision::Fp64, 8)),
            "c10::Half" | "half" => Some((Precision::Fp16, 2)),
            "c10::BFloat16" | "bfloat16" => Some((Precision::Bf16, 2)),
            "c10::Float8_e4m3fn" | "c10::Float8_e5m2" => Some((Precision::Fp8, 1)),
            _ => None,
        }
    }
}

/// Peaks of one device model. FLOP/s values are in TFLOP/s, bandwidth in GB/s (10^9 B/s).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSpec {
    pub name: &'static str,
    pub fp64_tflops: Option<f64>,
    /// FP32 on the CUDA/vector cores (not TF32 tensor cores).
    pub fp32_tflops: Option<f64>,
    pub tf32_tensor_tflops: Option<f64>,
    /// FP16 on tensor/matrix cores with FP32 accumulation where the vendor states it.
    pub fp16_tensor_tflops: Option<f64>,
    pub bf16_tensor_tflops: Option<f64>,
    pub fp8_tensor_tflops: Option<f64>,
    pub memory_bandwidth_gbs: f64,
}

impl DeviceSpec {
    /// Peak FLOP/s for a precision, when listed. FP16/BF16 use the tensor (matrix) peak:
    /// the kernels that reach the roofline's compute roof at those precisions are tensor-core
    /// GEMMs/convolutions. FP32 uses the vector peak (PyTorch does not use TF32 for matmul by
    /// default); pass `Tf32` explicitly when it does.
    pub fn peak_flops(&self, p: Precision) -> Option<f64> {
        let t = match p {
            Precision::Fp64 => self.fp64_tflops,
            Precision::Fp32 => self.fp32_tflops,
            Precision::Tf32 => self.tf32_tensor_tflops,
            Precision::Fp16 => self.fp16_tensor_tflops,
            Precision::Bf16 => self.bf16_tensor_tflops,
            Precision::Fp8 => self.fp8_tensor_tflops,
        };
        t.map(|t| t * 1e12)
    }

    /// Memory bandwidth in bytes/s.
    pub fn bandwidth(&self) -> f64 {
        self.memory_bandwidth_gbs * 1e9
    }

    /// Ridge point (FLOP/byte) for a precision.
    pub fn ridge(&self, p: Precision) -> Option<f64> {
        self.peak_flops(p).map(|f| f / self.bandwidth())
    }
}

#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    fp64: Option<f64>,
    fp32: Option<f64>,
    tf32: Option<f64>,
    fp16: Option<f64>,
    bf16: Option<f64>,
    fp8: Option<f64>,
    bw: f64,
) -> DeviceSpec {
    DeviceSpec {
        name,
        fp64_tflops: fp64,
        fp32_tflops: fp32,
        tf32_tensor_tflops: tf32,
        fp16_tensor_tflops: fp16,
        bf16_tensor_tflops: bf16,
        fp8_tensor_tflops: fp8,
        memory_bandwidth_gbs: bw,
    }
}

/// The four A100 boards: the same compute peaks, different memory bandwidths.
const fn a100(name: &'static str, bw: f64) -> DeviceSpec {
    spec(
        name,
        Some(9.7),
        Some(19.5),
        Some(156.0),
        Some(312.0),
        Some(312.0),
        None,
        bw,
    )
}

/// H100 SXM5 and H200 SXM: the same compute peaks, different memory bandwidths.
const fn hopper_sxm(name: &'static str, bw: f64) -> DeviceSpec {
    spec(
        name,
        Some(34.0),
        Some(67.0),
        Some(494.7),
        Some(989.4),
        Some(989.4),
        Some(1978.9),
        bw,
    )
}

/// A board of which the table lists only the FP32 (vector) peak.
const fn fp32_only(name: &'static str, fp32: f64, bw: f64) -> DeviceSpec {
    spec(name, None, Some(fp32), None, None, None, None, bw)
}

/// The table (see `docs/analyses/layers-roofline.md` for sources).
pub const DEVICES: &[DeviceSpec] = &[
    spec(
        "V100 SXM2",
        Some(7.8),
        Some(15.7),
        None,
        Some(125.0),
        None,
        None,
        900.0,
    ),
    spec(
        "V100 PCIe",
        Some(7.0),
        Some(14.0),
        None,
        Some(112.0),
        None,
        None,
        900.0,
    ),
    spec(
        "V100S PCIe",
        Some(8.2),
        Some(16.4),
        None,
        Some(130.0),
        None,
        None,
        1134.0,
    ),
    a100("A100 SXM4 40GB", 1555.0),
    a100("A100 PCIe 40GB", 1555.0),
    a100("A100 SXM4 80GB", 2039.0),
    a100("A100 PCIe 80GB", 1935.0),
    hopper_sxm("H100 SXM5", 3350.0),
    spec(
        "H100 PCIe",
        Some(26.0),
        Some(51.0),
        Some(378.0),
        Some(756.0),
        Some(756.0),
        Some(1513.0),
        2000.0,
    ),
    hopper_sxm("H200 SXM", 4800.0),
    spec(
        "RTX 4090",
        None,
        Some(82.6),
        Some(82.6),
        Some(165.2),
        Some(165.2),
        None,
        1008.0,
    ),
    fp32_only("RTX 4080", 48.7, 716.8),
    fp32_only("RTX 4070 Ti", 40.1, 504.2),
    fp32_only("RTX 4070", 29.1, 504.2),
    fp32_only("RTX 5090", 104.8, 1792.0),
    fp32_only("RTX 5080", 56.3, 960.0),
    fp32_only("RTX 5070 Ti", 43.9, 896.0),
    fp32_only("RTX 5070", 30.9, 672.0),
    spec(
        "MI250X",
        Some(47.9),
        Some(47.9),
        None,
        Some(383.0),
        Some(383.0),
        None,
        3276.8,
    ),
    spec(
        "MI250",
        Some(45.3),
        Some(45.3),
        None,
        Some(362.1),
        Some(362.1),
        None,
        3276.8,
    ),
];

fn by_name(name: &str) -> Option<&'static DeviceSpec> {
    DEVICES.iter().find(|d| d.name == name)
}

/// Finds the spec of a device from its reported name (`"NVIDIA A100-SXM4-80GB"`,
/// `"Tesla V100-SXM2-32GB"`, `"NVIDIA GeForce RTX 4090"`, `"AMD Instinct MI250X"`) and, to
/// tell A100 40GB from 80GB boards named only by their board id (`"A100-PG509-200"`), its
/// memory size. `None` when the device is not in the table.
pub fn lookup(name: &str, total_memory_bytes: Option<i64>) -> Option<&'static DeviceSpec> {
    let n = name.to_ascii_uppercase().replace(['-', '_'], " ");
    let has = |s: &str| n.contains(s);
    let pcie = has("PCIE");
    if has("MI250X") {
        return by_name("MI250X");
    }
    if has("MI250") {
        return by_name("MI250");
    }
    if has("H200") {
        return by_name("H200 SXM");
    }
    if has("H100") {
        return by_name(if pcie { "H100 PCIe" } else { "H100 SXM5" });
    }
    if has("A100") {
        let big = has("80GB") || total_memory_bytes.is_some_and(|m| m > 48 * (1i64 << 30));
        return by_name(match (big, pcie) {
            (true, true) => "A100 PCIe 80GB",
            (true, false) => "A100 SXM4 80GB",
            (false, true) => "A100 PCIe 40GB",
            (false, false) => "A100 SXM4 40GB",
        });
    }
    if has("V100S") {
        return by_name("V100S PCIe");
    }
    if has("V100") {
        return by_name(if pcie { "V100 PCIe" } else { "V100 SXM2" });
    }
    for model in [
        "RTX 5070 TI",
        "RTX 5070",
        "RTX 5080",
        "RTX 5090",
        "RTX 4070 TI",
        "RTX 4070",
        "RTX 4080",
        "RTX 4090",
    ] {
        if has(model) {
            let key = model.replace("TI", "Ti");
            return by_name(&key);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_reported_names() {
        // (reported name, memory size, table row)
        let cases = [
            ("Tesla V100-SXM2-32GB", None, "V100 SXM2"),
            (
                "NVIDIA A100-PG509-200",
                Some(42_297_524_224),
                "A100 SXM4 40GB",
            ),
            ("NVIDIA A100-SXM4-80GB", None, "A100 SXM4 80GB"),
            ("NVIDIA H100 PCIe", None, "H100 PCIe"),
            ("NVIDIA H200", None, "H200 SXM"),
            ("NVIDIA GeForce RTX 4070 Ti", None, "RTX 4070 Ti"),
            ("NVIDIA GeForce RTX 5070", None, "RTX 5070"),
            ("AMD Instinct MI250X", None, "MI250X"),
        ];
        for (reported, memory, row) in cases {
            assert_eq!(
                lookup(reported, memory).map(|d| d.name),
                Some(row),
                "{reported}"
            );
        }
        assert!(lookup("Intel Arc A770", None).is_none());
    }

    #[test]
    fn ridge_points() {
        let v100 = lookup("Tesla V100-SXM2-16GB", None).unwrap();
        let r = v100.ridge(Precision::Fp32).unwrap();
        assert!((r - 15.7e12 / 900e9).abs() < 1e-9);
        assert!(lookup("RTX 5070", None)
            .unwrap()
            .ridge(Precision::Fp16)
            .is_none());
        for d in DEVICES {
            assert!(
                d.fp32_tflops.is_some() && d.memory_bandwidth_gbs > 0.0,
                "{}",
                d.name
            );
        }
    }
}
