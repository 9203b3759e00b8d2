//! Levels (strata of the stack) and the data-driven mapping from a source's own categories to
//! levels. The default mapping is documented in `docs/levels.md`; users override it with a JSON
//! list of [`LevelRule`]s (`strato --level-map FILE`).

use crate::message::escape_controls;
use serde::{Deserialize, Serialize};

/// The strata of an ML workload's stack, from high to low. The order of the variants is the
/// order of the stack: `Phase < Operation < Python < ... < Overhead`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Level {
    /// A phase of the workload (training, evaluation, data collection).
    Phase,
    /// A user's algorithmic operation: user annotations, framework step markers, NVTX ranges.
    Operation,
    /// Python interpreter.
    Python,
    /// ML framework operators (ATen ops, TF ops).
    Backend,
    /// Simulators (gymnasium native envs, mujoco, ale_py).
    Simulator,
    /// Other native libraries (numpy, ...).
    Library,
    /// Accelerator API calls (CUDA runtime/driver, OpenCL, HIP).
    AcceleratorApi,
    /// Device kernels.
    DeviceKernel,
    /// Device copies (memcpy).
    DeviceCopy,
    /// Device memory sets (memset).
    DeviceSet,
    /// Device-side synchronization (event/stream waits recorded on the device).
    DeviceSync,
    /// Operating system (syscalls, scheduling).
    Os,
    /// The profiler's own book-keeping.
    Overhead,
    /// Anything that belongs to no stratum (profiler window markers, unknown categories).
    Other,
}

impl Level {
    /// Every level in stack order.
    pub const ALL: [Level; 14] = [
        Level::Phase,
        Level::Operation,
        Level::Python,
        Level::Backend,
        Level::Simulator,
        Level::Library,
        Level::AcceleratorApi,
        Level::DeviceKernel,
        Level::DeviceCopy,
        Level::DeviceSet,
        Level::DeviceSync,
        Level::Os,
        Level::Overhead,
        Level::Other,
    ];

    /// Stable name used in files and output (`"DeviceKernel"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Phase => "Phase",
            Level::Operation => "Operation",
            Level::Python => "Python",
            Level::Backend => "Backend",
            Level::Simulator => "Simulator",
            Level::Library => "Library",
            Level::AcceleratorApi => "AcceleratorApi",
            Level::DeviceKernel => "DeviceKernel",
            Level::DeviceCopy => "DeviceCopy",
            Level::DeviceSet => "DeviceSet",
            Level::DeviceSync => "DeviceSync",
            Level::Os => "Os",
            Level::Overhead => "Overhead",
            Level::Other => "Other",
        }
    }

    /// Parses [`Level::as_str`] output.
    pub fn parse(text: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|level| level.as_str() == text)
    }

    /// True for work that runs on a device (kernels, copies, sets, device-side syncs).
    pub fn is_device_op(self) -> bool {
        matches!(
            self,
            Level::DeviceKernel | Level::DeviceCopy | Level::DeviceSet | Level::DeviceSync
        )
    }

    /// Small stable code used in columnar storage.
    pub fn code(self) -> u8 {
        Level::ALL.iter().position(|&l| l == self).unwrap_or(13) as u8
    }

    /// Inverse of [`Level::code`].
    pub fn from_code(code: u8) -> Option<Level> {
        Level::ALL.get(code as usize).copied()
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One mapping rule: events of `format` (e.g. `"kineto"`, `"nsys"`, or `"*"` for any) whose
/// source category equals `category` get `level`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelRule {
    pub format: String,
    pub category: String,
    pub level: Level,
}

/// Error building a [`LevelMap`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LevelMapError {
    #[error("level rule with an empty category")]
    EmptyCategory,
    /// The text is not a JSON list of rules (the parser's message).
    #[error("not a list of {{format, category, level}} rules: {0}")]
    Json(String),
    #[error("{count} level rules; at most {max} are read")]
    TooManyRules { count: usize, max: usize },
}

/// Most rules a level map ([`LevelMap::from_json`]) may add: a real map overrides a few
/// categories, and every category an importer meets is looked up through all of them.
pub const MAX_LEVEL_RULES: usize = 1000;

/// Maps (format, source category) to a level. Later rules win over earlier ones, and a rule for
/// the exact format wins over a `"*"` rule. Categories are compared case-sensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelMap {
    rules: Vec<LevelRule>,
}

impl Default for LevelMap {
    fn default() -> Self {
        LevelMap {
            rules: default_rules(),
        }
    }
}

impl LevelMap {
    /// The default mapping with `overrides` applied on top.
    pub fn with_overrides(overrides: Vec<LevelRule>) -> Result<Self, LevelMapError> {
        if overrides.iter().any(|r| r.category.is_empty()) {
            return Err(LevelMapError::EmptyCategory);
        }
        let mut map = LevelMap::default();
        map.rules.extend(overrides);
        Ok(map)
    }

