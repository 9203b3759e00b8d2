//! XSpace protobuf (`*.xplane.pb`) importer. (In progress.)
use crate::{input::Input, Error, ErrorKind, ImportOptions, Result};
use std::path::Path;
use strato_trace::Trace;

/// Imports an XSpace protobuf.
pub fn import(path: &Path, _input: Input, _options: &ImportOptions) -> Result<Trace> {
    Err(Error::new(
        path,
        ErrorKind::UnknownFormat("XPlane import is not built yet".into()),
    ))
}
