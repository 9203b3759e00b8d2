//! Rule `gpu-idle`: GPU idle gaps above a threshold, with their CPU-side cause.
//!
//! Per device (rank, device index): its busy time is the union of its work (kernels, copies,
//! sets on all its queues); a *gap* is a hole in that union between the device's first and
//! last op, at least [`Config::min_gap_us`] long. The *launching thread* of a gap is the
//! thread of the launch (by correlation) of the op that ends the gap — the thread the device
//! was waiting for; without a launch, the annotated thread of the op's process
//! ([`crate::scope`]). What that thread did during the gap is its *cause*, per instant:
//! - `data loading` inside a span whose name mentions a DataLoader;
//! - `synchronisation` when the innermost span is a stall ([`super::host_sync::stall_kind`]);
//! - `Python` inside an operation with no deeper span (the breakdown's rule), else the
//!   innermost span's level (`Backend`, `AcceleratorApi`, `Simulator`, ...);
//! - `untraced` when no span of the thread is active: the thread was off the trace (blocked,
//!   another process or thread ran, or the code is not instrumented).
//!
//! Conservation: per gap, the causes add up to the gap. Time at stake: the union of the gaps.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns, Trace, TrackId};

use super::{human, rank_number, Draft, Evidence, Facts};
use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::merge;

/// The rule id.
pub const ID: &str = "gpu-idle";

/// Thresholds of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// Smallest gap reported (us). Default 1 ms (see docs/advise.md#gpu-idle).
    pub min_gap_us: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            min_gap_us: 1000.0,
        }
    }
}

/// What a thread did during an interval: `(cause, time)` largest first, adding up to the
/// interval, and the innermost span names that took most time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cause {
    pub parts: Vec<(String, Ns)>,
    pub top_spans: Vec<(String, Ns)>,
}

impl Cause {
    /// `Backend 60% (aten::copy_), Python 30%`.
    pub fn describe(&self, whole: Ns) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .take(3)
            .map(|(c, t)| format!("{c} {:.0}%", super::pct(*t, whole)))
            .collect();
        let mut text = parts.join(", ");
        if let Some((name, _)) = self.top_spans.first() {
            text.push_str(&format!("; mostly in {name}"));
        }
        text
    }
}

/// Per-thread spans sorted by start, with the longest duration (to bound the search).
#[allow(missing_debug_implementations)]
pub struct ThreadIndex<'a> {
    trace: &'a Trace,
    cache: FxHashMap<TrackId, (Vec<u32>, Ns)>,
}

