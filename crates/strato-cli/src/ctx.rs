//! The command context: what every command takes from the global options (`--level-map`,
//! ...), built once by `app` from the command line and passed to each command's `run`.

use std::path::PathBuf;

use anyhow::Result;

/// What commands take from the global options, built once from the command line.
#[derive(Debug, Default)]
pub struct Ctx {
    /// `--level-map`: level rules over the default category -> level mapping.
    pub level_map: Option<PathBuf>,
    /// `--graph-capture`: the trace that captured the CUDA/HIP graphs the inputs replay;
    /// applied by [`crate::input::open_profile`] (see `strato_analysis::graphs`).
    pub graph_capture: Option<PathBuf>,
}

impl Ctx {
    /// The import options of a command; `keep_args` keeps event args (see
    /// [`crate::input::import_options`]).
    pub(crate) fn import_options(&self, keep_args: bool) -> Result<strato_io::ImportOptions> {
        crate::input::import_options(self.level_map.as_deref(), keep_args)
    }
}
