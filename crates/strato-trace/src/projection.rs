//! What a reader keeps of a trace: the projection vocabulary shared by every reader (the
//! importers in `strato-io`, the profile store in `strato-store`) and decided by the analysis
//! that reads (through `strato-engine`). One definition, so an import of a JSON file and a read
//! of the profile made from it keep the same events.

/// Which events' attributes (`args`) a reader keeps, when it keeps any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArgsScope {
    /// Every event's.
    #[default]
    All,
    /// Only the args of events on a device queue (kernels, copies, sets, syncs, device
    /// annotations): what `kernels` and `iterations` read (queue times, copy bytes).
    DeviceOps,
    /// What the dependency analyses (`critical-path`, collectives) read
    /// ([`crate::args_of::dependency_args`]): device operations, accelerator API calls and
    /// the CPU side of collectives; not the framework ops' shapes.
    Dependencies,
}

/// Which spans a reader keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpanProjection {
    /// Every span.
    #[default]
    All,
    /// What the device time breakdown (`gpu-time`) reads: spans of device categories, spans
    /// with a launch correlation, `ProfilerStep#` spans, device operations and spans on a
    /// device queue, and every span of a category that is not one of
    /// [`KINETO_HOST_CATEGORIES`] (so a TensorFlow trace viewer file, whose events carry no
    /// category and are classified after the import, keeps all its spans). Left out: Kineto
    /// host spans without a correlation. Readers of formats other than Chrome/Kineto JSON
    /// keep every span.
    DeviceAndLaunches,
}

/// Kineto's host categories: with [`SpanProjection::DeviceAndLaunches`] their spans are left
/// out unless they carry a launch correlation or are `ProfilerStep#` steps.
pub const KINETO_HOST_CATEGORIES: &[&str] = &[
    "cpu_op",
    "user_annotation",
    "python_function",
    "Trace",
    "Operator",
    "fwdbwd",
];
