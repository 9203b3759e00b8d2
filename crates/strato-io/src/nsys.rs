//! Nsight Systems SQLite export importer. (In progress.)
use crate::{Error, ErrorKind, ImportOptions, Result};
use std::path::Path;
use strato_trace::Trace;

/// Imports an `nsys export --type sqlite` database.
pub fn import(path: &Path, _options: &ImportOptions) -> Result<Trace> {
    Err(Error::new(
        path,
        ErrorKind::UnknownFormat("Nsight Systems import is not built yet".into()),
    ))
}
