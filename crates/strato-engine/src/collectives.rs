//! `strato collectives` over several rank files, or the leaves of a partitioned store, without
//! holding their events ([`Engine::collectives_rank_by_rank`]): each file reduced to its
//! collective calls and devices as it is read ([`Engine::map_ranks_or_leaves`]), the calls renumbered to the whole
//! trace's span ids, the collectives matched across ranks
//! ([`strato_analysis::distributed::collectives::collectives_of_summaries`]), and the files of the
//! late ranks read again, in parallel and each once, for the stragglers' causes; and over one
//! input of one rank as it streams ([`Engine::collectives_streamed`]). The report is the one
//! the analysis gives on the whole trace.

use std::path::PathBuf;

use strato_analysis::distributed::collectives::{
    collectives_of_summaries, device_links, rank_summaries, straggler_cause, CollectiveSurvey,
    Collectives, CollectivesOptions, CollectivesReport, CollectivesResult, CollectivesSettings,
    DeviceLink, RankCollectives, StragglerCause,
};
use strato_trace::{RankId, Trace};

use crate::{Engine, EngineError, Result};

/// The collective calls of a rank file's ranks (`summaries`, with the file's ids) with the
/// whole job's ([`RankCollectives::in_job`]): ranks after the `first_rank` of the files before
/// it (numbered `job_ranks`, or by position when the source does not say), span ids after their
/// `first_span`.
pub(crate) fn moved_summaries<'a>(
    summaries: &'a [RankCollectives],
    job_ranks: &'a [Option<i64>],
    first_rank: u32,
    first_span: u32,
) -> impl Iterator<Item = RankCollectives> + 'a {
    summaries.iter().map(move |summary| {
        summary.in_job(first_rank, job_ranks[summary.rank.0 as usize], first_span)
    })
}

impl Engine {
    /// The collectives of the rank files of `inputs` (or of the leaves of the partitioned store
    /// it is), read rank by rank (see the module docs).
    /// One input of one rank streams instead ([`Engine::collectives_streamed`]). `None` for
    /// inputs that need the whole-trace path ([`Engine::map_ranks`]): the caller then runs the
    /// analysis on [`Engine::open`]'s trace.
    pub fn collectives_rank_by_rank(
        &self,
        inputs: &[PathBuf],
        options: &strato_io::ImportOptions,
        analysis: &CollectivesOptions,
    ) -> Result<Option<CollectivesReport>> {
        let leaves = self.store_leaves(inputs).map_or(0, |leaves| leaves.len());
        if leaves < 2 && self.rank_files(inputs).is_none_or(|files| files.len() < 2) {
            return self.collectives_streamed(inputs, options, analysis);
        }
        let streamed = self.map_ranks_or_leaves(inputs, options, |trace| {
            (rank_summaries(trace), device_links(trace))
        })?;
        let Some(streamed) = streamed else {
            return Ok(None);
        };
        let offsets = streamed.offsets();
        let mut ranks = Vec::new();
        let mut links = Vec::new();
        // Whole-trace rank index -> (file, that file's first rank, first span).
        let mut rank_file: Vec<(usize, u32, u32)> = Vec::new();
        for (file, (part, &(first_rank, first_span))) in
            streamed.parts.iter().zip(&offsets).enumerate()
        {
            let (summaries, devices) = &part.value;
            for _ in 0..part.job_ranks.len() {
                rank_file.push((file, first_rank, first_span));
            }
            ranks.extend(moved_summaries(
                summaries,
                &part.job_ranks,
                first_rank,
                first_span,
            ));
            links.extend(devices.iter().map(|d| DeviceLink {
                rank: RankId(first_rank + d.rank.0),
                ..d.clone()
            }));
        }
        let files = streamed.files;
        let mut failure: Option<EngineError> = None;
        let report = collectives_of_summaries(ranks, &links, analysis, |requests| {
            // Read only the files of the late ranks again, in parallel, each once.
            let mut wanted: Vec<usize> = requests
                .iter()
                .map(|r| rank_file[r.rank.0 as usize].0)
                .collect();
            wanted.sort_unstable();
            wanted.dedup();
            let reread: Vec<PathBuf> = wanted.iter().map(|&f| files[f].clone()).collect();
            let causes =
                strato_io::ranks::map_files(&reread, options.effective_jobs(), |k, path| {
                    let trace = self
                        .read_rank(path, options)?
                        .ok_or_else(|| EngineError::InputChanged(path.to_path_buf()))?;
                    let file = wanted[k];
                    let found: Vec<(usize, StragglerCause)> = requests
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| rank_file[r.rank.0 as usize].0 == file)
                        .map(|(i, r)| {
                            let (_, first_rank, first_span) = rank_file[r.rank.0 as usize];
                            let call = r.call.moved(-i64::from(first_span));
                            let rank = RankId(r.rank.0 - first_rank);
                            (
                                i,
                                straggler_cause(&trace, rank, &call, r.window_start, r.window_end),
                            )
                        })
                        .collect();
                    Ok::<_, EngineError>(found)
                });
            self.listener().import_finished();
            let mut out: Vec<Option<StragglerCause>> = vec![None; requests.len()];
            match causes {
                Ok(causes) => {
                    for (i, cause) in causes.into_iter().flatten() {
                        out[i] = Some(cause);
                    }
                }
                Err(e) => failure = Some(e),
            }
            out.into_iter()
                .zip(requests)
                .map(|(c, r)| {
                    c.unwrap_or_else(|| StragglerCause::unknown(r.window_start, r.window_end))
                })
                .collect()
        });
        match failure {
            Some(e) => Err(e),
            None => Ok(Some(report)),
        }
    }
}

