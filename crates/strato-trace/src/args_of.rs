//! Whose attribute blobs an analysis family reads: one definition shared by the importers (which
//! blobs an import keeps), the store reader (which blobs a read loads) and the analyses that
//! rely on them, so that a narrower import never drops a blob an analysis reads.

use crate::Level;

/// Whether a host span named `name` is the CPU side of a collective: PyTorch's
/// `record_param_comms`, the `nccl:*` annotations and the `c10d::*` ops (their args say the
/// kind, process group, sequence number, sizes and dtype).
pub fn is_collective_cpu_op(name: &str) -> bool {
    name == "record_param_comms" || name.starts_with("nccl:") || name.starts_with("c10d::")
}

/// Whether the dependency analyses (critical path, collectives) read the args of an event at
/// `level`, named `name`, on a device queue or not (`on_device`): device operations (a
/// collective kernel's attributes), accelerator API calls (a stream wait's `wait_on_stream`)
/// and the CPU side of a collective ([`is_collective_cpu_op`]). Everything else (framework
/// ops' input shapes, Python frames) they do not read.
pub fn dependency_args(level: Level, on_device: bool, name: &str) -> bool {
    on_device
        || level.is_device_op()
        || level == Level::AcceleratorApi
        || is_collective_cpu_op(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dependency_analyses_args_are_kept_and_only_those() {
        assert!(dependency_args(
            Level::DeviceKernel,
            true,
            "ncclKernel_AllReduce"
        ));
        assert!(dependency_args(
            Level::Backend,
            true,
            "gpu annotation on a queue"
        ));
        assert!(dependency_args(
            Level::AcceleratorApi,
            false,
            "cudaStreamWaitEvent"
        ));
        assert!(dependency_args(Level::Backend, false, "record_param_comms"));
        assert!(dependency_args(Level::Backend, false, "nccl:all_reduce"));
        assert!(dependency_args(Level::Backend, false, "c10d::allreduce_"));
        assert!(!dependency_args(Level::Backend, false, "aten::mm"));
        assert!(!dependency_args(Level::Python, false, "train.py(12): step"));
    }
}
