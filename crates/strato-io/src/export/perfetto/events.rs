//! The Perfetto export's events ([`Writer`]'s event methods): names, categories and annotation
//! keys interned on the packet sequence, spans as slice begin/end pairs on lanes that nest,
//! flows as `flow_ids` on their spans' begin events, instants and counter samples.

use std::io::{self, Write};

use proto::{DebugAnnotation, InternedData, InternedString, TracePacket, TrackEvent};
use strato_trace::{Level, Ns, StrId, TrackId};

use super::*;

impl<'t, W: Write> Writer<'t, W> {
    /// Interns a name that is not in the trace's string table.
    pub(super) fn intern_text(&mut self, text: &str, interned: &mut InternedData) -> u64 {
        let iid = self.next_name_iid;
        self.next_name_iid += 1;
        interned.event_names.push(InternedString {
            iid: Some(iid),
            name: Some(text.to_owned()),
        });
        iid
    }

    pub(super) fn intern_name(&mut self, id: StrId, interned: &mut InternedData) -> u64 {
        let slot = id.0 as usize;
        if slot >= self.name_iid.len() {
            self.name_iid.resize(slot + 1, 0);
        }
        if self.name_iid[slot] == 0 {
            self.name_iid[slot] = self.next_name_iid;
            self.next_name_iid += 1;
            interned.event_names.push(InternedString {
                iid: Some(self.name_iid[slot]),
                name: Some(self.trace.str(id).to_owned()),
            });
        }
        self.name_iid[slot]
    }

    pub(super) fn intern_category(&mut self, id: StrId, interned: &mut InternedData) -> Vec<u64> {
        if id == StrId::EMPTY {
            return Vec::new();
        }
        let slot = id.0 as usize;
        if slot >= self.category_iid.len() {
            self.category_iid.resize(slot + 1, 0);
        }
        if self.category_iid[slot] == 0 {
            self.category_iid[slot] = self.next_category_iid;
            self.next_category_iid += 1;
            interned.event_categories.push(InternedString {
                iid: Some(self.category_iid[slot]),
                name: Some(self.trace.str(id).to_owned()),
            });
        }
        vec![self.category_iid[slot]]
    }

    pub(super) fn annotation(&mut self, key: &str, interned: &mut InternedData) -> DebugAnnotation {
        let iid = match self.annotation_iid.get(key) {
            Some(&iid) => iid,
            None => {
                let iid = self.annotation_iid.len() as u64 + 1;
                self.annotation_iid.insert(key.to_owned(), iid);
                interned.debug_annotation_names.push(InternedString {
                    iid: Some(iid),
                    name: Some(key.to_owned()),
                });
                iid
            }
        };
        DebugAnnotation {
            name_iid: Some(iid),
            ..Default::default()
        }
    }

