//! Nsight Compute CSV importer. (In progress.)
use crate::{input::Input, Error, ErrorKind, ImportOptions, Result};
use std::path::Path;
use strato_trace::Trace;

/// Imports an `ncu --csv` file.
pub fn import(path: &Path, _input: Input, _options: &ImportOptions) -> Result<Trace> {
    Err(Error::new(
        path,
        ErrorKind::UnknownFormat("Nsight Compute import is not built yet".into()),
    ))
}

/// Attaches the kernel metrics in `metrics` (an imported ncu trace) to the matching kernels of
/// `timeline`; metrics without a match are appended as their own rank.
pub fn attach(timeline: &mut Trace, metrics: Trace) {
    timeline.append(metrics);
}
