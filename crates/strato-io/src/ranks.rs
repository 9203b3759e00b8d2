//! Ranks side by side: the rank files of a job imported in parallel, in order.
//!
//! Owns: how many imports run at once ([`ImportOptions::jobs`], `STRATO_JOBS`, `--jobs`), the
//! expansion of inputs into rank files ([`expand_inputs`]), and the ordered parallel map over
//! those files ([`map_files`]) that [`crate::import_paths`] and the rank-by-rank analyses
//! (`gpu-time`, `kernels`, `collectives` over many ranks) use.
//!
//! Rules:
//! - **Deterministic.** Results come back in the order of the files, whatever the number of
//!   jobs and whichever import finishes first; a trace imported with 1 job and with N is the
//!   same, byte for byte (tested on `param_dlrm8`).
//! - **Errors as if sequential.** Workers take files in order and stop taking new ones after a
//!   failure; the error returned is the one of the first failing file in input order (every
//!   file before it was taken, so it was read), the one a one-by-one import would report.
//! - **Memory.** At most `jobs` files are being imported at any time; what the caller keeps of
//!   each (its `map` result) is the rest. Each import has the memory budget of
//!   [`ImportOptions::memory_budget_bytes`] on its own.
//!
//! Why threads of the standard library and not a pool crate: one scoped fan-out over a list
//! of files, with an ordered result and an early stop, is a few lines; nothing else here
//! needs a pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::{input, rank_files, recording, Error, ErrorKind, ImportOptions, Result};

/// The environment variable that sets how many rank files are imported at once.
pub const JOBS_VAR: &str = "STRATO_JOBS";

/// All cores the process may use (at least 1).
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `STRATO_JOBS` when set (a positive integer; anything else is an error naming the
/// variable), else 0 (all cores, see [`ImportOptions::jobs`]).
pub fn jobs_from_env() -> Result<usize> {
    match std::env::var(JOBS_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(0),
        Ok(text) => parse_jobs(&text),
        Err(std::env::VarError::NotUnicode(v)) => parse_jobs(&v.to_string_lossy()),
    }
}

/// A job count as written by a user: a positive integer.
pub fn parse_jobs(text: &str) -> Result<usize> {
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::new(
            JOBS_VAR,
            ErrorKind::Config(format!(
                "invalid job count {text:?} (expected a positive integer, e.g. 4)"
            )),
        )),
    }
}

impl ImportOptions {
    /// The number of imports run at once: [`ImportOptions::jobs`], 0 meaning [`all_cores`].
    pub fn effective_jobs(&self) -> usize {
        if self.jobs == 0 {
            all_cores()
        } else {
            self.jobs
        }
    }
}

/// Inputs as [`crate::import_paths`] reads them: the files to import one by one (standard
/// input, files, and the rank files of directories, in the order given; a directory's files
/// sorted by name) and the recording directories (imported whole).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExpandedInputs {
    pub files: Vec<PathBuf>,
    pub recordings: Vec<PathBuf>,
}

/// Expands `paths` (see [`ExpandedInputs`]); a directory without trace files is an error.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<ExpandedInputs> {
    let mut out = ExpandedInputs::default();
    for path in paths {
        if input::is_stdin(path) {
            out.files.push(path.clone());
        } else if recording::is_recording_dir(path) {
            out.recordings.push(path.clone());
        } else if path.is_dir() {
            out.files.extend(rank_files(path)?);
        } else {
            out.files.push(path.clone());
        }
    }
    Ok(out)
}

