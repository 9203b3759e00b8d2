//! The device table: peak FLOP/s per precision, memory bandwidth and link bandwidth of common
//! accelerators, for roofline ridge points and "% of peak". Every number is the vendor's
//! published *dense* peak (no structured sparsity) at boost clock; each row names its source
//! ([`DeviceSpec::source`], also listed in `docs/analyses/layers-roofline.md`). A precision the
//! table does not list is unknown (`None`): nothing is extrapolated.
//!
//! Detection ([`detect`]) reads the trace model's [`Device`] (filled by every importer from
//! Kineto `deviceProperties`, nsys `TARGET_INFO_*`, XPlane device planes, rocprof agents): by
//! name first, tolerant of real spellings (`"AMD Instinct MI300X VF"`, `"NVIDIA H100 80GB
//! HBM3"`); when the name is empty or unknown, by SM/CU count plus memory size (plus compute
//! capability where it tells vendors apart), and otherwise unknown. A user's file
//! ([`DeviceSpec::from_json`], `--device-spec FILE`) overrides both.
//!
//! No window or conservation rule: this is reference data.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use strato_trace::message::escape_controls;
use strato_trace::Device;

/// Numeric precision of a computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
    Fp4,
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
            Precision::Fp4 => "fp4",
        }
    }

    /// Precision and element size (bytes) of a PyTorch `Input type` string. FP4 is stored
    /// packed two to a byte (`Float4_e2m1fn_x2`): one recorded element is one byte holding two
    /// values.
    pub fn from_torch_type(t: &str) -> Option<(Precision, u64)> {
        match t {
            "float" | "c10::complex<float>" => Some((Precision::Fp32, 4)),
            "double" => Some((Precision::Fp64, 8)),
            "c10::Half" | "half" => Some((Precision::Fp16, 2)),
            "c10::BFloat16" | "bfloat16" => Some((Precision::Bf16, 2)),
            "c10::Float8_e4m3fn"
            | "c10::Float8_e5m2"
            | "c10::Float8_e4m3fnuz"
            | "c10::Float8_e5m2fnuz"
            | "c10::Float8_e8m0fnu" => Some((Precision::Fp8, 1)),
            "c10::Float4_e2m1fn_x2" => Some((Precision::Fp4, 1)),
            _ => None,
        }
    }

    /// Size in bytes of a non-floating `Input type` that ops move (indices, masks).
    pub fn other_type_size(t: &str) -> Option<u64> {
        match t {
            "long int" | "int64_t" | "long" => Some(8),
            "int" | "unsigned int" => Some(4),
            "short int" => Some(2),
            "bool" | "unsigned char" | "signed char" => Some(1),
            _ => None,
        }
    }
}

/// Peaks of one device model. FLOP/s values are in TFLOP/s, bandwidths in GB/s (10^9 B/s).
/// Read from a user's file, a field not listed here is refused (a misspelt peak would
/// otherwise be dropped silently and the precision shown as unknown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: Cow<'static, str>,
    #[serde(default)]
    pub fp64_tflops: Option<f64>,
    /// FP32 on the CUDA/vector cores (not TF32 tensor cores).
    #[serde(default)]
    pub fp32_tflops: Option<f64>,
    #[serde(default)]
    pub tf32_tensor_tflops: Option<f64>,
    /// FP16 on tensor/matrix cores with FP32 accumulation where the vendor states it.
    #[serde(default)]
    pub fp16_tensor_tflops: Option<f64>,
    #[serde(default)]
    pub bf16_tensor_tflops: Option<f64>,
    #[serde(default)]
    pub fp8_tensor_tflops: Option<f64>,
    #[serde(default)]
    pub fp4_tensor_tflops: Option<f64>,
    pub memory_bandwidth_gbs: f64,
    /// Peak GPU-to-GPU link bandwidth (NVLink / Infinity Fabric) per direction, all links of
    /// one device together; `None` where the vendor states none.
    #[serde(default)]
    pub link_bandwidth_gbs_per_direction: Option<f64>,
    /// Where the numbers come from (a vendor datasheet or whitepaper).
    #[serde(default)]
    pub source: Cow<'static, str>,
}

