//! placeholder
use crate::{input::Input, Error, ErrorKind, ImportOptions, Result};
use std::path::Path;
use strato_trace::Trace;
pub fn import(path: &Path, _input: Input, _options: &ImportOptions) -> Result<Trace> {
    Err(Error::new(path, ErrorKind::UnknownFormat("todo".into())))
}
