//! Command-line values shared by several commands, turned into the analyses' plain options.

use clap::ValueEnum;
use strato_analysis::cross_stack::layers::{LayerSource, LayersOptions};

/// What a layer is (`--by`), for `strato layers` and `strato roofline`. `module` (the
/// nn.Module tree, `strato_analysis::cross_stack::modules`) is a `strato layers` view only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayerBy {
    Op,
    Annotation,
    Module,
}

impl LayerBy {
    /// The layers analysis' source; `None` for `module`, which has its own analysis.
    fn source(self) -> Option<LayerSource> {
        match self {
            LayerBy::Op => Some(LayerSource::Op),
            LayerBy::Annotation => Some(LayerSource::Annotation),
            LayerBy::Module => None,
        }
    }
}

impl LayerBy {
    /// The layers analysis' options for this `--by`, trim fraction and batch size.
    /// `None` for `--by module` (not a layers-analysis source).
    pub(crate) fn options(self, trim: f64, batch_size: Option<u64>) -> Option<LayersOptions> {
        Some(LayersOptions {
            source: self.source()?,
            trim,
            batch_size,
        })
    }
}
