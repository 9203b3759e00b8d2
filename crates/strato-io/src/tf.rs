//! TensorFlow / JAX trace viewer JSON: a post-pass over the Chrome-JSON import. (In progress.)
use crate::ImportOptions;
use strato_trace::Trace;

/// Recognises a TF trace viewer trace (pids named `/device:GPU:N`, `/host:CPU`) and moves its
/// device lines onto device-queue tracks with device levels. Other traces pass unchanged.
pub fn post_process(trace: Trace, _options: &ImportOptions) -> Trace {
    trace
}
