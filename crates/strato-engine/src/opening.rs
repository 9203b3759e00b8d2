//! How the registry opens inputs for an analysis ([`Opening`]): by default the registry's own
//! ways ([`Plain`]); an analysis that reads its inputs its own way (several rank files reduced
//! one at a time, then some read again) gives its opening beside the engine code it uses
//! (`crate::collectives::RankByRank`). Apart from the registry so that such code does not
//! import the registry that names it.

use std::path::PathBuf;

use strato_analysis::registry::Analysis;

use crate::{Engine, Result};

/// How the engine opens inputs for an analysis that reads them its own way (several rank
/// files reduced rank by rank, then the late ranks read again, say): `None` when the inputs
/// are not ones it handles (the registry's usual ways then apply).
pub trait Opening<A: Analysis> {
    fn open(
        engine: &Engine,
        inputs: &[PathBuf],
        import: &strato_io::ImportOptions,
        options: &A::Options,
    ) -> Result<Option<A::Output>>;
}

/// No opening of its own: the registry's ways ([`Analysis::stream`], rank by rank, whole).
#[derive(Debug)]
pub struct Plain;

impl<A: Analysis> Opening<A> for Plain {
    fn open(
        _: &Engine,
        _: &[PathBuf],
        _: &strato_io::ImportOptions,
        _: &A::Options,
    ) -> Result<Option<A::Output>> {
        Ok(None)
    }
}