/// Why a `--device-spec` file was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeviceSpecError {
    /// The parser's message, its quotes of the file escaped onto one line.
    #[error("not a device spec JSON object: {}", escape_controls(&.0.to_string()))]
    Json(#[from] serde_json::Error),
    #[error(
        "{field} must be a number in [{min}, {max}] {unit} (a physically plausible peak), got {value:?}"
    )]
    OutOfRange {
        field: &'static str,
        value: f64,
        min: f64,
        max: f64,
        unit: &'static str,
    },
}

/// The range a user's peak FLOP/s must fall in, in TFLOP/s: from 1 GFLOP/s to 1 EFLOP/s for one
/// device (the largest dense peak in the table is 10 066 TFLOP/s, MI355X FP4). Outside it a
/// number is a typo or a unit mistake, and would give "% of peak" of 0.0 % or infinity.
pub const PEAK_TFLOPS_RANGE: (f64, f64) = (1e-3, 1e6);
/// The range a user's bandwidth (memory or link) must fall in, in GB/s: from 0.1 GB/s to
/// 1 PB/s (the table's largest is 8 000 GB/s).
pub const BANDWIDTH_GBS_RANGE: (f64, f64) = (0.1, 1e6);

impl DeviceSpec {
    /// Parses a user's device spec (the fields of this struct; `name` and
    /// `memory_bandwidth_gbs` required, every peak optional, any other field refused with
    /// its name and the accepted ones). Every number must be finite and within
    /// [`PEAK_TFLOPS_RANGE`] (TFLOP/s) or [`BANDWIDTH_GBS_RANGE`] (GB/s).
    pub fn from_json(text: &str) -> Result<DeviceSpec, DeviceSpecError> {
        let mut s: DeviceSpec = serde_json::from_str(text)?;
        let in_range = |field, value: f64, (min, max): (f64, f64), unit| {
            if value.is_finite() && (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(DeviceSpecError::OutOfRange {
                    field,
                    value,
                    min,
                    max,
                    unit,
                })
            }
        };
        in_range(
            "memory_bandwidth_gbs",
            s.memory_bandwidth_gbs,
            BANDWIDTH_GBS_RANGE,
            "GB/s",
        )?;
        if let Some(v) = s.link_bandwidth_gbs_per_direction {
            in_range(
                "link_bandwidth_gbs_per_direction",
                v,
                BANDWIDTH_GBS_RANGE,
                "GB/s",
            )?;
        }
        for (field, value) in [
            ("fp64_tflops", s.fp64_tflops),
            ("fp32_tflops", s.fp32_tflops),
            ("tf32_tensor_tflops", s.tf32_tensor_tflops),
            ("fp16_tensor_tflops", s.fp16_tensor_tflops),
            ("bf16_tensor_tflops", s.bf16_tensor_tflops),
            ("fp8_tensor_tflops", s.fp8_tensor_tflops),
            ("fp4_tensor_tflops", s.fp4_tensor_tflops),
        ] {
            if let Some(v) = value {
                in_range(field, v, PEAK_TFLOPS_RANGE, "TFLOP/s")?;
            }
        }
        if s.source.is_empty() {
            s.source = Cow::Borrowed("user's --device-spec file");
        }
        Ok(s)
    }

