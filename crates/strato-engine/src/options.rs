//! [`OpenOptions`] (the options every input takes, typed), [`Listener`] (what a front end is
//! told while inputs are read) and [`Engine`], which holds both and opens inputs with them.

use std::path::PathBuf;
use std::sync::Arc;

use strato_io::{ImportOptions, ProgressHook};
use strato_trace::LevelMap;

use crate::{EngineError, Result};

/// The options every input of a command (or of `stratoscope.open`) takes. Plain values: the
/// front end fills them from its flags or arguments; nothing is read from process-wide state
/// but the documented environment variables (`STRATO_MEMORY_BUDGET`, `STRATO_JOBS`), read by
/// [`Engine::import_options`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// A JSON list of `{format, category, level}` rules over the default level map.
    pub level_map: Option<PathBuf>,
    /// The trace that captured the CUDA/HIP graphs the inputs replay: replayed graph kernels
    /// are attributed to their captured launches ([`strato_analysis::cross_stack::graphs`]). An
    /// analysis that needs this reads the whole trace (no streaming, no rank-by-rank path).
    pub graph_capture: Option<PathBuf>,
    /// Keep what can be read from a damaged Chrome/Kineto input (an import note says what was
    /// lost) instead of failing.
    pub salvage: bool,
    /// Leave secrets in metadata, names and event attributes (else [`strato_io::redact`]).
    pub keep_secrets: bool,
    /// How many rank files are imported at once; `None`: `STRATO_JOBS`, else all cores.
    pub jobs: Option<usize>,
}

impl OpenOptions {
    /// The files every input of these options reads besides the inputs themselves
    /// (`graph_capture`, `level_map`): an output may not overwrite them either.
    pub fn option_files(&self) -> Vec<PathBuf> {
        self.graph_capture
            .iter()
            .chain(&self.level_map)
            .cloned()
            .collect()
    }
}

/// What a front end is told while inputs are read. The CLI draws a progress bar and prints
/// the lines on stderr; the Python API stays quiet ([`Quiet`]).
pub trait Listener: Send + Sync {
    /// The hook imports report their progress to (`None`: no progress shown).
    fn progress(&self) -> Option<ProgressHook> {
        None
    }
    /// An import has read its inputs: a progress display ends here.
    fn import_finished(&self) {}
    /// A line for the user: an import warning, a note about how inputs were read.
    fn notice(&self, _line: &str) {}
}

/// A [`Listener`] that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Listener for Quiet {}

/// Opens inputs with one set of [`OpenOptions`], telling a [`Listener`] what happens.
#[derive(Clone)]
pub struct Engine {
    options: OpenOptions,
    listener: Arc<dyn Listener>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(OpenOptions::default(), Arc::new(Quiet))
    }
}

impl Engine {
    /// An engine opening with `options`, telling `listener`.
    pub fn new(options: OpenOptions, listener: Arc<dyn Listener>) -> Engine {
        Engine { options, listener }
    }

    /// The options it opens with.
    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    pub(crate) fn listener(&self) -> &dyn Listener {
        &*self.listener
    }

    /// The import options of an analysis: the level map read (bounded like every
    /// configuration file), the memory budget (`STRATO_MEMORY_BUDGET`), the jobs (the option,
    /// else `STRATO_JOBS`), `salvage`, the listener's progress; `keep_args` keeps event
    /// attributes. The analysis narrows the projection and args scope on the value returned.
    pub fn import_options(&self, keep_args: bool) -> Result<ImportOptions> {
        let level_map = match &self.options.level_map {
            None => LevelMap::default(),
            Some(path) => {
                let text = strato_io::config::read_config_text(path, "the level map")?;
                LevelMap::from_json(&text).map_err(|e| EngineError::option(path, e))?
            }
        };
        self.import_options_with(level_map, keep_args)
    }

    /// The import options of a recording read back by `strato record` and `validate`: the
    /// default level map (a recording names its own levels), no attributes.
    pub fn recording_import_options(&self) -> Result<ImportOptions> {
        self.import_options_with(LevelMap::default(), false)
    }

    fn import_options_with(&self, level_map: LevelMap, keep_args: bool) -> Result<ImportOptions> {
        let memory_budget_bytes = strato_io::budget::memory_budget_from_env()
            .map_err(|e| EngineError::InvalidOption(e.to_string()))?;
        let jobs = match self.options.jobs {
            Some(n) if n > 0 => n,
            _ => strato_io::ranks::jobs_from_env()?,
        };
        Ok(ImportOptions {
            jobs,
            level_map,
            keep_args,
            memory_budget_bytes,
            progress: self.listener.progress(),
            salvage: self.options.salvage,
            ..ImportOptions::default()
        })
    }

    /// Whether secrets are redacted from what is opened.
    pub fn redacts(&self) -> bool {
        !self.options.keep_secrets
    }

    /// Whether `graph_capture` is set (then every analysis reads the whole trace).
    pub fn attributes_graph_capture(&self) -> bool {
        self.options.graph_capture.is_some()
    }
}
