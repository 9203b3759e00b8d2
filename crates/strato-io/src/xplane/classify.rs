//! Naming rules shared by the XPlane importer and the trace viewer JSON post-pass: which planes
//! (processes) are devices, which lines (threads) are streams, and the `tf` category of a line or
//! an event. Levels come from `options.level_map.level("tf", category)`.

use strato_trace::{Level, LevelMap};

/// What a plane (trace viewer: a process) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaneRole {
    /// `/device:GPU:N` (any `/device:KIND:N`): the device with index `N`; `gpu` for GPUs.
    Device { index: i64, gpu: bool },
    /// `/host:CPU`.
    HostCpu,
    /// Anything else.
    Other,
}

/// The role of a plane from its name.
pub fn plane_role(name: &str) -> PlaneRole {
    if name == "/host:CPU" {
        return PlaneRole::HostCpu;
    }
    if let Some(rest) = name.strip_prefix("/device:") {
        if let Some((kind, index)) = rest.rsplit_once(':') {
            if let Ok(index) = index.parse::<i64>() {
                return PlaneRole::Device {
                    index,
                    gpu: kind == "GPU",
                };
            }
        }
    }
    PlaneRole::Other
}

/// What a line (trace viewer: a thread) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineClass {
    /// A device stream (`Stream #14(Compute)`): kernels, copies, memsets.
    Stream,
    /// A line of framework ops (`TensorFlow Ops`, `XLA Ops`, `Framework Ops`): `tf_op`.
    Ops,
    /// Step markers (`Steps`): `step`.
    Steps,
    /// Name scopes (`TensorFlow Name Scope`, `Framework Name Scope`): `name_scope`.
    NameScope,
    /// XLA modules (`XLA Modules`): `xla_module`.
    Modules,
    /// Any other line: a host thread, or an unknown derived line of a device.
    Other,
}

/// The class of a line from its name.
pub fn line_class(name: &str) -> LineClass {
    match name {
        "TensorFlow Ops" | "XLA Ops" | "Framework Ops" => LineClass::Ops,
        "Steps" => LineClass::Steps,
        "TensorFlow Name Scope" | "Framework Name Scope" => LineClass::NameScope,
        "XLA Modules" => LineClass::Modules,
        _ if name.starts_with("Stream #") => LineClass::Stream,
        _ => LineClass::Other,
    }
}

/// Category of an event on a device stream: copies by name (`MemcpyH2D`, `MemcpyD2H`,
/// `MemcpyP2P`, …) or by a `memcpy_details` stat, memsets by name, kernels otherwise.
pub fn stream_category(event_name: &str, has_memcpy_details: bool) -> &'static str {
    if has_memcpy_details || event_name.starts_with("Memcpy") {
        "device_copy"
    } else if event_name.starts_with("Memset") {
        "device_memset"
    } else {
        "device_kernel"
    }
}

/// Category of an event of a derived (non-stream) line of a device plane.
pub fn derived_category(class: LineClass) -> &'static str {
    match class {
        LineClass::Ops => "tf_op",
        LineClass::Steps => "step",
        LineClass::NameScope => "name_scope",
        LineClass::Modules => "xla_module",
        LineClass::Stream | LineClass::Other => "device_derived",
    }
}

/// Category of a host event. In order: an event carrying a launch `correlation_id` is the
/// CUDA API call that launched a kernel or copy (`host_api`); a name starting with `$` is a
/// Python function (TF's Python tracer names them `$file:line function`); a `Steps` or ops
/// line gives its category; a TF op (`is_eager` stat, or named `scope/name:OpType`) is
/// `tf_op`; anything else is runtime or library code (`host`).
pub fn host_category(
    class: LineClass,
    event_name: &str,
    has_correlation: bool,
    has_is_eager: bool,
) -> &'static str {
    if has_correlation {
        "host_api"
    } else if event_name.starts_with('$') {
        "python"
    } else if matches!(
        class,
        LineClass::Steps | LineClass::Ops | LineClass::NameScope | LineClass::Modules
    ) {
        derived_category(class)
    } else if has_is_eager || looks_like_tf_op(event_name) {
        "tf_op"
    } else {
        "host"
    }
}

/// `scope/name:OpType` (TF's op TraceMe naming): one `:`, no `::`, no spaces, an op type
/// made of identifier characters starting with a letter or `_`.
pub fn looks_like_tf_op(name: &str) -> bool {
    if name.contains("::") || name.contains(' ') {
        return false;
    }
    match name.rsplit_once(':') {
        Some((scope, op)) => {
            !scope.is_empty()
                && op
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && op.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The level of a `tf` category: the level map's rule, else the importer's default for the
/// categories the default map does not name yet.
pub fn level(map: &LevelMap, category: &str) -> Level {
    map.level("tf", category).unwrap_or(match category {
        "device_memset" => Level::DeviceSet,
        "name_scope" | "xla_module" => Level::Operation,
        _ => Level::Other,
    })
}