impl<'a> ThreadIndex<'a> {
    pub fn new(trace: &'a Trace) -> ThreadIndex<'a> {
        ThreadIndex {
            trace,
            cache: FxHashMap::default(),
        }
    }

    /// Spans of `track` (not `Other`) overlapping `[a, b)`.
    pub fn overlapping(&mut self, analyzed: &Analyzed, track: TrackId, a: Ns, b: Ns) -> Vec<u32> {
        let trace = self.trace;
        let (list, longest) = self.cache.entry(track).or_insert_with(|| {
            let mut list: Vec<u32> = analyzed.scopes().by_track[track.0 as usize]
                .iter()
                .copied()
                .filter(|&i| trace.spans[i as usize].level != Level::Other)
                .collect();
            list.sort_by_key(|&i| trace.spans[i as usize].start);
            let longest = list
                .iter()
                .map(|&i| trace.spans[i as usize].duration())
                .max()
                .unwrap_or(0);
            (list, longest)
        });
        let lo = list.partition_point(|&i| trace.spans[i as usize].start < a - *longest);
        let hi = list.partition_point(|&i| trace.spans[i as usize].start < b);
        list[lo..hi]
            .iter()
            .copied()
            .filter(|&i| {
                let s = &trace.spans[i as usize];
                s.end > a && s.start < b
            })
            .collect()
    }
}

/// True when a span's name says it is data loading.
/// Any case, allocating nothing (it runs for every span of every idle stretch).
pub fn is_data_loading(name: &str) -> bool {
    const WORD: &[u8] = b"dataloader";
    name.as_bytes()
        .windows(WORD.len())
        .any(|w| w.eq_ignore_ascii_case(WORD))
}

/// What thread `track` did during `[a, b)` (see the module docs).
pub fn cause(
    analyzed: &Analyzed,
    facts: &Facts,
    index: &mut ThreadIndex,
    track: TrackId,
    a: Ns,
    b: Ns,
) -> Cause {
    let trace = analyzed.trace();
    let spans = index.overlapping(analyzed, track, a, b);
    let loaders: Vec<(Ns, Ns)> = merge(
        spans
            .iter()
            .map(|&i| &trace.spans[i as usize])
            .filter(|s| is_data_loading(trace.str(s.name)))
            .map(|s| (s.start, s.end)),
    );
    let mut parts: FxHashMap<String, Ns> = FxHashMap::default();
    let mut names: FxHashMap<u32, Ns> = FxHashMap::default();
    let mut covered = 0;
    for (s, e, i) in crate::scope::flatten_innermost(trace, &spans) {
        let (s, e) = (s.max(a), e.min(b));
        if e <= s {
            continue;
        }
        covered += e - s;
        *names.entry(trace.spans[i as usize].name.0).or_default() += e - s;
        // Split the segment at data-loading boundaries.
        let loading = super::intersect(&[(s, e)], &loaders);
        let in_loading: Ns = crate::device_time::gpu_time::length(&loading);
        if in_loading > 0 {
            *parts.entry("data loading".into()).or_default() += in_loading;
        }
        let rest = e - s - in_loading;
        if rest > 0 {
            let span = &trace.spans[i as usize];
            let label = if super::host_sync::stall_kind(trace, facts, i).is_some() {
                "synchronisation".to_owned()
            } else {
                match crate::scope::effective_level(trace, span) {
                    Level::Operation | Level::Phase | Level::Python => "Python".to_owned(),
                    other => other.as_str().to_owned(),
                }
            };
            *parts.entry(label).or_default() += rest;
        }
    }
    if b - a > covered {
        *parts.entry("untraced".into()).or_default() += b - a - covered;
    }
    let mut parts: Vec<(String, Ns)> = parts.into_iter().collect();
    parts.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let mut top: Vec<(String, Ns)> = names
        .into_iter()
        .map(|(n, t)| (trace.strings.get(strato_trace::StrId(n)).to_owned(), t))
        .collect();
    top.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    top.truncate(3);
    Cause {
        parts,
        top_spans: top,
    }
}

/// The thread the device waited for when op `next` ended a gap.
pub fn launching_thread(analyzed: &Analyzed, facts: &Facts, next: u32) -> Option<TrackId> {
    let trace = analyzed.trace();
    if let Some(&l) = facts.launch_of.get(&next) {
        return Some(trace.spans[l as usize].track);
    }
    let scopes = analyzed.scopes();
    let owners = &scopes.device_owners;
    let k = owners.partition_point(|o| o.span < next);
    owners
        .get(k)
        .filter(|o| o.span == next)
        .and_then(|o| scopes.processes[o.process].annotated)
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let min = ((config.min_gap_us * 1e3) as Ns).max(1);
    let mut index = ThreadIndex::new(trace);
    let mut drafts = Vec::new();
    for (&(rank, device), ops) in &facts.device_work {
        // Gaps in the union of the device's work, each with the op that ends it.
        let mut gaps: Vec<(Ns, Ns, u32)> = Vec::new();
        let mut busy_until: Option<Ns> = None;
        for &i in ops {
            let s = &trace.spans[i as usize];
            if let Some(end) = busy_until {
                if s.start - end >= min {
                    gaps.push((end, s.start, i));
                }
            }
            busy_until = Some(busy_until.map_or(s.end, |e| e.max(s.end)));
        }
        if gaps.is_empty() {
            continue;
        }
        let mut totals: FxHashMap<String, Ns> = FxHashMap::default();
        let mut evidence: Vec<(Ns, Evidence)> = Vec::new();
        for &(a, b, next) in &gaps {
            let (text, cause) = match launching_thread(analyzed, facts, next) {
                Some(t) => {
                    let c = cause(analyzed, facts, &mut index, t, a, b);
                    (c.describe(b - a), c)
                }
                None => (
                    "no launching thread found".to_owned(),
                    Cause {
                        parts: vec![("unknown".into(), b - a)],
                        top_spans: vec![],
                    },
                ),
            };
            for (c, t) in &cause.parts {
                *totals.entry(c.clone()).or_default() += t;
            }
            evidence.push((
                b - a,
                Evidence {
                    kind: "gap".into(),
                    rank: rank_number(trace, rank),
                    start_ns: a,
                    end_ns: b,
                    name: format!(
                        "device {device} idle {}; launching thread: {text}; next: {}",
                        human(b - a),
                        trace.str(trace.spans[next as usize].name)
                    ),
                },
            ));
        }
        evidence.sort_by_key(|e| std::cmp::Reverse(e.0));
        let total: Ns = gaps.iter().map(|g| g.1 - g.0).sum();
        let mut totals: Vec<(String, Ns)> = totals.into_iter().collect();
        totals.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let causes: Vec<String> = totals
            .iter()
            .map(|(c, t)| format!("{c} {:.0}%", super::pct(*t, total)))
            .collect();
        let main = totals.first().map(|t| t.0.as_str()).unwrap_or("unknown");
        drafts.push(Draft {
            intervals: facts
                .clock
                .intervals(rank, gaps.iter().map(|g| (g.0, g.1)).collect()),
            evidence: evidence.into_iter().map(|e| e.1).collect(),
            message: format!(
                "Device {device} of rank {} was idle in {} gaps of at least {} ({} in all); \
                 meanwhile the launching thread was in: {}.",
                rank_number(trace, rank),
                gaps.len(),
                human(min),
                human(total),
                causes.join(", ")
            ),
            advice: advice_for(main).into(),
        });
    }
    drafts
}

/// What to do about gaps whose main cause is `cause`.
fn advice_for(cause: &str) -> &'static str {
    match cause {
        "data loading" => {
            "The GPU waits for input: use more DataLoader workers (num_workers), \
             pin_memory=True, prefetching (prefetch_factor), or move decoding/augmentation to \
             the GPU."
        }
        "synchronisation" => {
            "The GPU idles around host synchronisations: see the host-sync finding; remove \
             .item()/nonzero/synchronize calls from the loop."
        }
        "untraced" => {
            "The launching thread was outside any traced span (blocked, descheduled, another \
             process or untraced code): record with the OS level (strato record) or check \
             other processes competing for the CPU."
        }
        "Python" | "Backend" | "Library" | "Simulator" => {
            "The GPU waits for host-side work between launches: move that work off the critical \
             path (overlap it with device work, batch it, or run it on the device), or reduce \
             per-step Python overhead (torch.compile, CUDA graphs)."
        }
        _ => {
            "The GPU waits for the host between launches: overlap host work with device work \
             and keep the launch queue full."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_data_loading;

    #[test]
    fn data_loading_is_named_in_any_case_anywhere() {
        for name in [
            "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
            "dataloader",
            "my DATALOADER step",
            "Ωdataloaderβ",
        ] {
            assert!(is_data_loading(name), "{name}");
        }
        for name in [
            "",
            "data loader",
            "dataload",
            "aten::mm",
            "dataloade\u{301}r",
        ] {
            assert!(!is_data_loading(name), "{name}");
        }
    }
}