/// `map(index, file)` for every file, at most `jobs` at once, results in the order of
/// `files`. On failure, the error of the first failing file in order (see the module docs).
/// `jobs` 0 means all cores.
pub fn map_files<T, E, F>(files: &[PathBuf], jobs: usize, map: F) -> std::result::Result<Vec<T>, E>
where
    T: Send,
    E: Send,
    F: Fn(usize, &Path) -> std::result::Result<T, E> + Sync,
{
    let jobs = if jobs == 0 { all_cores() } else { jobs };
    let workers = jobs.min(files.len());
    if workers <= 1 {
        return files.iter().enumerate().map(|(i, f)| map(i, f)).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<std::result::Result<T, E>>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                if failed.load(Ordering::Acquire) {
                    return;
                }
                let i = next.fetch_add(1, Ordering::AcqRel);
                let Some(file) = files.get(i) else { return };
                let result = map(i, file);
                if result.is_err() {
                    failed.store(true, Ordering::Release);
                }
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::with_capacity(files.len());
    for slot in results {
        match slot {
            Some(Ok(value)) => out.push(value),
            Some(Err(e)) => return Err(e),
            // Not taken: a file before it failed, whose error comes first.
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<PathBuf> {
        (0..n).map(|i| PathBuf::from(format!("f{i}"))).collect()
    }

    #[test]
    fn results_keep_the_order_of_the_files_whatever_the_jobs() {
        let files = names(37);
        for jobs in [1, 2, 3, 8, 64] {
            let out: Vec<String> = map_files(&files, jobs, |i, f| {
                // Later files finish first.
                std::thread::sleep(std::time::Duration::from_micros(((37 - i) * 50) as u64));
                Ok::<_, ()>(format!("{i}:{}", f.display()))
            })
            .unwrap();
            let expected: Vec<String> = (0..37).map(|i| format!("{i}:f{i}")).collect();
            assert_eq!(out, expected, "jobs {jobs}");
        }
    }

    #[test]
    fn the_error_is_the_first_failing_files_in_order() {
        let files = names(40);
        for jobs in [1, 2, 4, 16] {
            let err = map_files(&files, jobs, |i, _| {
                if i == 33 || i == 7 || i == 21 {
                    Err(i)
                } else {
                    Ok(i)
                }
            })
            .unwrap_err();
            assert_eq!(err, 7, "jobs {jobs}");
        }
    }

    #[test]
    fn at_most_jobs_run_at_once() {
        let files = names(24);
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        map_files(&files, 3, |_, _| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, ()>(())
        })
        .unwrap();
        let peak = peak.load(Ordering::SeqCst);
        assert!((1..=3).contains(&peak), "{peak}");
    }

    #[test]
    fn job_counts_parse_or_fail_clearly() {
        assert_eq!(parse_jobs("4").unwrap(), 4);
        assert_eq!(parse_jobs(" 12 ").unwrap(), 12);
        for bad in ["0", "-1", "", "all", "1.5"] {
            let e = parse_jobs(bad).unwrap_err();
            assert!(e.to_string().contains("STRATO_JOBS"), "{e}");
        }
    }
}

/// Notes what the ranks of one import claim that cannot all be true, on each rank concerned
/// (free-text import notes: every command warns of them, `strato info` lists them):
/// - a negative job rank is not a rank: it is dropped (the rank is then numbered by its
///   position, as a source without one) and noted;
/// - a job rank not below its own world size;
/// - sources that disagree on the world size (ranks of different jobs imported together?).
///
/// Nsight Compute and `perf` sources carry no job rank and are left out.
pub fn note_rank_claims(trace: &mut strato_trace::Trace) {
    use strato_trace::SourceFormat;
    let counted =
        |format: &SourceFormat| *format != SourceFormat::Ncu && *format != SourceFormat::Perf;
    let mut sizes: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
    for rank in trace.ranks.iter_mut().filter(|r| counted(&r.format)) {
        if let Some(n) = rank.rank.filter(|&n| n < 0) {
            rank.notes.note(format!(
                "job rank {n} is negative, so not a rank: the source is numbered by its position"
            ));
            rank.rank = None;
        }
        if let (Some(n), Some(world)) = (rank.rank, rank.world_size) {
            if n >= world {
                rank.notes.note(format!(
                    "job rank {n} is not below the world size {world} the source gives"
                ));
            }
        }
        if let Some(world) = rank.world_size {
            *sizes.entry(world).or_insert(0) += 1;
        }
    }
    if sizes.len() > 1 {
        let said: Vec<String> = sizes
            .iter()
            .map(|(world, n)| format!("{world} ({n} source{})", if *n == 1 { "" } else { "s" }))
            .collect();
        let note = format!(
            "the sources disagree on the world size: {}; ranks of different jobs imported together?",
            said.join(", ")
        );
        for rank in trace.ranks.iter_mut().filter(|r| counted(&r.format)) {
            if rank.world_size.is_some() {
                rank.notes.note(note.clone());
            }
        }
    }
}

#[cfg(test)]
mod rank_claims {
    use super::note_rank_claims;
    use strato_trace::testing::{rank, TraceBuilder};

    fn job(claims: &[(Option<i64>, Option<i64>)]) -> strato_trace::Trace {
        let mut b = TraceBuilder::new();
        for (i, (n, world)) in claims.iter().enumerate() {
            let mut r = rank(*n, &format!("r{i}"));
            r.world_size = *world;
            b.rank(r);
        }
        b.build()
    }

    fn notes(trace: &strato_trace::Trace) -> Vec<Vec<String>> {
        trace.ranks.iter().map(|r| r.notes.notes.clone()).collect()
    }

    #[test]
    fn a_consistent_job_gets_no_note() {
        let mut t = job(&[(Some(0), Some(2)), (Some(1), Some(2)), (None, None)]);
        note_rank_claims(&mut t);
        assert!(notes(&t).iter().all(Vec::is_empty), "{:?}", notes(&t));
    }

    #[test]
    fn negative_ranks_are_dropped_and_noted() {
        let mut t = job(&[(Some(-1), Some(2)), (Some(1), Some(2))]);
        note_rank_claims(&mut t);
        assert_eq!(t.ranks[0].rank, None);
        assert!(notes(&t)[0][0].contains("job rank -1 is negative"));
        assert!(notes(&t)[1].is_empty());
    }

    #[test]
    fn ranks_past_the_world_size_and_two_world_sizes_are_noted() {
        let mut t = job(&[(Some(0), Some(2)), (Some(5), Some(2)), (Some(1), Some(8))]);
        note_rank_claims(&mut t);
        let n = notes(&t);
        assert!(n[1]
            .iter()
            .any(|l| l.contains("job rank 5 is not below the world size 2")));
        for rank_notes in &n {
            assert!(
                rank_notes
                    .iter()
                    .any(|l| l.contains("disagree on the world size: 2 (2 sources), 8 (1 source)")),
                "{rank_notes:?}"
            );
        }
    }
}
