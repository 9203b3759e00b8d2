//! Flows (`s`/`t`/`f`): each flow event read joins or starts a flow by (category, id); the
//! ends are kept compact ([`PendingFlowEnd`]) and bound at the end of the import to the
//! innermost span containing their timestamp on their track, from the spans held
//! ([`HeldSpans`]) or, for a streaming import, from the tracks and times of the spans handed
//! over ([`HandedSpans`]). With flow ends not placed (`info`), only open flows are held.

use rustc_hash::FxHashMap;
use strato_trace::{Flow, FlowEnd, Ns, Span, SpanId, StrId, Trace, TrackId};

use super::schema::{EventView, Loose};
use super::Builder;
use crate::Result;

impl<'p, 's> Builder<'p, 's> {
    pub(super) fn flow_event(&mut self, ph: &str, ev: &EventView<'_>, offset: u64) -> Result<()> {
        let cat = self.category(ev.cat.unwrap_or(""), None);
        let Some(id) = ev.id else {
            return Ok(());
        };
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let is_start = ph == "s";
        let place = match (
            ev.pid.and_then(Loose::as_i64),
            ev.tid.and_then(Loose::as_i64),
        ) {
            (Some(pid), Some(tid)) => match self.flow_place_ids.get(&(pid, tid)) {
                Some(&place) => place,
                None => {
                    let place = self.flow_places.len() as u32;
                    self.flow_place_ids.insert((pid, tid), place);
                    self.flow_places
                        .push((Some(Loose::Int(pid)), Some(Loose::Int(tid))));
                    place
                }
            },
            _ => {
                self.flow_places.push((ev.pid.cloned(), ev.tid.cloned()));
                (self.flow_places.len() - 1) as u32
            }
        };
        let projection = self.options.projection;
        if !projection.flows || !projection.flow_ends {
            if projection.flows {
                self.count_flow(cat.id, id, is_start, ts);
            }
            return Ok(());
        }
        let key_text = id.text();
        let numeric = id
            .as_i64()
            .map(|v| v as u64)
            .unwrap_or_else(|| hash_text(&key_text));
        let key = (cat.id, key_text);
        let existing = self.flows.get(&key).copied().filter(|&i| {
            let flow = &self.trace.flows[i];
            if is_start {
                flow.from.is_none()
            } else {
                flow.to.is_none()
            }
        });
        let index = match existing {
            Some(i) => i,
            None => {
                self.trace.flows.push(Flow {
                    id: numeric,
                    category: cat.id,
                    from: None,
                    to: None,
                });
                self.trace.flows.len() - 1
            }
        };
        // The track is resolved in `finish`, once every span's track exists.
        let end = Some(FlowEnd {
            track: TrackId(0),
            ts,
            span: None,
        });
        let flow = &mut self.trace.flows[index];
        if is_start {
            flow.from = end;
        } else {
            flow.to = end;
        }
        if flow.from.is_some() && flow.to.is_some() {
            // Complete: no later event can join it (see `Builder::flows`).
            if existing.is_some() {
                self.flows.remove(&key);
            }
        } else if existing.is_none() {
            self.flows.insert(key, index);
        }
        self.flow_ends.push(PendingFlowEnd {
            flow: index as u32,
            place: if is_start { place | FLOW_START } else { place },
            ts,
        });
        Ok(())
    }

    /// A flow event when flow ends are not placed ([`crate::Projection::flow_ends`] off): the
    /// same flows as [`Builder::flow_event`] makes (an end joins the open flow of its key when
    /// that end is still missing, else starts a new flow), held in `open_flows` until complete
    /// and then added to `Trace::flows`; a flow whose key a new flow takes can no longer
    /// complete and is added then.
    pub(super) fn count_flow(&mut self, category: StrId, id: &Loose, is_start: bool, ts: Ns) {
        let key_text = id.text();
        let numeric = id
            .as_i64()
            .map(|v| v as u64)
            .unwrap_or_else(|| hash_text(&key_text));
        let end = Some(FlowEnd {
            track: TrackId(0),
            ts,
            span: None,
        });
        let key = (category, key_text);
        let joins = self.open_flows.get(&key).is_some_and(|flow| {
            if is_start {
                flow.from.is_none()
            } else {
                flow.to.is_none()
            }
        });
        if joins {
            let mut flow = self.open_flows.remove(&key).expect("checked above");
            if is_start {
                flow.from = end;
            } else {
                flow.to = end;
            }
            // Both ends now: a flow in `open_flows` had exactly one.
            self.trace.flows.push(flow);
            return;
        }
        let flow = Flow {
            id: numeric,
            category,
            from: if is_start { end.clone() } else { None },
            to: if is_start { None } else { end },
        };
        if let Some(stale) = self.open_flows.insert(key, flow) {
            self.trace.flows.push(stale);
        }
    }
}