    /// Level, correlation, external id and the args object's top-level entries.
    pub(super) fn annotations(
        &mut self,
        level: Level,
        correlation: Option<u64>,
        external_id: Option<u64>,
        args: Option<&str>,
        interned: &mut InternedData,
    ) -> Vec<DebugAnnotation> {
        let mut out = Vec::new();
        let mut a = self.annotation("level", interned);
        a.string_value = Some(level.as_str().to_owned());
        out.push(a);
        if let Some(c) = correlation {
            let mut a = self.annotation("correlation", interned);
            a.uint_value = Some(c);
            out.push(a);
        }
        if let Some(e) = external_id {
            let mut a = self.annotation("External id", interned);
            a.uint_value = Some(e);
            out.push(a);
        }
        let Some(text) = args else {
            return out;
        };
        match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
            Ok(map) => {
                for (key, value) in map {
                    // The typed fields above already carry these.
                    if (key == "correlation" && correlation.is_some())
                        || (key == "External id" && external_id.is_some())
                        || key == "level"
                    {
                        continue;
                    }
                    let mut a = self.annotation(&key, interned);
                    set_json_value(&mut a, value);
                    out.push(a);
                }
            }
            Err(_) => {
                let mut a = self.annotation("args", interned);
                a.string_value = Some(text.to_owned());
                out.push(a);
            }
        }
        out
    }

    /// Numbers the flows whose two ends are bound to different spans (source flow ids repeat
    /// across ranks, so afresh: the flow's index + 1) and keeps, per span, the ids its begin
    /// event carries.
    pub(super) fn bind_flows(&mut self, flows: &[strato_trace::Flow]) {
        self.flows.clear();
        for (i, flow) in flows.iter().enumerate() {
            let from = flow.from.as_ref().and_then(|e| e.span);
            let to = flow.to.as_ref().and_then(|e| e.span);
            if let (Some(a), Some(b)) = (from, to) {
                if a != b {
                    let id = i as u64 + 1;
                    self.flows.push((a.0, id));
                    self.flows.push((b.0, id));
                }
            }
        }
        // Stable: a span's ids stay in flow order.
        self.flows.sort_by_key(|&(span, _)| span);
    }

    /// The flow ids of span `index`'s begin event.
    pub(super) fn flow_ids(&self, index: u32) -> Vec<u64> {
        let from = self.flows.partition_point(|&(span, _)| span < index);
        self.flows[from..]
            .iter()
            .take_while(|&&(span, _)| span == index)
            .map(|&(_, id)| id)
            .collect()
    }

    /// Writes the slices, given in [`Slice::key`] order: each on its track (per level with
    /// strata tracks) or on an overflow lane when it overlaps an open slice without nesting.
    pub(super) fn slices<'a>(
        &mut self,
        sorted: impl Iterator<Item = io::Result<Slice<'a>>>,
    ) -> io::Result<()> {
        // Per lane, the stack of open spans' ends on the current model track.
        let mut lanes: Vec<Vec<Ns>> = Vec::new();
        let mut current: Option<(TrackId, Level)> = None;
        for span in sorted {
            let span = span?;
            let key = (span.track, span.group);
            if current != Some(key) {
                if let Some(track) = current {
                    self.close_lanes(track, &mut lanes)?;
                }
                current = Some(key);
            }
            let mut chosen = None;
            for (lane, stack) in lanes.iter_mut().enumerate() {
                while let Some(&end) = stack.last() {
                    if end > span.start {
                        break;
                    }
                    stack.pop();
                    let uuid = self.slice_uuid(span.track, key.1, lane as u32)?;
                    self.slice_end(uuid, end)?;
                }
                if stack.last().is_none_or(|&end| end >= span.end) {
                    stack.push(span.end);
                    chosen = Some(lane);
                    break;
                }
            }
            let lane = match chosen {
                Some(lane) => lane,
                None => {
                    lanes.push(vec![span.end]);
                    lanes.len() - 1
                }
            };
            self.slice_begin(&span, lane as u32)?;
        }
        if let Some(track) = current {
            self.close_lanes(track, &mut lanes)?;
        }
        Ok(())
    }

    /// Ends every open slice of `track` (at one level) and forgets its lanes.
    pub(super) fn close_lanes(
        &mut self,
        (track, level): (TrackId, Level),
        lanes: &mut Vec<Vec<Ns>>,
    ) -> io::Result<()> {
        for (lane, stack) in lanes.iter_mut().enumerate() {
            while let Some(end) = stack.pop() {
                let uuid = self.slice_uuid(track, level, lane as u32)?;
                self.slice_end(uuid, end)?;
            }
        }
        lanes.clear();
        Ok(())
    }

    pub(super) fn slice_begin(&mut self, span: &Slice<'_>, lane: u32) -> io::Result<()> {
        let uuid = self.slice_uuid(span.track, span.level, lane)?;
        let mut interned = InternedData::default();
        let name_iid = self.intern_name(span.name, &mut interned);
        let category_iids = self.intern_category(span.category, &mut interned);
        let debug_annotations = self.annotations(
            span.level,
            span.correlation,
            span.external_id,
            span.args.as_ref().map(Args::as_str),
            &mut interned,
        );
        let flow_ids = self.flow_ids(span.index);
        let packet = TracePacket {
            timestamp: Some(self.timestamp(span.start)),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_SLICE_BEGIN),
                track_uuid: Some(uuid),
                name_iid: Some(name_iid),
                category_iids,
                flow_ids,
                debug_annotations,
                ..Default::default()
            }),
            interned_data: non_empty(interned),
            ..Default::default()
        };
        self.emit(packet)
    }

    pub(super) fn slice_end(&mut self, uuid: u64, ts: Ns) -> io::Result<()> {
        let packet = TracePacket {
            timestamp: Some(self.timestamp(ts)),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_SLICE_END),
                track_uuid: Some(uuid),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.emit(packet)
    }

    pub(super) fn instants<'a>(
        &mut self,
        instants: impl Iterator<Item = io::Result<InstantEvent<'a>>>,
    ) -> io::Result<()> {
        for instant in instants {
            let instant = instant?;
            let uuid = self.lane_uuid(instant.track, 0)?;
            let mut interned = InternedData::default();
            let name_iid = self.intern_name(instant.name, &mut interned);
            let category_iids = self.intern_category(instant.category, &mut interned);
            let debug_annotations = self.annotations(
                instant.level,
                None,
                None,
                instant.args.as_ref().map(Args::as_str),
                &mut interned,
            );
            let packet = TracePacket {
                timestamp: Some(self.timestamp(instant.ts)),
                track_event: Some(TrackEvent {
                    r#type: Some(proto::TYPE_INSTANT),
                    track_uuid: Some(uuid),
                    name_iid: Some(name_iid),
                    category_iids,
                    debug_annotations,
                    ..Default::default()
                }),
                interned_data: non_empty(interned),
                ..Default::default()
            };
            self.emit(packet)?;
        }
        Ok(())
    }

    /// Counter samples: (track, time, value).
    pub(super) fn counters(
        &mut self,
        samples: impl Iterator<Item = io::Result<(TrackId, Ns, f64)>>,
    ) -> io::Result<()> {
        for sample in samples {
            let (track, ts, value) = sample?;
            let uuid = self.counter_uuid(track)?;
            let packet = TracePacket {
                timestamp: Some(self.timestamp(ts)),
                track_event: Some(TrackEvent {
                    r#type: Some(proto::TYPE_COUNTER),
                    track_uuid: Some(uuid),
                    double_counter_value: Some(value),
                    ..Default::default()
                }),
                ..Default::default()
            };
            self.emit(packet)?;
        }
        Ok(())
    }
}
