//! Opening inputs rank by rank ([`Engine::map_ranks`]): each rank file imported on its own (in
//! parallel, [`strato_io::ranks`]), reduced to what the analysis keeps of it, and dropped, so
//! memory is what the analysis keeps plus at most `jobs` ranks in flight instead of every
//! event of every rank. `gpu-time`, `kernels` and `collectives` run this way.
//!
//! The answer is the one [`Engine::open`] + the analysis of the whole trace give: each file is
//! imported as `import_paths` imports it, redacted the same way, its import notes told in the
//! same order, shared rank claims noted the same way; rank and span ids are those of the whole
//! trace (file `k`'s ids shifted by the ranks and spans of the files before it). Inputs this
//! path does not cover (standard input, a profile directory, a partitioned store, a recording,
//! Nsight Compute metrics to attach, perf recordings to join, `graph_capture`) give `None`:
//! the caller then opens the profile whole.
//!
//! A partitioned store given alone is read leaf by leaf the same way where the caller asks for
//! it ([`Engine::map_ranks_or_leaves`]): each leaf is a stored profile of one rank, read as
//! [`Engine::open`] reads the store (the leaves appended in store order, as stored: no rank
//! claims checked again, secrets redacted unless `keep_secrets`, its import notes told once
//! for the job); a store whose profiles hold graph node links is left to the whole trace.

use std::path::{Path, PathBuf};

use strato_io::ImportOptions;
use strato_trace::{SourceFormat, Trace};

use crate::{Engine, Result};

/// What a rank file gave: the analysis' value and what the whole-trace path would have kept
/// of its ranks to present them.
#[derive(Debug)]
pub struct FilePart<T> {
    pub value: T,
    /// Per rank of the file: the job rank when the source says (`None`: the rank is known by
    /// its position in the input).
    pub job_ranks: Vec<Option<i64>>,
    /// The file's ranks as imported (for the job-wide rank claims, their notes and warnings).
    ranks: Vec<strato_trace::Rank>,
    /// Spans the file's trace held (to shift span ids to the whole trace's).
    pub spans: u32,
}

/// The files read and their parts, in input order.
#[derive(Debug)]
pub struct Streamed<T> {
    /// The rank files, or the store's leaf directories ([`Streamed::stored`]).
    pub files: Vec<PathBuf>,
    pub parts: Vec<FilePart<T>>,
    /// The files are the leaves of a partitioned store: stored profiles, whose rank claims
    /// were checked when they were imported.
    pub stored: bool,
}

impl<T> Streamed<T> {
    /// The first rank index and first span id of each file in the whole trace.
    pub fn offsets(&self) -> Vec<(u32, u32)> {
        let mut out = Vec::with_capacity(self.parts.len());
        let (mut ranks, mut spans) = (0u32, 0u32);
        for p in &self.parts {
            out.push((ranks, spans));
            ranks += p.job_ranks.len() as u32;
            spans += p.spans;
        }
        out
    }
}

impl<R> Streamed<Vec<R>> {
    /// Every file's per-rank rows in input order, one list; `set_rank` gives a rank the source
    /// did not number its position in the whole input (as the whole-trace path numbers it).
    pub fn into_ranks(self, set_rank: impl Fn(&mut R, i64)) -> Vec<R> {
        let offsets = self.offsets();
        let mut ranks = Vec::new();
        for (part, (first_rank, _)) in self.parts.into_iter().zip(offsets) {
            for (local, mut rank) in part.value.into_iter().enumerate() {
                if part.job_ranks[local].is_none() {
                    set_rank(&mut rank, i64::from(first_rank) + local as i64);
                }
                ranks.push(rank);
            }
        }
        ranks
    }
}

enum Failure {
    Read(crate::EngineError),
    /// The file needs the whole-trace path (Nsight Compute metrics, a recording).
    Whole,
}

impl Engine {
    /// Whether `inputs` can be read rank by rank, and the rank files when so.
    pub fn rank_files(&self, inputs: &[PathBuf]) -> Option<Vec<PathBuf>> {
        if self.attributes_graph_capture() {
            return None;
        }
        for input in inputs {
            if strato_io::input::is_stdin(input)
                || !input.exists()
                || strato_store::is_profile_dir(input)
                || strato_store::partitioned::is_store_dir(input)
                || strato_io::recording::is_recording_dir(input)
            {
                return None;
            }
        }
        let expanded = strato_io::ranks::expand_inputs(inputs).ok()?;
        if !expanded.recordings.is_empty() || expanded.files.is_empty() {
            return None;
        }
        Some(expanded.files)
    }

    /// The leaf directories of the partitioned store `inputs` is (given alone), in the order
    /// [`Engine::open`] appends them; `None` for other inputs, with `graph_capture`, and when
    /// the store cannot be listed (the whole-trace path then says why).
    pub fn store_leaves(&self, inputs: &[PathBuf]) -> Option<Vec<PathBuf>> {
        let [input] = inputs else { return None };
        if self.attributes_graph_capture() || !strato_store::partitioned::is_store_dir(input) {
            return None;
        }
        let leaves = strato_store::partitioned::partitions(input).ok()?;
        (!leaves.is_empty()).then(|| leaves.into_iter().map(|leaf| leaf.dir).collect())
    }