/// A flow end seen in the file, bound to a span after all spans are read (16 bytes: one is
/// kept per flow event until the end of the import, so it is kept compact).
pub(super) struct PendingFlowEnd {
    /// Index in `Trace::flows`.
    pub(super) flow: u32,
    /// [`FLOW_START`] for an `s` end, or-ed with where the end is: its index in
    /// `Builder::flow_places` while the file is read, its track once every span is read.
    pub(super) place: u32,
    pub(super) ts: Ns,
}

/// The bit of `PendingFlowEnd::place` that marks an `s` (start) end; places and track ids
/// stay below it (an import refuses more than 2^31 tracks long before).
pub(super) const FLOW_START: u32 = 1 << 31;

impl PendingFlowEnd {
    pub(super) fn is_start(&self) -> bool {
        self.place & FLOW_START != 0
    }
    pub(super) fn place(&self) -> u32 {
        self.place & !FLOW_START
    }
}

pub(super) fn hash_text(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    text.hash(&mut h);
    h.finish()
}

/// Where binding flows looks a flow end up.
pub(super) trait SpanIndex {
    /// The innermost span of `track` containing `ts`, for a flow end of flow `id`: of the
    /// spans sorted by start, then longer first, the last one starting at or before `ts` that
    /// has not ended before it, among the last 256 starting at or before `ts`.
    ///
    /// Spans of the same extent, which times cannot nest, are ordered outer first by
    /// [`Span::same_extent_order`], then by id, so the order a file lists them in does not
    /// choose: [`HeldSpans`] by the whole order (level, then the source's numbering);
    /// [`HandedSpans`], which keeps 16 bytes a span, by its level, then by id (file order). The
    /// two agree wherever the source numbers its spans in the order it writes them, as Kineto
    /// does (every same-extent pair of the shared Kineto files). Of zero-length spans at the
    /// same time (runtime calls a trace in microseconds cannot tell apart), the end binds to
    /// the one whose launch correlation is the flow's id when there is one: Kineto's `ac2g`
    /// flow ids are correlations, and its orphan flow ends on host threads sit on such calls.
    fn find(&self, track: TrackId, ts: Ns, id: u64) -> Option<SpanId>;
}

/// [`SpanIndex::find`] over one track's sorted list: `end_id` gives an entry's end and span
/// id, `carries` whether it is a zero-length span with the flow's id as its correlation.
pub(super) fn find_in<T>(
    list: &[T],
    ts: Ns,
    start: impl Fn(&T) -> Ns,
    end_id: impl Fn(&T) -> (Ns, u32),
    carries: impl Fn(&T) -> bool,
) -> Option<SpanId> {
    let after = list.partition_point(|x| start(x) <= ts);
    let at = (list[..after].iter().enumerate().rev().take(256))
        .find(|(_, x)| end_id(x).0 >= ts)
        .map(|(at, _)| at)?;
    let found = &list[at];
    let (found_start, found_end) = (start(found), end_id(found).0);
    if found_start == found_end && !carries(found) {
        // Its zero-length twins at the same time come just before it.
        let twin = (list[..at].iter().rev())
            .take_while(|x| start(x) == found_start && end_id(x).0 == found_end)
            .find(|x| carries(x));
        if let Some(twin) = twin {
            return Some(SpanId(end_id(twin).1));
        }
    }
    Some(SpanId(end_id(found).1))
}

/// The index of a trace's own spans (an import that keeps them): span ids by track.
pub(super) struct HeldSpans<'a> {
    pub(super) spans: &'a [Span],
    pub(super) by_track: Vec<Vec<u32>>,
}

impl<'a> HeldSpans<'a> {
    pub(super) fn new(spans: &'a [Span], tracks: usize) -> Self {
        let mut by_track: Vec<Vec<u32>> = vec![Vec::new(); tracks];
        for (i, span) in spans.iter().enumerate() {
            by_track[span.track.0 as usize].push(i as u32);
        }
        for list in &mut by_track {
            list.sort_unstable_by_key(|&i| {
                let s = &spans[i as usize];
                (s.start, std::cmp::Reverse(s.end), s.same_extent_order(), i)
            });
        }
        HeldSpans { spans, by_track }
    }
}

impl SpanIndex for HeldSpans<'_> {
    fn find(&self, track: TrackId, ts: Ns, id: u64) -> Option<SpanId> {
        let spans = self.spans;
        find_in(
            &self.by_track[track.0 as usize],
            ts,
            |&i| spans[i as usize].start,
            |&i| (spans[i as usize].end, i),
            |&i| {
                let s = &spans[i as usize];
                s.start == s.end && s.correlation.get() == Some(id)
            },
        )
    }
}

const _: () = assert!(std::mem::size_of::<HandedSpan>() == 16);

