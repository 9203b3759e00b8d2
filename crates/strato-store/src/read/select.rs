//! What a read keeps: which args blobs ([`ArgsRead`], from [`crate::ArgsScope`]) and which
//! spans ([`SpanRule`], from [`crate::SpanProjection`]), decided event by event as the
//! tables are read.

use strato_trace::projection::KINETO_HOST_CATEGORIES;
use strato_trace::{ArgsId, Level, SourceFormat, Span, StrId, Trace, Track, TrackId};

/// Which args blobs a read loads (from [`crate::ReadOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArgsRead {
    /// None: `args.parquet` is not opened, every args id is dropped.
    None,
    /// Every blob, with the stored ids.
    All,
    /// The device operations' blobs: their stored ids are kept on the events while the tables
    /// are read, then [`read_device_args`] loads those blobs and renumbers them.
    ///
    /// [`read_device_args`]: super::events::read_device_args
    DeviceOps,
    /// The dependency analyses' blobs, kept and loaded as [`ArgsRead::DeviceOps`]'s.
    Dependencies,
}

impl ArgsRead {
    /// The args id an event keeps, of its stored `id`; `selected`: whether the selection
    /// takes the event ([`ArgsRead::selected`]).
    pub(super) fn keep(self, id: Option<u32>, selected: bool) -> Option<ArgsId> {
        match self {
            ArgsRead::None => None,
            ArgsRead::All => id.map(ArgsId),
            ArgsRead::DeviceOps | ArgsRead::Dependencies => id.filter(|_| selected).map(ArgsId),
        }
    }

    /// True for the reads that keep some blobs only (loaded by [`read_device_args`]).
    ///
    /// [`read_device_args`]: super::events::read_device_args
    pub(super) fn selects(self) -> bool {
        matches!(self, ArgsRead::DeviceOps | ArgsRead::Dependencies)
    }

    /// Whether this read keeps the blob of an event on `track` at `level` named `name`.
    pub(super) fn selected(self, trace: &Trace, track: TrackId, level: Level, name: StrId) -> bool {
        match self {
            ArgsRead::DeviceOps => is_device_op(trace, track, level),
            ArgsRead::Dependencies => strato_trace::args_of::dependency_args(
                level,
                trace
                    .tracks
                    .get(track.0 as usize)
                    .is_some_and(Track::is_device),
                trace.str(name),
            ),
            ArgsRead::None | ArgsRead::All => false,
        }
    }
}

/// Decides, span by span, whether a [`crate::SpanProjection`] keeps it.
pub(super) struct SpanRule {
    /// Per track: its spans may be left out (a host track of a Chrome/Kineto rank).
    host_track_of_chrome_rank: Vec<bool>,
    /// The string ids of [`KINETO_HOST_CATEGORIES`] in this profile.
    host_categories: Vec<StrId>,
}

impl SpanRule {
    /// `None` for [`crate::SpanProjection::All`] (every span kept).
    pub(super) fn new(selection: crate::SpanProjection, trace: &Trace) -> Option<SpanRule> {
        if selection == crate::SpanProjection::All {
            return None;
        }
        let host_track_of_chrome_rank = trace
            .tracks
            .iter()
            .map(|t| {
                !t.is_device()
                    && trace.ranks.get(t.rank.0 as usize).is_some_and(|r| {
                        matches!(r.format, SourceFormat::Kineto | SourceFormat::Chrome)
                    })
            })
            .collect();
        let host_categories = KINETO_HOST_CATEGORIES
            .iter()
            .filter_map(|c| trace.strings.lookup(c))
            .collect();
        Some(SpanRule {
            host_track_of_chrome_rank,
            host_categories,
        })
    }

    pub(super) fn keeps(&self, trace: &Trace, s: &Span) -> bool {
        let may_leave_out = self
            .host_track_of_chrome_rank
            .get(s.track.0 as usize)
            .copied()
            .unwrap_or(false);
        !may_leave_out
            || s.correlation.is_some()
            || s.level.is_device_op()
            || !self.host_categories.contains(&s.category)
            || trace.str(s.name).starts_with("ProfilerStep#")
    }
}

/// Whether an event on `track` at `level` is a device operation (whose args
/// [`crate::ArgsScope::DeviceOps`] keeps).
fn is_device_op(trace: &Trace, track: TrackId, level: Level) -> bool {
    level.is_device_op()
        || trace
            .tracks
            .get(track.0 as usize)
            .is_some_and(Track::is_device)
}
