//! Command-line values shared by several commands, turned into the analyses' plain options.

use clap::ValueEnum;
use strato_analysis::layers::{LayerSource, LayersOptions};

/// What a layer is (`--by`), for `strato layers` and `strato roofline`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LayerBy {
    Op,
    Annotation,
}

impl LayerBy {
    fn source(self) -> LayerSource {
        match self {
            LayerBy::Op => LayerSource::Op,
            LayerBy::Annotation => LayerSource::Annotation,
        }
    }
}

impl LayerBy {
    /// The layers analysis' options for this `--by`, trim fraction and batch size.
    pub(crate) fn options(self, trim: f64, batch_size: Option<u64>) -> LayersOptions {
        LayersOptions {
            source: self.source(),
            trim,
            batch_size,
        }
    }
}