/// The places of the spans a streaming import handed over, by track (16 bytes per span: the
/// spans themselves are gone).
#[derive(Default)]
pub(super) struct HandedSpans {
    pub(super) by_track: Vec<Vec<HandedSpan>>,
    pub(super) count: u32,
    /// The ends of spans of [`HandedSpan::LONG`] ns and longer, by span id.
    pub(super) long_ends: FxHashMap<u32, Ns>,
    /// The launch correlations of zero-length spans, by span id (a few: see
    /// [`SpanIndex::find`]).
    pub(super) instant_correlations: FxHashMap<u32, u64>,
}

#[derive(Clone, Copy)]
pub(super) struct HandedSpan {
    pub(super) start: Ns,
    pub(super) id: u32,
    /// The level's code ([`Span::same_extent_order`]'s top [`LEVEL_BITS`]) over the duration
    /// ([`HandedSpan::LONG`] when the end is in `HandedSpans::long_ends`).
    pub(super) level_dur: u32,
}

/// Bits of [`HandedSpan::level_dur`] that hold the level.
const LEVEL_BITS: u32 = 4;

impl HandedSpan {
    /// The duration of a span whose end is in `HandedSpans::long_ends` (268 ms and longer).
    const LONG: u32 = (1 << (32 - LEVEL_BITS)) - 1;

    fn dur(&self) -> u32 {
        self.level_dur & Self::LONG
    }

    fn level(&self) -> u32 {
        self.level_dur >> (32 - LEVEL_BITS)
    }
}

impl HandedSpans {
    pub(super) fn keep(&mut self, spans: &[Span]) {
        for span in spans {
            let id = self.count;
            self.count += 1;
            let dur = match u32::try_from(span.end.saturating_sub(span.start)) {
                Ok(d) if d < HandedSpan::LONG => d,
                _ => {
                    self.long_ends.insert(id, span.end);
                    HandedSpan::LONG
                }
            };
            let level = span.same_extent_order() >> (32 - LEVEL_BITS);
            if let Some(correlation) = span.correlation.get().filter(|_| dur == 0) {
                self.instant_correlations.insert(id, correlation);
            }
            let track = span.track.0 as usize;
            if self.by_track.len() <= track {
                self.by_track.resize_with(track + 1, Vec::new);
            }
            self.by_track[track].push(HandedSpan {
                start: span.start,
                id,
                level_dur: level << (32 - LEVEL_BITS) | dur,
            });
        }
    }

    pub(super) fn end(&self, s: &HandedSpan) -> Ns {
        if s.dur() == HandedSpan::LONG {
            self.long_ends[&s.id]
        } else {
            s.start + Ns::from(s.dur())
        }
    }

    /// Sorts each track's spans as [`HeldSpans`] does, same-extent spans by level, then id
    /// (see [`SpanIndex::find`]).
    pub(super) fn sort(&mut self) {
        let mut by_track = std::mem::take(&mut self.by_track);
        for list in &mut by_track {
            // The permutation [`HeldSpans`] makes of this track's span ids (in id order, as
            // `list` is), applied in place: 4 bytes per span of one track at a time.
            let mut order: Vec<u32> = (0..list.len() as u32).collect();
            order.sort_unstable_by_key(|&i| {
                let s = &list[i as usize];
                (s.start, std::cmp::Reverse(self.end(s)), s.level(), s.id)
            });
            permute(list, &mut order);
        }
        self.by_track = by_track;
    }
}

/// Rearranges `list` so that `list[k]` becomes the old `list[order[k]]` (`order` is a
/// permutation; it is used up).
pub(super) fn permute<T: Copy>(list: &mut [T], order: &mut [u32]) {
    const DONE: u32 = u32::MAX;
    for start in 0..list.len() {
        if order[start] == DONE {
            continue;
        }
        let first = list[start];
        let mut at = start;
        loop {
            let from = order[at] as usize;
            order[at] = DONE;
            if from == start {
                list[at] = first;
                break;
            }
            list[at] = list[from];
            at = from;
        }
    }
}

impl SpanIndex for HandedSpans {
    fn find(&self, track: TrackId, ts: Ns, id: u64) -> Option<SpanId> {
        let list = self.by_track.get(track.0 as usize)?;
        find_in(
            list,
            ts,
            |s| s.start,
            |s| (self.end(s), s.id),
            |s| s.dur() == 0 && self.instant_correlations.get(&s.id) == Some(&id),
        )
    }
}

/// Binds each flow end to the innermost span containing its timestamp on its track
/// ([`SpanIndex::find`]). `ends` hold their tracks (see [`PendingFlowEnd::place`]).
pub(super) fn bind_flows(trace: &mut Trace, spans: &impl SpanIndex, ends: &[PendingFlowEnd]) {
    for end in ends {
        let track = TrackId(end.place());
        let flow = &mut trace.flows[end.flow as usize];
        let found = spans.find(track, end.ts, flow.id);
        let slot = if end.is_start() {
            &mut flow.from
        } else {
            &mut flow.to
        };
        if let Some(e) = slot {
            if e.ts == end.ts && e.track == track {
                e.span = found;
            }
        }
    }
}