    /// The default mapping with the rules of a `--level-map` file applied on top: `text` is a
    /// JSON list of `{"format", "category", "level"}` objects (every field required, the
    /// category not empty), at most [`MAX_LEVEL_RULES`] of them.
    pub fn from_json(text: &str) -> Result<Self, LevelMapError> {
        let rules: Vec<LevelRule> = serde_json::from_str(text)
            .map_err(|e| LevelMapError::Json(escape_controls(&e.to_string()).into_owned()))?;
        if rules.len() > MAX_LEVEL_RULES {
            return Err(LevelMapError::TooManyRules {
                count: rules.len(),
                max: MAX_LEVEL_RULES,
            });
        }
        LevelMap::with_overrides(rules)
    }

    /// The level of `category` in `format`, or `None` when no rule names it.
    pub fn level(&self, format: &str, category: &str) -> Option<Level> {
        let exact = self
            .rules
            .iter()
            .rev()
            .find(|r| r.format == format && r.category == category);
        exact
            .or_else(|| {
                self.rules
                    .iter()
                    .rev()
                    .find(|r| r.format == "*" && r.category == category)
            })
            .map(|r| r.level)
    }

    /// All rules, defaults first.
    pub fn rules(&self) -> &[LevelRule] {
        &self.rules
    }
}

