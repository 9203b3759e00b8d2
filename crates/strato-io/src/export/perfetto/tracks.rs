//! The Perfetto export's tracks ([`Writer`]'s track methods): a process per (rank, pid), a
//! device per (rank, device), their thread, queue, counter and overflow tracks, the per-stratum
//! child tracks of a thread, and the tracks of what the analyses add ([`Extras`]).

use std::cmp::Reverse;
use std::io::{self, Write};

use proto::{
    CounterDescriptor, InternedData, ProcessDescriptor, ThreadDescriptor, TracePacket,
    TrackDescriptor, TrackEvent,
};
use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{Level, Ns, RankId, TrackId, TrackKind};

use super::*;

impl<'t, W: Write> Writer<'t, W> {
    /// Writes the descriptors of every model track and of their parents.
    pub(super) fn tracks(&mut self) -> io::Result<()> {
        let trace = self.trace;
        let multi_rank = trace.ranks.len() > 1;
        let suffix = |rank: RankId| -> String {
            if multi_rank {
                let number = trace
                    .ranks
                    .get(rank.0 as usize)
                    .and_then(|r| r.rank)
                    .unwrap_or(i64::from(rank.0));
                format!(" [rank {number}]")
            } else {
                String::new()
            }
        };

        // A pid gets real process/thread descriptors only when it is a plausible OS pid used
        // by a single rank: Perfetto merges process tracks by pid, which would put two ranks'
        // (or two hosts') processes into one.
        let mut pid_rank: FxHashMap<i64, RankId> = FxHashMap::default();
        let mut shared_pids: FxHashSet<i64> = FxHashSet::default();
        let mut note_pid = |rank: RankId, pid: i64| match pid_rank.insert(pid, rank) {
            Some(previous) if previous != rank => {
                shared_pids.insert(pid);
            }
            _ => {}
        };
        for p in &trace.processes {
            note_pid(p.rank, p.pid);
        }
        for t in &trace.tracks {
            if let Some(pid) = t.pid() {
                note_pid(t.rank, pid);
            }
        }
        let real_pid = |pid: i64| -> Option<i32> {
            i32::try_from(pid)
                .ok()
                .filter(|&p| p > 0 && !shared_pids.contains(&pid))
        };
        let process_info: FxHashMap<(RankId, i64), &strato_trace::Process> = trace
            .processes
            .iter()
            .map(|p| ((p.rank, p.pid), p))
            .collect();

        let mut processes: FxHashMap<(RankId, i64), u64> = FxHashMap::default();
        let mut devices: FxHashMap<(RankId, i64), u64> = FxHashMap::default();
        let mut groups: FxHashMap<(RankId, String), u64> = FxHashMap::default();

        // Processes the source named come first, in source order; those that own no track
        // (Kineto names every GPU as a process, used or not) are left out.
        let owners: FxHashSet<(RankId, i64)> = trace
            .tracks
            .iter()
            .filter_map(|t| t.pid().map(|pid| (t.rank, pid)))
            .collect();
        for p in &trace.processes {
            let key = (p.rank, p.pid);
            if owners.contains(&key) && !processes.contains_key(&key) {
                let uuid = self.process_track(p.rank, p.pid, &process_info, real_pid, suffix)?;
                processes.insert(key, uuid);
            }
        }

        for (index, track) in trace.tracks.iter().enumerate() {
            let rank = track.rank;
            let uuid = self.new_uuid();
            let mut d = TrackDescriptor {
                uuid: Some(uuid),
                ..Default::default()
            };
            let name = match &track.kind {
                TrackKind::Thread { pid, tid } => {
                    let parent = match processes.get(&(rank, *pid)) {
                        Some(&u) => u,
                        None => {
                            let u =
                                self.process_track(rank, *pid, &process_info, real_pid, suffix)?;
                            processes.insert((rank, *pid), u);
                            u
                        }
                    };
                    let name = track
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("thread {tid}"));
                    d.parent_uuid = Some(parent);
                    if let (Some(p), Ok(t)) = (real_pid(*pid), i32::try_from(*tid)) {
                        if t > 0 {
                            d.thread = Some(ThreadDescriptor {
                                pid: Some(p),
                                tid: Some(t),
                                thread_name: Some(name.clone()),
                            });
                        }
                    }
                    name
                }
                TrackKind::DeviceQueue { device, queue } => {
                    let parent = match devices.get(&(rank, *device)) {
                        Some(&u) => u,
                        None => {
                            let u = self.device_track(rank, *device, suffix)?;
                            devices.insert((rank, *device), u);
                            u
                        }
                    };
                    d.parent_uuid = Some(parent);
                    d.sibling_order_rank = Some(clamp_i32(*queue));
                    track
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("stream {queue}"))
                }
                TrackKind::Counter {
                    pid,
                    device,
                    name,
                    unit,
                } => {
                    let mut label = track.name.clone().unwrap_or_else(|| name.clone());
                    if let Some(pid) = pid {
                        let parent = match processes.get(&(rank, *pid)) {
                            Some(&u) => u,
                            None => {
                                let u = self.process_track(
                                    rank,
                                    *pid,
                                    &process_info,
                                    real_pid,
                                    suffix,
                                )?;
                                processes.insert((rank, *pid), u);
                                u
                            }
                        };
                        d.parent_uuid = Some(parent);
                    } else if let Some(device) = device {
                        let parent = match devices.get(&(rank, *device)) {
                            Some(&u) => u,
                            None => {
                                let u = self.device_track(rank, *device, suffix)?;
                                devices.insert((rank, *device), u);
                                u
                            }
                        };
                        d.parent_uuid = Some(parent);
                    } else {
                        label.push_str(&suffix(rank));
                    }
                    d.counter = Some(CounterDescriptor {
                        unit: None,
                        unit_name: (!unit.is_empty()).then(|| unit.clone()),
                    });
                    label
                }
                TrackKind::Custom { group, name } => {
                    let key = (rank, group.clone());
                    let parent = match groups.get(&key) {
                        Some(&u) => u,
                        None => {
                            let u = self.new_uuid();
                            self.descriptor(TrackDescriptor {
                                uuid: Some(u),
                                name: Some(format!("{group}{}", suffix(rank))),
                                ..Default::default()
                            })?;
                            groups.insert(key, u);
                            u
                        }
                    };
                    d.parent_uuid = Some(parent);
                    track.name.clone().unwrap_or_else(|| name.clone())
                }
            };
            d.name = Some(name.clone());
            self.descriptor(d)?;
            debug_assert_eq!(self.track_uuid.len(), index);
            self.track_uuid.push(uuid);
            self.track_name.push(name);
        }
        self.process_uuids = processes;
        self.device_uuids = devices;
        Ok(())
    }

    /// True when `span`'s slices go to a per-level child of its thread.
    pub(super) fn split(&self, track: TrackId) -> bool {
        self.strata_tracks
            && matches!(
                self.trace.tracks.get(track.0 as usize).map(|t| &t.kind),
                Some(TrackKind::Thread { .. })
            )
    }

    /// The Perfetto track for slices of `track` at `level` on `lane`: the per-level child
    /// track of a thread (and its overflow lanes) when strata tracks are on, else
    /// [`Self::lane_uuid`].
    pub(super) fn slice_uuid(
        &mut self,
        track: TrackId,
        level: Level,
        lane: u32,
    ) -> io::Result<u64> {
        if !self.split(track) {
            return self.lane_uuid(track, lane);
        }
        let code = level.code();
        let group = match self.level_tracks.get(&(track.0, code)) {
            Some(&u) => u,
            None => {
                let u = self.new_uuid();
                let parent = self.track_uuid[track.0 as usize];
                self.descriptor(TrackDescriptor {
                    uuid: Some(u),
                    parent_uuid: Some(parent),
                    name: Some(level.as_str().to_owned()),
                    sibling_order_rank: Some(i32::from(code)),
                    ..Default::default()
                })?;
                self.level_tracks.insert((track.0, code), u);
                u
            }
        };
        if lane == 0 {
            return Ok(group);
        }
        if let Some(&u) = self.level_lanes.get(&(track.0, code, lane)) {
            return Ok(u);
        }
        let u = self.new_uuid();
        self.descriptor(TrackDescriptor {
            uuid: Some(u),
            parent_uuid: Some(group),
            name: Some(format!("{} (overlap {lane})", level.as_str())),
            sibling_order_rank: Some(clamp_i32(i64::from(lane))),
            ..Default::default()
        })?;
        self.level_lanes.insert((track.0, code, lane), u);
        Ok(u)
    }

    /// The parent track of an extra track or counter (created top-level when the owner has
    /// no track).
    pub(super) fn owner_uuid(&mut self, rank: RankId, owner: &Owner) -> Option<u64> {
        match owner {
            Owner::Process(pid) => self.process_uuids.get(&(rank, *pid)).copied(),
            Owner::Device(device) => self.device_uuids.get(&(rank, *device)).copied(),
            Owner::None => None,
        }
    }

    pub(super) fn extra_counters(&mut self, counters: &[ExtraCounter]) -> io::Result<()> {
        for c in counters {
            let uuid = self.new_uuid();
            let parent = self.owner_uuid(c.rank, &c.owner);
            self.descriptor(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: parent,
                name: Some(c.name.clone()),
                counter: Some(CounterDescriptor {
                    unit: None,
                    unit_name: (!c.unit.is_empty()).then(|| c.unit.clone()),
                }),
                ..Default::default()
            })?;
            for &(ts, value) in &c.points {
                self.emit(TracePacket {
                    timestamp: Some(self.timestamp(ts)),
                    track_event: Some(TrackEvent {
                        r#type: Some(proto::TYPE_COUNTER),
                        track_uuid: Some(uuid),
                        double_counter_value: Some(value),
                        ..Default::default()
                    }),
                    ..Default::default()
                })?;
            }
        }
        Ok(())
    }

    pub(super) fn extra_tracks(&mut self, tracks: &[ExtraTrack]) -> io::Result<()> {
        for t in tracks {
            let uuid = self.new_uuid();
            let parent = self.owner_uuid(t.rank, &t.owner);
            self.descriptor(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: parent,
                name: Some(t.name.clone()),
                ..Default::default()
            })?;
            let mut spans: Vec<&ExtraSpan> = t.spans.iter().collect();
            spans.sort_by_key(|s| (s.start, Reverse(s.end)));
            let mut last_end = Ns::MIN;
            for s in spans {
                let start = s.start.max(last_end);
                if s.end < start {
                    continue;
                }
                let mut interned = InternedData::default();
                // Extra names are not in the trace's string table: intern them by text.
                let name_iid = self.intern_text(&s.name, &mut interned);
                let mut debug_annotations = Vec::new();
                for (k, v) in &s.args {
                    let mut a = self.annotation(k, &mut interned);
                    a.string_value = Some(v.clone());
                    debug_annotations.push(a);
                }
                self.emit(TracePacket {
                    timestamp: Some(self.timestamp(start)),
                    track_event: Some(TrackEvent {
                        r#type: Some(proto::TYPE_SLICE_BEGIN),
                        track_uuid: Some(uuid),
                        name_iid: Some(name_iid),
                        debug_annotations,
                        ..Default::default()
                    }),
                    interned_data: non_empty(interned),
                    ..Default::default()
                })?;
                self.slice_end(uuid, s.end)?;
                last_end = s.end;
            }
        }
        Ok(())
    }

    pub(super) fn process_track(
        &mut self,
        rank: RankId,
        pid: i64,
        info: &FxHashMap<(RankId, i64), &strato_trace::Process>,
        real_pid: impl Fn(i64) -> Option<i32>,
        suffix: impl Fn(RankId) -> String,
    ) -> io::Result<u64> {
        let uuid = self.new_uuid();
        let process = info.get(&(rank, pid));
        let given = process.and_then(|p| p.name.clone());
        let labels: Vec<String> = process.and_then(|p| p.labels.clone()).into_iter().collect();
        let mut d = TrackDescriptor {
            uuid: Some(uuid),
            ..Default::default()
        };
        match real_pid(pid) {
            Some(p) => {
                let name = given.map(|n| format!("{n}{}", suffix(rank)));
                d.process = Some(ProcessDescriptor {
                    pid: Some(p),
                    process_name: name.clone().or_else(|| {
                        let s = suffix(rank);
                        (!s.is_empty()).then(|| format!("process {pid}{s}"))
                    }),
                    process_labels: labels,
                });
                d.name = name;
            }
            None => {
                let name = match given {
                    Some(n) => format!("{n} (pid {pid}){}", suffix(rank)),
                    None => format!("process {pid}{}", suffix(rank)),
                };
                d.name = Some(name);
                d.description = labels.into_iter().next();
            }
        }
        self.descriptor(d)?;
        Ok(uuid)
    }

    pub(super) fn device_track(
        &mut self,
        rank: RankId,
        device: i64,
        suffix: impl Fn(RankId) -> String,
    ) -> io::Result<u64> {
        let uuid = self.new_uuid();
        let name = format!(
            "{}{}",
            super::super::device_label(self.trace, rank, device),
            suffix(rank)
        );
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name),
            // Queues in queue-number order.
            child_ordering: Some(proto::CHILD_ORDERING_EXPLICIT),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// The Perfetto track for slices/instants of `track` on `lane` (0 = the track itself,
    /// except for counter tracks, which cannot carry slices).
    pub(super) fn lane_uuid(&mut self, track: TrackId, lane: u32) -> io::Result<u64> {
        let index = track.0 as usize;
        let is_counter = matches!(
            self.trace.tracks.get(index).map(|t| &t.kind),
            Some(TrackKind::Counter { .. })
        );
        if lane == 0 && !is_counter {
            return Ok(self.track_uuid[index]);
        }
        if let Some(&uuid) = self.extra_tracks.get(&(track.0, lane)) {
            return Ok(uuid);
        }
        let uuid = self.new_uuid();
        let base = &self.track_name[index];
        let name = if lane == 0 {
            format!("{base} (events)")
        } else {
            format!("{base} (overlap {lane})")
        };
        let parent = self.track_uuid[index];
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            sibling_order_rank: Some(clamp_i32(i64::from(lane))),
            ..Default::default()
        })?;
        self.extra_tracks.insert((track.0, lane), uuid);
        Ok(uuid)
    }

    /// The counter track for samples of `track`.
    pub(super) fn counter_uuid(&mut self, track: TrackId) -> io::Result<u64> {
        let index = track.0 as usize;
        if matches!(
            self.trace.tracks.get(index).map(|t| &t.kind),
            Some(TrackKind::Counter { .. })
        ) {
            return Ok(self.track_uuid[index]);
        }
        if let Some(&uuid) = self.extra_tracks.get(&(track.0, COUNTER_LANE)) {
            return Ok(uuid);
        }
        let uuid = self.new_uuid();
        let name = format!("{} (counter)", self.track_name[index]);
        let parent = self.track_uuid[index];
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            counter: Some(CounterDescriptor::default()),
            ..Default::default()
        })?;
        self.extra_tracks.insert((track.0, COUNTER_LANE), uuid);
        Ok(uuid)
    }

    /// Per model track: whether its spans go to one child track per stratum.
    pub(super) fn split_tracks(&self) -> Vec<bool> {
        (0..self.trace.tracks.len())
            .map(|t| self.split(TrackId(t as u32)))
            .collect()
    }

    /// What the analyses add: their counters and tracks.
    pub(super) fn extras(&mut self, extras: &Extras) -> io::Result<()> {
        self.extra_counters(&extras.counters)?;
        self.extra_tracks(&extras.tracks)
    }
}