    /// Peak FLOP/s for a precision, when listed. FP16/BF16/FP8/FP4 use the tensor (matrix)
    /// peak: the kernels that reach the roofline's compute roof at those precisions are
    /// tensor-core GEMMs/convolutions. FP32 uses the vector peak (PyTorch does not use TF32 for
    /// matmul by default); pass `Tf32` explicitly when it does.
    pub fn peak_flops(&self, p: Precision) -> Option<f64> {
        let t = match p {
            Precision::Fp64 => self.fp64_tflops,
            Precision::Fp32 => self.fp32_tflops,
            Precision::Tf32 => self.tf32_tensor_tflops,
            Precision::Fp16 => self.fp16_tensor_tflops,
            Precision::Bf16 => self.bf16_tensor_tflops,
            Precision::Fp8 => self.fp8_tensor_tflops,
            Precision::Fp4 => self.fp4_tensor_tflops,
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

/// Peaks in TFLOP/s: fp64, fp32 (vector), tf32, fp16, bf16, fp8, fp4 (tensor, dense).
type Peaks = [Option<f64>; 7];

const fn spec(
    name: &'static str,
    p: Peaks,
    bw: f64,
    link: Option<f64>,
    source: &'static str,
) -> DeviceSpec {
    DeviceSpec {
        name: Cow::Borrowed(name),
        fp64_tflops: p[0],
        fp32_tflops: p[1],
        tf32_tensor_tflops: p[2],
        fp16_tensor_tflops: p[3],
        bf16_tensor_tflops: p[4],
        fp8_tensor_tflops: p[5],
        fp4_tensor_tflops: p[6],
        memory_bandwidth_gbs: bw,
        link_bandwidth_gbs_per_direction: link,
        source: Cow::Borrowed(source),
    }
}

const A100: Peaks = [
    Some(9.7),
    Some(19.5),
    Some(156.0),
    Some(312.0),
    Some(312.0),
    None,
    None,
];
const A100_SRC: &str = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense figures";
/// H100 SXM5 and H200 SXM: the same compute peaks, different memory bandwidths.
const HOPPER_SXM: Peaks = [
    Some(34.0),
    Some(67.0),
    Some(494.7),
    Some(989.4),
    Some(989.4),
    Some(1978.9),
    None,
];
/// MI300X and MI325X: the same CDNA3 compute peaks (FP64 vector; FP32 vector).
const CDNA3: Peaks = [
    Some(81.7),
    Some(163.4),
    Some(653.7),
    Some(1307.4),
    Some(1307.4),
    Some(2614.9),
    None,
];

const fn fp32_only(name: &'static str, fp32: f64, bw: f64) -> DeviceSpec {
    spec(
        name,
        [None, Some(fp32), None, None, None, None, None],
        bw,
        None,
        "NVIDIA GeForce product specifications (FP32 shader TFLOPS, memory bandwidth)",
    )
}

/// The table (sources on each row and in `docs/analyses/layers-roofline.md`).
pub const DEVICES: &[DeviceSpec] = &[
    spec(
        "V100 SXM2",
        [Some(7.8), Some(15.7), None, Some(125.0), None, None, None],
        900.0,
        Some(150.0),
        "NVIDIA V100 datasheet (2020): SXM2, NVLink 300 GB/s total",
    ),
    spec(
        "V100 PCIe",
        [Some(7.0), Some(14.0), None, Some(112.0), None, None, None],
        900.0,
        None,
        "NVIDIA V100 datasheet (2020): PCIe",
    ),
    spec(
        "V100S PCIe",
        [Some(8.2), Some(16.4), None, Some(130.0), None, None, None],
        1134.0,
        None,
        "NVIDIA V100S datasheet (2020)",
    ),
    spec("A100 SXM4 40GB", A100, 1555.0, Some(300.0), A100_SRC),
    spec("A100 PCIe 40GB", A100, 1555.0, None, A100_SRC),
    spec("A100 SXM4 80GB", A100, 2039.0, Some(300.0), A100_SRC),
    spec("A100 PCIe 80GB", A100, 1935.0, None, A100_SRC),
    spec(
        "H100 SXM5",
        HOPPER_SXM,
        3350.0,
        Some(450.0),
        "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5, dense; NVLink 900 GB/s total",
    ),
    spec(
        "H100 PCIe",
        [
            Some(26.0),
            Some(51.0),
            Some(378.0),
            Some(756.0),
            Some(756.0),
            Some(1513.0),
            None,
        ],
        2000.0,
        None,
        "NVIDIA H100 Tensor Core GPU datasheet (2023), PCIe, dense",
    ),
    spec(
        "H200 SXM",
        HOPPER_SXM,
        4800.0,
        Some(450.0),
        "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM, dense; NVLink 900 GB/s total",
    ),
    spec(
        "B200",
        [
            Some(37.0),
            Some(75.0),
            Some(1125.0),
            Some(2250.0),
            Some(2250.0),
            Some(4500.0),
            Some(9000.0),
        ],
        8000.0,
        Some(900.0),
        "NVIDIA HGX B200 specifications (8-GPU board figures / 8; sparse tensor figures halved \
         to dense); NVLink 5 1.8 TB/s total",
    ),
    spec(
        "GB200",
        [
            Some(40.0),
            Some(80.0),
            Some(1250.0),
            Some(2500.0),
            Some(2500.0),
            Some(5000.0),
            Some(10000.0),
        ],
        8000.0,
        Some(900.0),
        "NVIDIA GB200 NVL72 specifications (72-GPU rack figures / 72; sparse tensor figures \
         halved to dense); NVLink 5 1.8 TB/s total",
    ),
    spec(
        "L4",
        [
            None,
            Some(30.3),
            Some(60.0),
            Some(121.0),
            Some(121.0),
            Some(242.5),
            None,
        ],
        300.0,
        None,
        "NVIDIA L4 Tensor Core GPU datasheet (2023), dense (sparse figures halved)",
    ),
    spec(
        "L40S",
        [
            None,
            Some(91.6),
            Some(183.0),
            Some(362.05),
            Some(362.05),
            Some(733.0),
            None,
        ],
        864.0,
        None,
        "NVIDIA L40S datasheet (2023), dense (sparse figures halved)",
    ),
    spec(
        "A10G",
        [None, Some(31.2), None, None, None, None, None],
        600.0,
        None,
        "AWS EC2 G5 (A10G, 24 GB GDDR6, 600 GB/s); NVIDIA publishes no A10G datasheet, FP32 \
         from the A10 datasheet (same GA102 configuration); tensor peaks unknown",
    ),
    spec(
        "RTX 4090",
        [
            None,
            Some(82.6),
            Some(82.6),
            Some(165.2),
            Some(165.2),
            Some(330.3),
            None,
        ],
        1008.0,
        None,
        "NVIDIA Ada Lovelace architecture whitepaper v1.0, RTX 4090, dense, FP32 accumulate",
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
        [
            Some(47.9),
            Some(47.9),
            None,
            Some(383.0),
            Some(383.0),
            None,
            None,
        ],
        3276.8,
        None,
        "AMD Instinct MI250X datasheet (FP64/FP32 vector)",
    ),
    spec(
        "MI250",
        [
            Some(45.3),
            Some(45.3),
            None,
            Some(362.1),
            Some(362.1),
            None,
            None,
        ],
        3276.8,
        None,
        "AMD Instinct MI250 datasheet (FP64/FP32 vector)",
    ),
    spec(
        "MI300X",
        CDNA3,
        5300.0,
        Some(448.0),
        "AMD Instinct MI300X datasheet (2023), dense; Infinity Fabric 896 GB/s total (7 links)",
    ),
    spec(
        "MI325X",
        CDNA3,
        6000.0,
        Some(448.0),
        "AMD Instinct MI325X datasheet (2024), dense; Infinity Fabric 896 GB/s total (7 links)",
    ),
    spec(
        "MI355X",
        [
            Some(78.6),
            Some(157.3),
            None,
            Some(2516.6),
            Some(2516.6),
            Some(5033.2),
            Some(10066.4),
        ],
        8000.0,
        Some(537.6),
        "AMD Instinct MI355X datasheet (2025), dense; Infinity Fabric 1075 GB/s total (7 links)",
    ),
];

fn by_name(name: &str) -> Option<&'static DeviceSpec> {
    DEVICES.iter().find(|d| d.name == name)
}

/// Finds the spec of a device from its reported name (`"NVIDIA A100-SXM4-80GB"`,
/// `"Tesla V100-SXM2-32GB"`, `"NVIDIA GeForce RTX 4090"`, `"AMD Instinct MI300X VF"`) and, to
/// tell A100 40GB from 80GB boards named only by their board id (`"A100-PG509-200"`), its
/// memory size. `None` when the device is not in the table (an empty name included).
pub fn lookup(name: &str, total_memory_bytes: Option<i64>) -> Option<&'static DeviceSpec> {
    let n = name.to_ascii_uppercase().replace(['-', '_'], " ");
    let has = |s: &str| n.contains(s);
    let pcie = has("PCIE");
    for model in ["MI355X", "MI325X", "MI300X", "MI250X", "MI250"] {
        if has(model) {
            return by_name(model);
        }
    }
    if has("GB200") {
        return by_name("GB200");
    }
    if has("B200") {
        return by_name("B200");
    }
    if has("H200") {
        // The H200 NVL (PCIe) has lower peaks: not in the table.
        return (!has("NVL")).then(|| by_name("H200 SXM")).flatten();
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
    if has("L40S") {
        return by_name("L40S");
    }
    if has("A10G") {
        return by_name("A10G");
    }
    // "NVIDIA L4" but not "L40"/"L40S".
    if n.split_whitespace().any(|w| w == "L4") {
        return by_name("L4");
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

/// How a device's table row was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectedBy {
    /// The user's `--device-spec` file.
    UserSpec,
    /// The reported device name.
    Name,
    /// SM/CU count and memory size (the name was empty or unknown).
    SmCountAndMemory,
}

/// A device's table row and how it was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detected {
    pub spec: DeviceSpec,
    pub by: DetectedBy,
}

/// Boards told apart by (SM/CU count, memory size range in GiB, compute major where it
/// separates vendors, least peak engine clock in MHz where a board outside the table shares
/// the counts). Real devices report the usable memory, a little under the nominal size.
/// MI355X and MI350X (not in the table) both have 256 CUs and 288 GB; AMD's MI350 series
/// data sheets give peak engine clocks of 2400 MHz (MI355X) and 2200 MHz (MI350X), so only a
/// recorded clock of at least 2300 MHz says MI355X.
type CountsRow = (i64, f64, f64, Option<i64>, Option<i64>, &'static str);
const BY_SM_AND_MEMORY: &[CountsRow] = &[
    (304, 170.0, 200.0, None, None, "MI300X"),
    (304, 240.0, 260.0, None, None, "MI325X"),
    (256, 270.0, 290.0, None, Some(2300), "MI355X"),
    (132, 70.0, 82.0, Some(9), None, "H100 SXM5"),
    (114, 70.0, 82.0, Some(9), None, "H100 PCIe"),
    (132, 130.0, 145.0, Some(9), None, "H200 SXM"),
    (148, 170.0, 185.0, Some(10), None, "B200"),
    (108, 35.0, 42.0, Some(8), None, "A100 SXM4 40GB"),
    (108, 75.0, 82.0, Some(8), None, "A100 SXM4 80GB"),
];

/// True when `name` says nothing about the board: absent, empty, or an architecture id
/// (`gfx950`, `sm_90`) rather than a product name. Only then do counts stand in for it.
fn names_no_product(name: Option<&str>) -> bool {
    let Some(n) = name.map(str::trim) else {
        return true;
    };
    let lower = n.to_ascii_lowercase();
    let arch = |prefix: &str| {
        lower
            .strip_prefix(prefix)
            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric()))
    };
    n.is_empty() || arch("gfx") || arch("sm_")
}

/// The table row of a trace device: `override_spec` when given, else by name ([`lookup`]),
/// else, when the name names no product ([`names_no_product`]: absent, empty, `gfx950`), by
/// SM/CU count and memory size ([`BY_SM_AND_MEMORY`]: only exact SM counts, memory within the
/// row's range, and the clock where the row needs one), else `None` (unknown). A product name
/// the table lacks ("AMD Instinct MI350X", "NVIDIA H200 NVL") is unknown, never matched by
/// counts: a board outside the table may share them with one inside (MI350X with MI355X).
pub fn detect(device: &Device, override_spec: Option<&DeviceSpec>) -> Option<Detected> {
    if let Some(s) = override_spec {
        return Some(Detected {
            spec: s.clone(),
            by: DetectedBy::UserSpec,
        });
    }
    if let Some(s) = device
        .name
        .as_deref()
        .and_then(|n| lookup(n, device.total_memory_bytes))
    {
        return Some(Detected {
            spec: s.clone(),
            by: DetectedBy::Name,
        });
    }
    if !names_no_product(device.name.as_deref()) {
        return None;
    }
    let (sms, mem) = (device.sm_count?, device.total_memory_bytes?);
    let gib = mem as f64 / (1u64 << 30) as f64;
    let clock_mhz = device.clock_rate_khz.map(|k| k / 1000);
    BY_SM_AND_MEMORY
        .iter()
        .find(|(count, lo, hi, major, min_clock, _)| {
            *count == sms
                && (*lo..=*hi).contains(&gib)
                && major.is_none_or(|m| device.compute_major.is_none_or(|c| c == m))
                && min_clock.is_none_or(|m| clock_mhz.is_some_and(|c| c >= m))
        })
        .and_then(|row| by_name(row.5))
        .map(|s| Detected {
            spec: s.clone(),
            by: DetectedBy::SmCountAndMemory,
        })
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
            ("NVIDIA H100 80GB HBM3", None, "H100 SXM5"),
            ("NVIDIA H200", None, "H200 SXM"),
            ("NVIDIA B200", None, "B200"),
            ("NVIDIA GB200", None, "GB200"),
            ("NVIDIA L4", None, "L4"),
            ("NVIDIA L40S", None, "L40S"),
            ("NVIDIA A10G", None, "A10G"),
            ("NVIDIA GeForce RTX 4070 Ti", None, "RTX 4070 Ti"),
            ("NVIDIA GeForce RTX 4090", None, "RTX 4090"),
            ("NVIDIA GeForce RTX 5070", None, "RTX 5070"),
            ("AMD Instinct MI250X", None, "MI250X"),
            ("AMD Instinct MI300X VF", None, "MI300X"),
            ("AMD Instinct MI300X", None, "MI300X"),
            ("AMD Instinct MI325X", None, "MI325X"),
            ("AMD Instinct MI355X", None, "MI355X"),
        ];
        for (reported, memory, row) in cases {
            assert_eq!(
                lookup(reported, memory).map(|d| d.name.as_ref()),
                Some(row),
                "{reported}"
            );
        }
        for unknown in ["Intel Arc A770", "", "NVIDIA L40", "NVIDIA H200 NVL"] {
            assert!(lookup(unknown, None).is_none(), "{unknown}");
        }
    }

    #[test]
    fn detection_falls_back_to_sm_count_and_memory() {
        // The vLLM traces' devices: empty name, 304 CUs, 192 GiB (MI300X).
        let d = Device {
            name: Some(String::new()),
            sm_count: Some(304),
            total_memory_bytes: Some(206_141_652_992),
            compute_major: Some(9),
            ..Device::default()
        };
        let got = detect(&d, None).unwrap();
        assert_eq!(
            (got.spec.name.as_ref(), got.by),
            ("MI300X", DetectedBy::SmCountAndMemory)
        );
        // Same count, a memory size no row has: unknown, not a guess.
        let odd = Device {
            total_memory_bytes: Some(100 << 30),
            ..d.clone()
        };
        assert!(detect(&odd, None).is_none());
        // A name wins over the counts; a user's spec wins over both.
        let named = Device {
            name: Some("AMD Instinct MI325X".into()),
            ..d.clone()
        };
        assert_eq!(detect(&named, None).unwrap().spec.name, "MI325X");
        let user = DeviceSpec::from_json(
            r#"{"name":"lab board","memory_bandwidth_gbs":100,"bf16_tensor_tflops":50}"#,
        )
        .unwrap();
        let got = detect(&named, Some(&user)).unwrap();
        assert_eq!(
            (got.spec.name.as_ref(), got.by),
            ("lab board", DetectedBy::UserSpec)
        );
        assert_eq!(got.spec.peak_flops(Precision::Bf16), Some(50e12));
        assert_eq!(got.spec.source, "user's --device-spec file");
        // A product name the table lacks is unknown even when its counts fit a row; an
        // architecture id is no product name, so counts decide.
        let nvl = Device {
            name: Some("NVIDIA H200 NVL".into()),
            sm_count: Some(132),
            total_memory_bytes: Some(150_000_000_000),
            compute_major: Some(9),
            ..Device::default()
        };
        assert!(detect(&nvl, None).is_none());
        let gfx = Device {
            name: Some("gfx942".into()),
            ..d.clone()
        };
        assert_eq!(detect(&gfx, None).unwrap().spec.name, "MI300X");
        assert!(names_no_product(None) && names_no_product(Some(" ")));
        assert!(names_no_product(Some("sm_90")) && !names_no_product(Some("gfx")));
        assert!(!names_no_product(Some("AMD Instinct MI350X")));
    }

    #[test]
    fn user_specs_are_checked() {
        for bad in [
            "{}",
            r#"{"name":"x"}"#,
            r#"{"name":"x","memory_bandwidth_gbs":0}"#,
            r#"{"name":"x","memory_bandwidth_gbs":10,"fp8_tensor_tflops":-1}"#,
            "[1,2]",
        ] {
            assert!(DeviceSpec::from_json(bad).is_err(), "{bad}");
        }
        // A misspelt field is named with the accepted ones, not dropped.
        let e = DeviceSpec::from_json(r#"{"name":"x","memory_bandwidth_gbs":10,"bf16_tflops":50}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown field `bf16_tflops`") && e.contains("`bf16_tensor_tflops`"),
            "{e}"
        );
        // A field name spelt with an escaped newline (quoted by serde_json as decoded): still
        // one line, the newline escaped again.
        let e = DeviceSpec::from_json(r#"{"name":"x","memory_b\ndwidth_gbs":10}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `memory_b\\ndwidth_gbs`"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        // Peaks that would make "% of peak" infinite or 0.0 %: refused, naming the field.
        for (json, field) in [
            (r#""fp32_tflops":5e-324"#, "fp32_tflops"),
            (r#""fp16_tensor_tflops":1e308"#, "fp16_tensor_tflops"),
            (
                r#""link_bandwidth_gbs_per_direction":1e9"#,
                "link_bandwidth_gbs_per_direction",
            ),
        ] {
            let text = format!(r#"{{"name":"x","memory_bandwidth_gbs":10,{json}}}"#);
            let e = DeviceSpec::from_json(&text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{field} must be a number in [")),
                "{e}"
            );
        }
        let e = DeviceSpec::from_json(r#"{"name":"x","memory_bandwidth_gbs":1e-9}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "memory_bandwidth_gbs must be a number in [0.1, 1000000] GB/s (a physically \
             plausible peak), got 1e-9"
        );
        // The bounds themselves are accepted, and every row of the table is inside them.
        let edge = r#"{"name":"x","memory_bandwidth_gbs":0.1,"fp4_tensor_tflops":1000000}"#;
        assert!(DeviceSpec::from_json(edge).is_ok());
        for d in DEVICES {
            let json = serde_json::to_string(d).unwrap();
            assert!(DeviceSpec::from_json(&json).is_ok(), "{json}");
        }
    }

    #[test]
    fn every_row_is_consistent() {
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
            assert!(!d.source.is_empty(), "{} has no source", d.name);
            // Dense tensor peaks double with each halving of the precision where both are
            // listed (FP16 -> FP8 -> FP4), the vendors' own ratio: a typo'd sparse figure
            // breaks it.
            let pairs = [
                (d.fp16_tensor_tflops, d.fp8_tensor_tflops),
                (d.fp8_tensor_tflops, d.fp4_tensor_tflops),
                (d.tf32_tensor_tflops, d.fp16_tensor_tflops),
            ];
            for (lo, hi) in pairs {
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    assert!((hi / lo - 2.0).abs() < 0.03, "{}: {lo} -> {hi}", d.name);
                }
            }
            assert_eq!(
                d.fp16_tensor_tflops.is_some(),
                d.bf16_tensor_tflops.is_some() || d.name.starts_with("V100"),
                "{}",
                d.name
            );
        }
    }
}
