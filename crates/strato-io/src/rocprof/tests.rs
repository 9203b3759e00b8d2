//! Unit tests of the rocprofv3 JSON importer, on small documents written here.

use super::*;

#[test]
fn head_sniffing() {
    assert!(is_rocprof_head(b"{\"rocprofiler-sdk-tool\":[]}"));
    assert!(is_rocprof_head(
        b"\xEF\xBB\xBF {\n  \"rocprofiler-sdk-tool\" : []}"
    ));
    assert!(!is_rocprof_head(b"{\"traceEvents\":[]}"));
    assert!(!is_rocprof_head(b"[{\"rocprofiler-sdk-tool\":1}]"));
    assert!(!is_rocprof_head(b"{\"rocprofiler-sdk"));
}
