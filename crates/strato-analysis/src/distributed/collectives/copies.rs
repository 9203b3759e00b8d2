//! [`CollectiveCopies`]: what [`rank_summaries`] reads, gathered batch by batch, for the streamed
//! analyses that need a job's collectives without holding its spans (`ops`' collective rows; the
//! job's clock alignment of `ops` and `modules`).
//!
//! [`rank_summaries`] reads three kinds of span: the collective kernels (with their args), the
//! collective CPU ops (with their args) and each collective kernel's launch, the first host span of
//! the kernel's rank with its correlation. The first two are few and copied as they pass, with the
//! args keys [`rank_summaries`] reads. The launches cannot be picked as they pass (a file may list
//! a kernel after its launch or before it), and the host spans with a correlation are many (every
//! runtime call), so the caller, which keeps its threads' spans anyway, names each kernel's first
//! thread span with its correlation at the end ([`CollectiveCopies::summaries`]). Only the
//! correlated spans of host tracks that are not threads (rare) are kept here.

use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{Level, Ns, OptionalId, Span, Trace, TrackId, TrackKind};

use super::calls::{rank_summaries, RankCollectives, CALL_ARGS_KEYS};
use super::kinds::is_collective_kernel;

/// A host span: its track, start, end and index in the whole trace.
pub type HostSpan = (TrackId, Ns, Ns, u32);

/// The spans [`rank_summaries`] reads, copied as the batches pass ([`CollectiveCopies::offer`]).
#[derive(Debug, Default)]
pub struct CollectiveCopies {
    /// The copied spans (collective kernels with their correlation, collective CPU ops without:
    /// a launch gets its correlation back at the end), with their args.
    trace: Trace,
    /// Per copied CPU op: its index in the whole trace -> its index in [`CollectiveCopies::trace`].
    cpu_ops: FxHashMap<u32, u32>,
    /// The correlated spans of host tracks that are not threads.
    others: Vec<HostSpanWith>,
}

/// A correlated span of a host track that is not a thread.
#[derive(Debug, Clone, Copy)]
struct HostSpanWith {
    span: HostSpan,
    correlation: u64,
}

impl CollectiveCopies {
    /// Offers span `index` of the whole trace, read from `batch` (whose tables are the whole
    /// trace's so far): copied when [`rank_summaries`] reads it. For a collective kernel,
    /// its position among the copies, which [`RankCollectives`]' calls name as their `kernel`.
    pub fn offer(&mut self, batch: &Trace, span: &Span, index: u32) -> Option<u32> {
        let track = batch.track(span.track);
        if let TrackKind::DeviceQueue { .. } = track.kind {
            let kernel =
                span.level == Level::DeviceKernel && is_collective_kernel(batch.str(span.name));
            return kernel.then(|| self.copy(batch, span, true));
        }
        if !matches!(track.kind, TrackKind::Thread { .. }) {
            if let Some(correlation) = span.correlation.get() {
                self.others.push(HostSpanWith {
                    span: (span.track, span.start, span.end, index),
                    correlation,
                });
            }
        }
        if strato_trace::args_of::is_collective_cpu_op(batch.str(span.name)) {
            let at = self.copy(batch, span, false);
            self.cpu_ops.insert(index, at);
        }
        None
    }

    fn copy(&mut self, batch: &Trace, span: &Span, keep_correlation: bool) -> u32 {
        let args = (batch.args_text(span.args))
            .and_then(|text| call_args_only(&text))
            .map(|text| self.trace.add_args(&text));
        let at = self.trace.spans.len() as u32;
        self.trace.spans.push(Span {
            correlation: span.correlation.get().filter(|_| keep_correlation).into(),
            args,
            ..span.clone()
        });
        at
    }

    /// Whether a collective kernel was copied.
    pub fn has_kernels(&self, trace: &Trace) -> bool {
        (self.trace.spans.iter()).any(|s| trace.track(s.track).is_device())
    }

    /// The (rank, correlation) of each copied collective kernel: the launches
    /// [`CollectiveCopies::summaries`] asks for (`trace`: the whole trace's tables).
    pub fn wanted(&self, trace: &Trace) -> FxHashSet<(u32, u64)> {
        (self.trace.spans.iter())
            .filter(|s| trace.track(s.track).is_device())
            .filter_map(|s| Some((trace.track(s.track).rank.0, s.correlation.get()?)))
            .collect()
    }

    /// [`rank_summaries`] over the copies, as over the whole trace whose tables `trace` holds.
    /// `first_on_threads`: per wanted (rank, correlation) ([`CollectiveCopies::wanted`]), the
    /// first span of a thread of that rank with that correlation, if any. Empty without a
    /// collective kernel.
    pub fn summaries(
        self,
        trace: &Trace,
        first_on_threads: FxHashMap<(u32, u64), HostSpan>,
    ) -> Vec<RankCollectives> {
        if !self.has_kernels(trace) {
            return Vec::new();
        }
        let wanted = self.wanted(trace);
        let CollectiveCopies {
            trace: mut mini,
            cpu_ops,
            others,
        } = self;
        mini.strings = trace.strings.clone();
        mini.ranks = trace.ranks.clone();
        mini.tracks = trace.tracks.clone();
        // Each wanted correlation's first host span: a thread's, or another host track's.
        let mut first = first_on_threads;
        for o in others {
            let key = (trace.track(o.span.0).rank.0, o.correlation);
            if !wanted.contains(&key) {
                continue;
            }
            first
                .entry(key)
                .and_modify(|f| {
                    if o.span.3 < f.3 {
                        *f = o.span;
                    }
                })
                .or_insert(o.span);
        }
        let launch_name = mini.intern("(launch)");
        let mut launches: Vec<_> = first.into_iter().collect();
        launches.sort_unstable_by_key(|(key, _)| *key);
        for ((_, correlation), (track, start, end, index)) in launches {
            match cpu_ops.get(&index) {
                // The launch is a collective CPU op copied already: it gets its correlation back.
                Some(&at) => mini.spans[at as usize].correlation = Some(correlation).into(),
                None => mini.spans.push(Span {
                    track,
                    start,
                    end,
                    name: launch_name,
                    category: launch_name,
                    level: Level::AcceleratorApi,
                    correlation: Some(correlation).into(),
                    external_id: OptionalId::NONE,
                    args: None,
                }),
            }
        }
        rank_summaries(&mini)
    }
}

/// Of an args object's text, the keys [`rank_summaries`] reads ([`CALL_ARGS_KEYS`]), as an
/// object's text; `None` when it has none of them (or is not an object, which
/// [`rank_summaries`] does not read either). A kernel's args hold a dozen more (grid, block,
/// occupancy) that a copy need not keep.
fn call_args_only(text: &str) -> Option<String> {
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str(text) else {
        return None;
    };
    map.retain(|key, _| CALL_ARGS_KEYS.contains(&key.as_str()));
    (!map.is_empty()).then(|| serde_json::Value::Object(map).to_string())
}