impl Engine {
    /// The collectives of one input of one rank (a Chrome/Kineto JSON file, a profile
    /// directory) as it streams, the trace never held: each batch's collective kernels and
    /// CPU ops kept with their args, and 32 bytes per launch
    /// ([`CollectiveSurvey`]), then the analysis from the rank's summary as the whole trace
    /// gives it (one rank: no straggler). `None` (the trace is then read whole) for an input
    /// that does not stream, several ranks (a JSON file is given up on as soon as its second
    /// rank shows), a rank whose collectives run on several devices (the whole trace splits
    /// it by device), and `--graph-capture`.
    fn collectives_streamed(
        &self,
        inputs: &[PathBuf],
        options: &strato_io::ImportOptions,
        analysis: &CollectivesOptions,
    ) -> Result<Option<CollectivesReport>> {
        let [input] = inputs else { return Ok(None) };
        if self.attributes_graph_capture() || !crate::stream::one_rank_input(input) {
            return Ok(None);
        }
        let mut survey = CollectiveSurvey::default();
        let mut take = |batch: &Trace| {
            if batch.ranks.len() > 1 || survey.splits_ranks() {
                return Err("several ranks".to_owned());
            }
            survey.add(batch);
            Ok(())
        };
        let Some(tables) = self.stream_one(inputs, options, &mut take)? else {
            return Ok(None);
        };
        if tables.ranks.len() != 1 || survey.splits_ranks() {
            return Ok(None);
        }
        let links = device_links(&tables);
        let mut asked_causes = false;
        let report =
            collectives_of_summaries(survey.finish(&tables), &links, analysis, |requests| {
                // One rank has no late peer; a cause asked for anyway needs the whole trace.
                asked_causes = !requests.is_empty();
                requests
                    .iter()
                    .map(|r| StragglerCause::unknown(r.window_start, r.window_end))
                    .collect()
            });
        Ok((!asked_causes).then_some(report))
    }
}

/// The registry's opening of `collectives` ([`crate::opening::Opening`]): several rank files
/// read rank by rank ([`Engine::collectives_rank_by_rank`]).
#[derive(Debug)]
pub struct RankByRank;

impl crate::opening::Opening<Collectives> for RankByRank {
    fn open(
        engine: &Engine,
        inputs: &[PathBuf],
        import: &strato_io::ImportOptions,
        settings: &CollectivesSettings,
    ) -> Result<Option<CollectivesResult>> {
        Ok(engine
            .collectives_rank_by_rank(inputs, import, &settings.options())?
            .map(CollectivesResult))
    }
}
