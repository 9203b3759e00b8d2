//! Where events go: the track of an event (device queue by category, host thread by integer-like
//! pid/tid, custom track otherwise), per-category facts ([`CategoryInfo`]), the ranks of a
//! TraceFuse-merged multi-rank file (pid strides and `args.rank`), Kineto's
//! `deviceProperties`, and the metadata events (`process_name`, `thread_name`, sort indexes)
//! that name processes and threads.

use strato_trace::metadata::{JsonObject, SourceMetadata};
use strato_trace::{Device, Level, Rank, RankId, SourceFormat, StrId, TrackId, TrackKind};

use super::schema::{EventView, KnownArgs, Loose};
use super::Builder;
use crate::json_lenient::{Fields, LooseStr};

/// Categories that belong on a device queue whatever their pid says.
pub(super) const DEVICE_CATEGORIES: &[&str] = &[
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_sync",
    "Kernel",
    "Memcpy",
    "Memset",
];

/// Import-note count: events of a merged multi-rank file whose `args.rank` names another rank
/// than their pid (see `Builder::fused_rank`).
pub const MERGED_RANK_CONTRADICTED: &str = "merged_file_args_rank_contradicts_pid";

/// TraceFuse adds rank x this to every pid of a merged file (see `Builder::fused_rank`).
pub(super) const FUSED_PID_STRIDE: i64 = 100_000_000;

/// Per-category facts, computed once per distinct category.
#[derive(Clone, Copy)]
pub(super) struct CategoryInfo {
    pub(super) id: StrId,
    pub(super) level: Level,
    pub(super) on_device: bool,
    /// No level rule names the category (and it is not a device category): its events are
    /// [`Level::Other`], and those that look like device work are counted
    /// ([`strato_trace::UNCLASSIFIED_DEVICE_PREFIX`]).
    pub(super) unrecognised: bool,
}

impl<'p, 's> Builder<'p, 's> {
    pub(super) fn device_properties(&mut self, text: &str) {
        let Some(p) = Fields::parse(text) else {
            return;
        };
        let int = |key| p.get(key).and_then(|v| Loose::from_raw(v).as_i64());
        let Some(index) = int("id") else {
            return;
        };
        let name = p.get("name").map(|raw| {
            let name = LooseStr::from_raw(raw);
            self.parse.replaced_surrogates += u64::from(name.replaced);
            name.text.into_owned()
        });
        self.trace.devices.push(Device {
            rank: Some(self.rank),
            index,
            name,
            sm_count: int("numSms"),
            total_memory_bytes: int("totalGlobalMem"),
            compute_major: int("computeMajor"),
            compute_minor: int("computeMinor"),
            clock_rate_khz: None,
            memory_bandwidth_bytes_per_s: None,
            extra: JsonObject::parse(text).unwrap_or_default(),
        });
    }

    /// The facts of category `cat`, computed on its first event. Its level is the level map's
    /// (Kineto's rules, then Chrome's); a category no rule names takes the level its first
    /// event's `args.level` names (`named`): stratoscope's Chrome export writes that on every
    /// event, so an export reads back with its levels whatever its categories (an OpenCL
    /// recording's `opencl_kernel`, a Python recording's `python`). Else [`Level::Other`].
    pub(super) fn category(&mut self, cat: &str, named: Option<&str>) -> CategoryInfo {
        if let Some(info) = self.categories.get(cat) {
            return *info;
        }
        let map = &self.options.level_map;
        let ruled = map
            .level(SourceFormat::Kineto.as_str(), cat)
            .or_else(|| map.level(SourceFormat::Chrome.as_str(), cat))
            // `Other` names no level: the category stays unrecognised (and counted when its
            // events look like device work), as on its first import.
            .or_else(|| named.and_then(Level::parse).filter(|l| *l != Level::Other));
        let level = ruled.unwrap_or(Level::Other);
        let on_device = DEVICE_CATEGORIES.contains(&cat) || level.is_device_op();
        if [
            "cpu_op",
            "cuda_runtime",
            "kernel",
            "Operator",
            "Runtime",
            "Kernel",
        ]
        .contains(&cat)
        {
            self.kineto = true;
        }
        let info = CategoryInfo {
            id: self.trace.intern(cat),
            level,
            on_device,
            unrecognised: ruled.is_none() && !on_device && !cat.is_empty(),
        };
        self.categories.insert(cat.to_owned(), info);
        info
    }

    pub(super) fn thread_track(&mut self, pid: i64, tid: i64) -> TrackId {
        if let Some(&id) = self.thread_cache.get(&(pid, tid)) {
            return id;
        }
        let id = self
            .trace
            .track_for(&mut self.tracks, self.rank, TrackKind::Thread { pid, tid });
        self.thread_cache.insert((pid, tid), id);
        id
    }

    /// The track for an event's pid/tid (not a device category).
    pub(super) fn host_track(&mut self, pid: Option<&Loose>, tid: Option<&Loose>) -> TrackId {
        let p = pid.and_then(Loose::as_i64);
        let t = tid.and_then(Loose::as_i64);
        match (p, t) {
            (Some(p), Some(t)) => self.thread_track(p, t),
            (Some(p), None) if tid.is_none() => self.thread_track(p, 0),
            _ => {
                let group = pid.map(Loose::text).unwrap_or_default();
                let name = tid.map(Loose::text).unwrap_or_default();
                self.trace.track_for(
                    &mut self.tracks,
                    self.rank,
                    TrackKind::Custom { group, name },
                )
            }
        }
    }

