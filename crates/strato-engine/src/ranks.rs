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
    pub files: Vec<PathBuf>,
    pub parts: Vec<FilePart<T>>,
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
    Import(strato_io::Error),
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
        let parts = strato_io::ranks::map_files(&files, options.effective_jobs(), |_, file| {
            let trace = self
                .import_rank_file(file, options)
                .map_err(Failure::Import)?
                .ok_or(Failure::Whole)?;
            let value = analyse(&trace);
            Ok(FilePart {
                value,
                job_ranks: trace.ranks.iter().map(|r| r.rank).collect(),
                ranks: trace.ranks.clone(),
                spans: trace.spans.len() as u32,
            })
        });
        self.listener().import_finished();
        let mut parts = match parts {
            Ok(parts) => parts,
            Err(Failure::Whole) => return Ok(None),
            Err(Failure::Import(e)) => return Err(e.into()),
        };
        // The job's rank claims checked across every file, as the whole import checks them
        // ([`strato_io::ranks::note_rank_claims`]: a negative rank is no rank, notes on
        // contradictions), then told as the whole import tells them.
        let mut job = Trace {
            ranks: parts
                .iter_mut()
                .flat_map(|p| std::mem::take(&mut p.ranks))
                .collect(),
            ..Trace::default()
        };
        strato_io::ranks::note_rank_claims(&mut job);
        let mut claimed = job.ranks.iter().map(|r| r.rank);
        for part in &mut parts {
            for rank in &mut part.job_ranks {
                *rank = claimed.next().flatten();
            }
        }
        self.note_shared_rank_claims(&job);
        self.warn_import_notes(&job);
        Ok(Some(Streamed { files, parts }))
    }
}
