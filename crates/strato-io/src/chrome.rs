//! Chrome-trace JSON importer (Kineto, TF trace viewer, generic). (In progress.)
use crate::{input::Input, Error, ErrorKind, ImportOptions, Result};
use std::path::Path;
use strato_trace::Trace;

/// Imports a Chrome-trace JSON document.
pub fn import(path: &Path, _input: Input, _options: &ImportOptions) -> Result<Trace> {
    Err(Error::new(
        path,
        ErrorKind::UnknownFormat("not built yet".into()),
    ))
}
