//! What every table writer shares ([`Ctx`]): the directory, the Parquet settings, the
//! fixed dictionaries (levels, track kinds) and each track's location and counter names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use strato_trace::{Level, Trace, Track, TrackKind};

use super::ROW_GROUP_ROWS;
use crate::error::{Result, StoreError, StoreErrorKind};

/// Where a track is, flattened for the convenience columns.
#[derive(Debug, Default)]
pub(super) struct Location {
    pub(super) rank: u32,
    pub(super) pid: Option<i64>,
    pub(super) tid: Option<i64>,
    pub(super) device: Option<i64>,
    pub(super) queue: Option<i64>,
    /// A counter track: the counter name/unit dictionaries have an entry for it.
    pub(super) counter: bool,
}

impl Location {
    pub(super) fn of(track: &Track) -> Location {
        let rank = track.rank.0;
        match &track.kind {
            TrackKind::Thread { pid, tid } => Location {
                rank,
                pid: Some(*pid),
                tid: Some(*tid),
                ..Location::default()
            },
            TrackKind::DeviceQueue { device, queue } => Location {
                rank,
                device: Some(*device),
                queue: Some(*queue),
                ..Location::default()
            },
            TrackKind::Counter { pid, device, .. } => Location {
                rank,
                pid: *pid,
                device: *device,
                counter: true,
                ..Location::default()
            },
            TrackKind::Custom { .. } => Location {
                rank,
                ..Location::default()
            },
        }
    }
}

/// What every table writer shares: the target directory, the fixed dictionaries, and what is
/// known of the tracks so far (their locations and counter names), kept in step with the
/// trace by [`Ctx::sync`].
pub(super) struct Ctx {
    pub(super) dir: PathBuf,
    pub(super) props: WriterProperties,
    /// Level names keyed by [`level_code`].
    pub(super) levels: ArrayRef,
    /// Track kind names keyed by [`kind_code`].
    pub(super) kinds: ArrayRef,
    /// Per track: its counter name / unit (empty for other tracks), keyed by track id.
    pub(super) counter_names: ArrayRef,
    pub(super) counter_units: ArrayRef,
    locations: Vec<Location>,
}

impl Ctx {
    pub(super) fn new(dir: &Path) -> Ctx {
        let empty: ArrayRef = Arc::new(StringArray::from_iter_values(std::iter::empty::<&str>()));
        Ctx {
            dir: dir.to_path_buf(),
            props: writer_properties(),
            levels: Arc::new(StringArray::from_iter_values(
                Level::ALL.iter().map(|l| l.as_str()),
            )),
            kinds: Arc::new(StringArray::from_iter_values(KINDS)),
            counter_names: empty.clone(),
            counter_units: empty,
            locations: Vec::new(),
        }
    }

    /// Catches up with the tracks `trace` has now (tracks are only ever appended, and a
    /// track's kind never changes).
    pub(super) fn sync(&mut self, trace: &Trace) -> Result<()> {
        if i32::try_from(trace.strings.len()).is_err() || i32::try_from(trace.tracks.len()).is_err()
        {
            return Err(StoreError::new(
                &self.dir,
                StoreErrorKind::InvalidTrace("more than 2^31 strings or tracks".into()),
            ));
        }
        if trace.tracks.len() == self.locations.len() {
            return Ok(());
        }
        let known = self.locations.len().min(trace.tracks.len());
        self.locations.truncate(known);
        self.locations
            .extend(trace.tracks[known..].iter().map(Location::of));
        let counter_field = |f: for<'x> fn(&'x str, &'x str) -> &'x str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(trace.tracks.iter().map(
                |t| match &t.kind {
                    TrackKind::Counter { name, unit, .. } => f(name, unit),
                    _ => "",
                },
            )))
        };
        self.counter_names = counter_field(|name, _| name);
        self.counter_units = counter_field(|_, unit| unit);
        Ok(())
    }

    pub(super) fn location(&self, track: u32) -> &Location {
        // Validated: every track id refers to a track.
        static NOWHERE: Location = Location {
            rank: 0,
            pid: None,
            tid: None,
            device: None,
            queue: None,
            counter: false,
        };
        self.locations.get(track as usize).unwrap_or(&NOWHERE)
    }
}

/// Snappy, bounded row groups, and per-column encodings: columns whose values are (nearly)
/// all distinct (ids, times, correlation ids, JSON texts) skip the dictionary attempt, and
/// integer ones among them are delta-encoded (sequential ids then cost almost nothing).
/// Settings are keyed by column name, which means the same thing in every table.
fn writer_properties() -> WriterProperties {
    const DELTA: [&str; 12] = [
        "id",
        "start_ns",
        "end_ns",
        "dur_ns",
        "ts_ns",
        "correlation",
        "external_id",
        "args_id",
        "from_ts_ns",
        "from_span",
        "to_ts_ns",
        "to_span",
    ];
    const UNIQUE_TEXT: [&str; 4] = ["text", "json", "metadata_json", "extra_json"];
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(concat!("stratoscope ", env!("CARGO_PKG_VERSION")).to_owned());
    for name in DELTA {
        builder = builder
            .set_column_dictionary_enabled(ColumnPath::from(name), false)
            .set_column_encoding(ColumnPath::from(name), Encoding::DELTA_BINARY_PACKED);
    }
    for name in UNIQUE_TEXT {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(name), false);
    }
    builder.build()
}

/// Names of the track kinds, keyed by [`kind_code`].
pub(crate) const KINDS: [&str; 4] = ["Thread", "DeviceQueue", "Counter", "Custom"];

pub(super) fn kind_code(kind: &TrackKind) -> u32 {
    match kind {
        TrackKind::Thread { .. } => 0,
        TrackKind::DeviceQueue { .. } => 1,
        TrackKind::Counter { .. } => 2,
        TrackKind::Custom { .. } => 3,
    }
}

pub(super) fn level_code(level: Level) -> u32 {
    u32::from(level.code())
}