    /// Several ranks in one file (TraceLens's TraceFuse): an event's pid is its raw pid +
    /// rank x 1e8 and its args carry `rank`. Makes `self.rank` the rank of an event with `pid`:
    /// pid >= 1e8 whose quotient is the event's `args.rank` (or a rank already seen) -> that
    /// rank, created on first sight (job rank = the quotient, world size and format as the
    /// file's); any other pid -> the file's first rank (rank 0 keeps its raw pids). Linux pids
    /// stay below 2^22, so single-rank files never switch. Pids are kept as written (unique per
    /// rank).
    pub(super) fn fused_rank(&mut self, pid: Option<&Loose>, args_rank: Option<&Loose>) {
        const STRIDE: i64 = FUSED_PID_STRIDE;
        let quotient = pid.and_then(Loose::as_i64).map_or(0, |p| p / STRIDE);
        let target = if quotient >= 1 {
            match self.fused_ranks.get(&quotient) {
                Some(&r) => r,
                None if args_rank.and_then(Loose::as_i64) == Some(quotient) => {
                    let base = &self.trace.ranks[0];
                    let rank = Rank {
                        rank: Some(quotient),
                        world_size: base.world_size,
                        source: format!("{} (rank {quotient})", self.path.display()),
                        format: if self.kineto {
                            SourceFormat::Kineto
                        } else {
                            SourceFormat::Chrome
                        },
                        host: None,
                        metadata: SourceMetadata::None,
                        notes: Default::default(),
                    };
                    self.trace.ranks[0].rank.get_or_insert(0);
                    let id = self.trace.add_rank(rank);
                    self.fused_ranks.insert(quotient, id);
                    id
                }
                None => RankId(0),
            }
        } else {
            RankId(0)
        };
        // In a merged file, an event whose `args.rank` names another rank than its pid does is
        // kept on its pid's rank and counted there (the file contradicts itself).
        let claimed = args_rank.and_then(Loose::as_i64);
        if let Some(claimed) = claimed {
            let merged = quotient >= 1 || !self.fused_ranks.is_empty();
            let rank = &mut self.trace.ranks[target.0 as usize];
            if merged && rank.rank.unwrap_or(0) != claimed {
                rank.notes.count(MERGED_RANK_CONTRADICTED, 1);
            }
        }
        self.rank = target;
    }

    /// The rank a pid as written belongs to and the pid the rank's own trace had: a merged
    /// file's pid >= 1e8 of a rank seen -> (that rank, pid - rank x 1e8); else (the file's
    /// first rank, pid).
    pub(super) fn pid_rank(&self, pid: i64) -> (RankId, i64) {
        match self.fused_ranks.get(&(pid / FUSED_PID_STRIDE)) {
            Some(&rank) if pid >= FUSED_PID_STRIDE => (rank, pid % FUSED_PID_STRIDE),
            _ => (RankId(0), pid),
        }
    }

    /// The device-queue track a (pid, tid) as written names (Kineto writes a GPU's stream
    /// events at pid = device, tid = stream; a merged file's pid has the rank x 1e8 added).
    pub(super) fn known_device_track(&self, pid: i64, tid: i64) -> Option<TrackId> {
        let (rank, device) = self.pid_rank(pid);
        self.device_cache.get(&(rank, device, tid)).copied()
    }

    pub(super) fn device_track(&mut self, device: i64, queue: i64) -> TrackId {
        if let Some(&id) = self.device_cache.get(&(self.rank, device, queue)) {
            return id;
        }
        let kind = TrackKind::DeviceQueue { device, queue };
        let id = self.trace.track_for(&mut self.tracks, self.rank, kind);
        self.device_cache.insert((self.rank, device, queue), id);
        id
    }

    /// The track an event at (pid, tid) refers to once every event is read: an existing thread
    /// track, else the device queue (pid = device, tid = stream) when one exists, else a new
    /// thread track. Used for flow ends and `thread_name` metadata, which Kineto also writes for
    /// GPU streams.
    pub(super) fn existing_track(&mut self, pid: Option<&Loose>, tid: Option<&Loose>) -> TrackId {
        let p = pid.and_then(Loose::as_i64);
        let t = tid.and_then(Loose::as_i64);
        if let (Some(p), Some(t)) = (p, t) {
            if let Some(&id) = self.thread_cache.get(&(p, t)) {
                return id;
            }
            if let Some(id) = self.known_device_track(p, t) {
                return id;
            }
        }
        self.host_track(pid, tid)
    }

    pub(super) fn memory_counter(&mut self, pid: i64, device: i64) -> TrackId {
        if let Some(&id) = self.memory_tracks.get(&(pid, device)) {
            return id;
        }
        let kind = TrackKind::Counter {
            pid: Some(pid),
            device: Some(device),
            name: "memory allocated".into(),
            unit: "bytes".into(),
        };
        let id = self.trace.track_for(&mut self.tracks, self.rank, kind);
        self.memory_tracks.insert((pid, device), id);
        id
    }

    pub(super) fn metadata_event(&mut self, ev: &EventView<'_>, known: &KnownArgs<'_>) {
        let pid = ev.pid.and_then(Loose::as_i64);
        match ev.name {
            Some("process_name") => {
                if let Some(pid) = pid {
                    self.process_names.entry(pid).or_default().0 =
                        known.name.as_deref().map(str::to_owned);
                }
            }
            Some("process_labels") => {
                if let Some(pid) = pid {
                    self.process_names.entry(pid).or_default().1 =
                        known.labels.as_deref().map(str::to_owned);
                }
            }
            Some("thread_name") | Some("thread_sort_index") => {
                let tid = ev.tid.and_then(Loose::as_i64);
                if let (Some(pid), Some(tid)) = (pid, tid) {
                    let name = known.name.as_deref().map(str::to_owned);
                    let sort = known.sort_index.as_ref().and_then(Loose::as_i64);
                    self.thread_names.push((pid, tid, name, sort));
                }
            }
            _ => {}
        }
    }
}
