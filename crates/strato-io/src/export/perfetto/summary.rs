//! Reading a Perfetto trace back: decodes the packets of a written trace and counts what they
//! hold ([`PerfettoSummary`]), for tests and `strato export` checks. Independent of the
//! writer: it reads only the protobuf messages ([`super::proto`]).

use std::fmt;

use prost::encoding::{self, DecodeContext, WireType};
use prost::Message;
use proto::TracePacket;
use rustc_hash::{FxHashMap, FxHashSet};

use super::proto;

/// Counts in a Perfetto trace, as decoded by [`summarize`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfettoSummary {
    pub packets: usize,
    /// Track descriptors (every kind).
    pub tracks: usize,
    pub process_tracks: usize,
    pub thread_tracks: usize,
    pub counter_tracks: usize,
    pub slice_begins: usize,
    pub slice_ends: usize,
    pub instants: usize,
    pub counter_events: usize,
    /// Distinct ids in `flow_ids` and `terminating_flow_ids`.
    pub flow_ids: usize,
    /// `InternedData.event_names` entries.
    pub interned_names: usize,
    /// Distinct strings among them (equal to `interned_names` when each is interned once).
    pub distinct_interned_names: usize,
    /// Tracks whose slice events, in file order, do not pair up begin/end with non-decreasing
    /// times.
    pub unbalanced_tracks: usize,
    /// Events on a uuid no descriptor declared.
    pub events_on_unknown_tracks: usize,
    /// Interned ids used before being defined, and sequence flag mistakes.
    pub incremental_state_errors: usize,
    /// Deepest slice nesting on one track.
    pub max_depth: usize,
}

impl fmt::Display for PerfettoSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} packets, {} tracks ({} process, {} thread, {} counter), {} slice begins, {} \
             slice ends, {} instants, {} counter events, {} flows, {} interned names, max depth \
             {}, {} unbalanced tracks, {} events on unknown tracks, {} incremental-state errors",
            self.packets,
            self.tracks,
            self.process_tracks,
            self.thread_tracks,
            self.counter_tracks,
            self.slice_begins,
            self.slice_ends,
            self.instants,
            self.counter_events,
            self.flow_ids,
            self.interned_names,
            self.max_depth,
            self.unbalanced_tracks,
            self.events_on_unknown_tracks,
            self.incremental_state_errors,
        )
    }
}

/// Decodes a Perfetto trace packet by packet (with this module's message subset; other
/// fields are skipped) and counts what it holds. Checks on the way that every track's slices
/// pair up in file order, that events name declared tracks, and that interned ids are
/// defined before use on the sequence.
pub fn summarize(bytes: &[u8]) -> Result<PerfettoSummary, prost::DecodeError> {
    let mut summary = PerfettoSummary::default();
    let mut buf = bytes;
    let mut known_tracks: FxHashSet<u64> = FxHashSet::default();
    let mut stacks: FxHashMap<u64, (Vec<u64>, u64)> = FxHashMap::default();
    let mut unbalanced: FxHashSet<u64> = FxHashSet::default();
    let mut flow_ids: FxHashSet<u64> = FxHashSet::default();
    let mut names: FxHashSet<u64> = FxHashSet::default();
    let mut categories: FxHashSet<u64> = FxHashSet::default();
    let mut annotation_names: FxHashSet<u64> = FxHashSet::default();
    let mut name_texts: FxHashSet<String> = FxHashSet::default();
    while !buf.is_empty() {
        let (tag, wire_type) = encoding::decode_key(&mut buf)?;
        if tag != 1 || wire_type != WireType::LengthDelimited {
            encoding::skip_field(wire_type, tag, &mut buf, DecodeContext::default())?;
            continue;
        }
        let packet = TracePacket::decode_length_delimited(&mut buf)?;
        let flags = packet.sequence_flags.unwrap_or(0);
        if summary.packets == 0 && flags & proto::SEQ_INCREMENTAL_STATE_CLEARED == 0 {
            summary.incremental_state_errors += 1;
        }
        summary.packets += 1;
        if flags & proto::SEQ_INCREMENTAL_STATE_CLEARED != 0 {
            names.clear();
            categories.clear();
            annotation_names.clear();
        }
        if let Some(interned) = &packet.interned_data {
            for n in &interned.event_names {
                summary.interned_names += 1;
                names.extend(n.iid);
                name_texts.insert(n.name.clone().unwrap_or_default());
            }
            categories.extend(interned.event_categories.iter().filter_map(|c| c.iid));
            annotation_names.extend(interned.debug_annotation_names.iter().filter_map(|c| c.iid));
        }
        if let Some(d) = &packet.track_descriptor {
            summary.tracks += 1;
            summary.process_tracks += usize::from(d.process.is_some());
            summary.thread_tracks += usize::from(d.thread.is_some());
            summary.counter_tracks += usize::from(d.counter.is_some());
            known_tracks.extend(d.uuid);
        }
        let Some(event) = &packet.track_event else {
            continue;
        };
        let uses_interning = event.name_iid.is_some()
            || !event.category_iids.is_empty()
            || event.debug_annotations.iter().any(|a| a.name_iid.is_some());
        if uses_interning && flags & proto::SEQ_NEEDS_INCREMENTAL_STATE == 0 {
            summary.incremental_state_errors += 1;
        }
        let undefined = event.name_iid.is_some_and(|iid| !names.contains(&iid))
            || event
                .category_iids
                .iter()
                .any(|iid| !categories.contains(iid))
            || event.debug_annotations.iter().any(|a| {
                a.name_iid
                    .is_some_and(|iid| !annotation_names.contains(&iid))
            });
        summary.incremental_state_errors += usize::from(undefined);
        let track = event.track_uuid.unwrap_or(0);
        if !known_tracks.contains(&track) {
            summary.events_on_unknown_tracks += 1;
        }
        flow_ids.extend(event.flow_ids.iter().chain(&event.terminating_flow_ids));
        let ts = packet.timestamp.unwrap_or(0);
        match event.r#type.unwrap_or(0) {
            proto::TYPE_SLICE_BEGIN => {
                summary.slice_begins += 1;
                let (stack, last) = stacks.entry(track).or_default();
                if ts < *last {
                    unbalanced.insert(track);
                }
                *last = ts;
                stack.push(ts);
                summary.max_depth = summary.max_depth.max(stack.len());
            }
            proto::TYPE_SLICE_END => {
                summary.slice_ends += 1;
                let (stack, last) = stacks.entry(track).or_default();
                match stack.pop() {
                    Some(begin) if begin <= ts && *last <= ts => {}
                    _ => {
                        unbalanced.insert(track);
                    }
                }
                *last = ts;
            }
            proto::TYPE_INSTANT => summary.instants += 1,
            proto::TYPE_COUNTER => summary.counter_events += 1,
            _ => {}
        }
    }
    for (track, (stack, _)) in &stacks {
        if !stack.is_empty() {
            unbalanced.insert(*track);
        }
    }
    summary.unbalanced_tracks = unbalanced.len();
    summary.flow_ids = flow_ids.len();
    summary.distinct_interned_names = name_texts.len();
    Ok(summary)
}
