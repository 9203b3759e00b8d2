//! Unit tests of the Perfetto importer's track naming: rocprofv3 queues and threads, the
//! exporter's device tracks.

use super::tracks::*;

#[test]
fn track_names() {
    assert_eq!(
        rocprof_queue("COMPUTE AGENT [1] STREAM [0] (GPU)"),
        Some((1, 0))
    );
    assert_eq!(rocprof_queue("COMPUTE GPU [2] QUEUE [3] GPU"), Some((2, 3)));
    assert_eq!(
        rocprof_queue("COPY to AGENT [1] STREAM [0] (GPU)"),
        Some((1, -1))
    );
    assert_eq!(rocprof_queue("THREAD 0 (77)"), None);
    assert_eq!(rocprof_thread("THREAD 2 (12345)"), Some(12345));
    assert_eq!(device_of_name("GPU 3"), Some(3));
    assert_eq!(device_of_name("NVIDIA A100 (device 1) [rank 2]"), Some(1));
    assert_eq!(device_of_name("python (pid 4)"), None);
    assert_eq!(
        named_device("AMD Instinct MI300X (device 2) [rank 1]"),
        Some(("AMD Instinct MI300X", 2))
    );
    assert_eq!(named_device("GPU 2"), None);
    assert_eq!(trailing_number("stream 7"), Some(7));
    assert_eq!(trailing_number("memory copies"), None);
}
