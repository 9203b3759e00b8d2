//! The command context: what every command takes from the global options, built once by
//! `app` from the command line and passed to each command's `run`. Inputs are opened through
//! its [`Engine`] (`strato-engine`, the one way in for every front end), with the terminal as
//! the engine's listener (progress bar, warnings and notes on stderr). There is no
//! process-wide state: the Python package runs several commands in one process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use strato_engine::{Engine, OpenOptions};

/// What commands take from the global options, built once from the command line.
#[derive(Debug, Default)]
pub struct Ctx {
    /// Opens inputs with the global input options (`--level-map`, `--graph-capture`,
    /// `--salvage`, `--keep-secrets`, `--jobs`).
    pub engine: Engine,
    /// `--csv-raw`: CSV cells written as they are (see [`strato_analysis::text::table`]).
    pub csv_raw: bool,
}

impl Ctx {
    /// A context opening with `options` and telling the terminal, writing CSV cells raw when
    /// `csv_raw`.
    pub fn new(options: OpenOptions, csv_raw: bool) -> Ctx {
        Ctx {
            engine: Engine::new(options, Arc::new(crate::term::Terminal)),
            csv_raw,
        }
    }

    /// The import options of a command; `keep_args` keeps event args
    /// ([`Engine::import_options`]).
    pub(crate) fn import_options(&self, keep_args: bool) -> Result<strato_io::ImportOptions> {
        Ok(self.engine.import_options(keep_args)?)
    }

    /// Every file a command reading `inputs` reads: `inputs` and the global options' files
    /// (`--graph-capture`, `--level-map`), which an output may not overwrite either
    /// ([`crate::output`]).
    pub(crate) fn read_paths<'a>(
        &self,
        inputs: impl IntoIterator<Item = &'a PathBuf>,
    ) -> Vec<PathBuf> {
        inputs
            .into_iter()
            .cloned()
            .chain(self.engine.options().option_files())
            .collect()
    }

    /// How a command asked for CSV (`--csv`) writes its tables (`--csv-raw` applied).
    pub(crate) fn table_format(&self, csv: bool) -> strato_analysis::text::table::TableFormat {
        if csv {
            strato_analysis::text::table::TableFormat::Csv { raw: self.csv_raw }
        } else {
            strato_analysis::text::table::TableFormat::Text
        }
    }

    /// The label of one side of a comparison (`strato diff`, `strato report --baseline`): its
    /// path as given.
    pub(crate) fn side_label(path: &Path) -> String {
        path.display().to_string()
    }
}