    /// One rank of the job read on its own: a store's leaf (a profile directory) as
    /// [`Engine::open`] reads the store, or a rank file as [`Engine::import_rank_file`]
    /// imports it; `None` when it must be read whole with the others.
    pub fn read_rank(&self, path: &Path, options: &ImportOptions) -> Result<Option<Trace>> {
        if !strato_store::is_profile_dir(path) {
            return Ok(self.import_rank_file(path, options)?);
        }
        let mut trace = strato_store::read_with(path, &crate::store_read_options(options))?;
        // Their attribution needs the whole trace (Engine::open).
        if strato_trace::names::has_graph_node_links(&trace) {
            return Ok(None);
        }
        if self.redacts() {
            strato_io::redact::redact_trace(&mut trace);
        }
        Ok(Some(trace))
    }

    /// One rank file imported as the whole-trace path imports it (redacted unless
    /// `keep_secrets`); `None` when it must be read whole with the others: Nsight Compute
    /// metrics, recordings and perf data join other files, and graph node links are
    /// attributed by [`Engine::open`] (which this path does not do).
    pub fn import_rank_file(
        &self,
        path: &Path,
        options: &ImportOptions,
    ) -> Result<Option<Trace>, strato_io::Error> {
        let mut trace = strato_io::import_file(path, options)?;
        if trace.ranks.iter().any(|r| {
            matches!(
                r.format,
                SourceFormat::Ncu | SourceFormat::Strato | SourceFormat::Perf
            )
        }) || strato_trace::names::has_graph_node_links(&trace)
        {
            return Ok(None);
        }
        if self.redacts() {
            strato_io::redact::redact_trace(&mut trace);
        }
        Ok(Some(trace))
    }

    /// Runs `analyse` on each rank file of `inputs` on its own (see the module docs); `None`
    /// when the inputs need the whole-trace path.
    pub fn map_ranks<T, F>(
        &self,
        inputs: &[PathBuf],
        options: &ImportOptions,
        analyse: F,
    ) -> Result<Option<Streamed<T>>>
    where
        T: Send,
        F: Fn(&Trace) -> T + Sync,
    {
        let Some(files) = self.rank_files(inputs) else {
            return Ok(None);
        };
        self.map_rank_inputs(files, false, options, analyse)
    }

    /// [`Engine::map_ranks`], and a partitioned store given alone leaf by leaf (see the module
    /// docs; [`Streamed::stored`] says which).
    pub fn map_ranks_or_leaves<T, F>(
        &self,
        inputs: &[PathBuf],
        options: &ImportOptions,
        analyse: F,
    ) -> Result<Option<Streamed<T>>>
    where
        T: Send,
        F: Fn(&Trace) -> T + Sync,
    {
        match self.store_leaves(inputs) {
            Some(leaves) => self.map_rank_inputs(leaves, true, options, analyse),
            None => self.map_ranks(inputs, options, analyse),
        }
    }

    /// `analyse` on each of `files` (rank files, or a store's leaves when `stored`) read on
    /// its own ([`Engine::read_rank`]), at most `--jobs` at once.
    fn map_rank_inputs<T, F>(
        &self,
        files: Vec<PathBuf>,
        stored: bool,
        options: &ImportOptions,
        analyse: F,
    ) -> Result<Option<Streamed<T>>>
    where
        T: Send,
        F: Fn(&Trace) -> T + Sync,
    {
        let parts = strato_io::ranks::map_files(&files, options.effective_jobs(), |_, file| {
            let trace = self
                .read_rank(file, options)
                .map_err(Failure::Read)?
                .ok_or(Failure::Whole)?;
            let value = analyse(&trace);
            Ok(FilePart {
                value,
                job_ranks: trace.ranks.iter().map(|r| r.rank).collect(),
                ranks: trace.ranks.clone(),
                spans: trace.spans.len() as u32,
            })
        });
        if !stored {
            self.listener().import_finished();
        }
        let mut parts = match parts {
            Ok(parts) => parts,
            Err(Failure::Whole) => return Ok(None),
            Err(Failure::Read(e)) => return Err(e),
        };
        let mut job = Trace {
            ranks: parts
                .iter_mut()
                .flat_map(|p| std::mem::take(&mut p.ranks))
                .collect(),
            ..Trace::default()
        };
        if stored {
            // As stored: the store's import notes told once, as Engine::open tells them.
            self.warn_import_notes(&job);
            return Ok(Some(Streamed {
                files,
                parts,
                stored,
            }));
        }
        // The job's rank claims checked across every file, as the whole import checks them
        // ([`strato_io::ranks::note_rank_claims`]: a negative rank is no rank, notes on
        // contradictions), then told as the whole import tells them.
        strato_io::ranks::note_rank_claims(&mut job);
        let mut claimed = job.ranks.iter().map(|r| r.rank);
        for part in &mut parts {
            for rank in &mut part.job_ranks {
                *rank = claimed.next().flatten();
            }
        }
        self.note_shared_rank_claims(&job);
        self.warn_import_notes(&job);
        Ok(Some(Streamed {
            files,
            parts,
            stored,
        }))
    }
}