fn default_rules() -> Vec<LevelRule> {
    use Level::*;
    let table: &[(&str, &str, Level)] = &[
        // PyTorch profiler / Kineto, current schema.
        ("kineto", "user_annotation", Operation),
        ("kineto", "gpu_user_annotation", Operation),
        ("kineto", "python_function", Python),
        ("kineto", "cpu_op", Backend),
        ("kineto", "cpu_instant_event", Backend),
        ("kineto", "cuda_runtime", AcceleratorApi),
        ("kineto", "cuda_driver", AcceleratorApi),
        ("kineto", "cuda_sync", DeviceSync),
        ("kineto", "kernel", DeviceKernel),
        ("kineto", "gpu_memcpy", DeviceCopy),
        ("kineto", "gpu_memset", DeviceSet),
        ("kineto", "overhead", Overhead),
        ("kineto", "collective_comm", Backend),
        ("kineto", "cuda_profiler_range", Other),
        ("kineto", "Trace", Other),
        // Kineto's activity types of other accelerators (libkineto's `ActivityType` names;
        // HTA counts `mtia_ccp_events` among device events and `*_runtime` among CPU ones):
        // MTIA's device-side command processor events, Gaudi's device ops, and the runtimes
        // of MTIA, Intel XPU and out-of-tree (PrivateUse1) backends.
        ("kineto", "mtia_ccp_events", DeviceKernel),
        ("kineto", "hpu_op", DeviceKernel),
        ("kineto", "mtia_runtime", AcceleratorApi),
        ("kineto", "xpu_runtime", AcceleratorApi),
        ("kineto", "xpu_driver", AcceleratorApi),
        ("kineto", "privateuse1_runtime", AcceleratorApi),
        ("kineto", "privateuse1_driver", AcceleratorApi),
        ("kineto", "glow_runtime", AcceleratorApi),
        // Kineto, 2021 schema.
        ("kineto", "Operator", Backend),
        ("kineto", "Runtime", AcceleratorApi),
        ("kineto", "Kernel", DeviceKernel),
        ("kineto", "Memcpy", DeviceCopy),
        ("kineto", "Memset", DeviceSet),
        // Nsight Systems tables.
        ("nsys", "CUPTI_ACTIVITY_KIND_KERNEL", DeviceKernel),
        ("nsys", "CUPTI_ACTIVITY_KIND_MEMCPY", DeviceCopy),
        ("nsys", "CUPTI_ACTIVITY_KIND_MEMSET", DeviceSet),
        (
            "nsys",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            AcceleratorApi,
        ),
        ("nsys", "CUPTI_ACTIVITY_KIND_RUNTIME", AcceleratorApi),
        ("nsys", "NVTX_EVENTS", Operation),
        ("nsys", "OSRT_API", Os),
        // TensorFlow / JAX (trace viewer JSON and XPlane): categories are assigned by the
        // importer from the line (thread) name.
        ("tf", "tf_op", Backend),
        ("tf", "step", Operation),
        ("tf", "python", Python),
        ("tf", "host", Library),
        ("tf", "device_kernel", DeviceKernel),
        ("tf", "device_copy", DeviceCopy),
        ("tf", "device_other", DeviceKernel),
        ("tf", "host_api", AcceleratorApi),
        ("tf", "device_memset", DeviceSet),
        ("tf", "name_scope", Operation),
        ("tf", "xla_module", Operation),
        ("tf", "device_derived", Other),
        // rocprofv3 JSON: the buffer-tracing kind of each record (rocprofiler-sdk's
        // `ROCPROFILER_BUFFER_TRACING_*` names, as the file's `strings.buffer_records` spells
        // them).
        ("rocprof", "KERNEL_DISPATCH", DeviceKernel),
        ("rocprof", "MEMORY_COPY", DeviceCopy),
        ("rocprof", "HIP_RUNTIME_API", AcceleratorApi),
        ("rocprof", "HIP_COMPILER_API", AcceleratorApi),
        ("rocprof", "HSA_CORE_API", AcceleratorApi),
        ("rocprof", "HSA_AMD_EXT_API", AcceleratorApi),
        ("rocprof", "HSA_IMAGE_EXT_API", AcceleratorApi),
        ("rocprof", "HSA_FINALIZE_EXT_API", AcceleratorApi),
        ("rocprof", "MARKER_CORE_API", Operation),
        ("rocprof", "MARKER_CONTROL_API", Other),
        ("rocprof", "MARKER_NAME_API", Other),
        ("rocprof", "RCCL_API", Library),
        ("rocprof", "ROCDECODE_API", Library),
        ("rocprof", "ROCJPEG_API", Library),
        // The section names rocprof.rs falls back to when a file has no `strings` table.
        ("rocprof", "MARKER_API", Operation),
        // Perfetto TrackEvent categories as rocprofv3 writes them (a span's `level` debug
        // annotation, as stratoscope's exporter writes it, wins over these).
        ("perfetto", "kernel_dispatch", DeviceKernel),
        ("perfetto", "memory_copy", DeviceCopy),
        ("perfetto", "hip_api", AcceleratorApi),
        ("perfetto", "hsa_api", AcceleratorApi),
        ("perfetto", "marker_api", Operation),
        ("perfetto", "rccl_api", Library),
        ("perfetto", "rocdecode_api", Library),
        ("perfetto", "rocjpeg_api", Library),
        // stratoscope's own recorder.
        ("strato", "operation", Operation),
        ("strato", "phase", Phase),
        ("strato", "python", Python),
        ("strato", "backend", Backend),
        ("strato", "simulator", Simulator),
        ("strato", "library", Library),
        ("strato", "opencl", AcceleratorApi),
        ("strato", "opencl_kernel", DeviceKernel),
        ("strato", "opencl_copy", DeviceCopy),
        ("strato", "opencl_fill", DeviceSet),
        ("strato", "overhead", Overhead),
    ];
    table
        .iter()
        .map(|&(format, category, level)| LevelRule {
            format: format.to_owned(),
            category: category.to_owned(),
            level,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let map = LevelMap::default();
        assert_eq!(map.level("kineto", "cpu_op"), Some(Level::Backend));
        assert_eq!(map.level("kineto", "Kernel"), Some(Level::DeviceKernel));
        assert_eq!(map.level("kineto", "no_such"), None);
        let map = LevelMap::with_overrides(vec![
            LevelRule {
                format: "kineto".into(),
                category: "cpu_op".into(),
                level: Level::Library,
            },
            LevelRule {
                format: "*".into(),
                category: "mine".into(),
                level: Level::Simulator,
            },
        ])
        .unwrap();
        assert_eq!(map.level("kineto", "cpu_op"), Some(Level::Library));
        assert_eq!(map.level("nsys", "mine"), Some(Level::Simulator));
    }

    #[test]
    fn level_map_files_parse_and_are_bounded() {
        let map =
            LevelMap::from_json(r#"[{"format":"*","category":"mine","level":"Library"}]"#).unwrap();
        assert_eq!(map.level("nsys", "mine"), Some(Level::Library));
        assert!(matches!(
            LevelMap::from_json(r#"{"format":"*"}"#),
            Err(LevelMapError::Json(_))
        ));
        assert_eq!(
            LevelMap::from_json(r#"[{"format":"*","category":"","level":"Library"}]"#),
            Err(LevelMapError::EmptyCategory)
        );
        // A level the file spells with an escaped newline: named escaped, on one line.
        let e = LevelMap::from_json(r#"[{"format":"*","category":"c","level":"Lib\nrary"}]"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `Lib\\nrary`"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        let rule = r#"{"format":"*","category":"c","level":"Os"}"#;
        let list = |n: usize| format!("[{}]", vec![rule; n].join(","));
        assert!(LevelMap::from_json(&list(MAX_LEVEL_RULES)).is_ok());
        assert_eq!(
            LevelMap::from_json(&list(MAX_LEVEL_RULES + 1)),
            Err(LevelMapError::TooManyRules {
                count: MAX_LEVEL_RULES + 1,
                max: MAX_LEVEL_RULES
            })
        );
    }

    #[test]
    fn codes_round_trip_and_order_is_the_stack() {
        for level in Level::ALL {
            assert_eq!(Level::from_code(level.code()), Some(level));
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
        assert!(Level::Operation < Level::Backend);
        assert!(Level::AcceleratorApi < Level::DeviceKernel);
        assert!(Level::DeviceKernel.is_device_op());
        assert!(!Level::Backend.is_device_op());
    }
}
