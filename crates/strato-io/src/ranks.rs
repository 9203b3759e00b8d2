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
