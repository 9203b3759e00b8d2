//! Nsight Compute CSV importer (`ncu --csv`). Owns reading both CSV shapes ncu writes — the
//! "details" long form (one row per (launch, metric)) and the `--page raw` wide form (one column
//! per metric, a second row of units) — into one device-kernel [`Span`] per profiled launch
//! carrying every metric and the derived roofline inputs in its args, and [`attach`], which
//! merges those metrics into the matching kernels of a timeline imported beside them.
//!
//! ncu serializes kernels and records no timestamps, so spans are placed synthetically: in
//! launch (ID) order, back to back, each as long as its `gpu__time_duration.sum`. The format is
//! described in `docs/formats/ncu.md`.
//!
//! Layout: this module owns the entry point and the trace built launch by launch ([`Builder`]);
//! [`columns`] reads the CSV shape (preamble, header, columns), [`values`] the numbers and
//! units, [`launch`] gathers one launch's metrics, and [`matching`] attaches them to a timeline
//! ([`attach`]).

mod columns;
mod launch;
mod matching;
mod values;

use std::path::Path;
use strato_trace::metadata::SourceMetadata;
use strato_trace::OptionalId;

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use strato_trace::{
    Device, Level, Process, Rank, RankId, SourceFormat, Span, Trace, TrackIndexHandle, TrackKind,
};

use crate::{input::Input, Error, ErrorKind, ImportOptions, Result};
use columns::{field, find_header, Columns, Header};
use launch::Launch;
pub use matching::attach;
use values::{parse_number, Num};

/// Format name in [`Rank::format`] and the level map.
const FORMAT: SourceFormat = SourceFormat::Ncu;
/// Span category of every launch.
const CATEGORY: &str = "ncu";
/// Bound on the bytes read while looking for the header line (program output before it).
const MAX_PREAMBLE_BYTES: u64 = 64 << 20;
/// Preamble lines kept in the rank metadata (and characters per line).
const KEPT_PREAMBLE_LINES: usize = 64;
const KEPT_PREAMBLE_CHARS: usize = 400;

/// Imports an `ncu --csv` file (details long form or `--page raw` wide form). Each launch ID
/// becomes one span on `DeviceQueue { device, queue: stream }`; its args hold every metric
/// (`metrics`), the launch configuration and the derived roofline inputs (see the module docs
/// and `docs/formats/ncu.md`). Args are kept even when `options.keep_args` is off: the metrics
/// are the point of this format.
pub fn import(path: &Path, input: Input, options: &ImportOptions) -> Result<Trace> {
    let mut reader = input.reader;
    let header = find_header(path, &mut reader)?;
    let columns = Columns::new(&header.fields);
    let level = options
        .level_map
        .level(FORMAT.as_str(), "kernel")
        .unwrap_or(Level::DeviceKernel);

    let mut builder = Builder::new(path, level, &header, columns.wide);
    let mut csv_reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(reader);
    let mut record = csv::ByteRecord::new();
    let mut current: Option<Launch> = None;
    let mut units: Option<Vec<String>> = None;
    let mut first_record = true;
    loop {
        let more = csv_reader.read_byte_record(&mut record).map_err(|e| {
            let line = e.position().map_or(header.line, |p| header.line + p.line());
            let message = e.to_string();
            match e.into_kind() {
                csv::ErrorKind::Io(io) => crate::input::classify(path, io),
                _ => Error::new(path, ErrorKind::Csv(format!("line {line}: {message}"))),
            }
        })?;
        if !more {
            break;
        }
        let line = header.line + record.position().map_or(0, |p| p.line());
        if !columns.accepts(&record) {
            let first = record
                .get(0)
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let first = first.trim();
            if first.starts_with("==") || (record.len() == 1 && first.is_empty()) {
                // An ncu log line (`==PROF==`, `==WARNING==`) or a blank line.
                continue;
            }
            return Err(Error::new(
                path,
                ErrorKind::Csv(format!(
                    "line {line}: expected {} fields, found {}",
                    columns.count,
                    record.len()
                )),
            ));
        }
        let id_text = field(&record, columns.id).unwrap_or_default();
        if id_text == "ID" {
            // The header again (concatenated outputs).
            continue;
        }
        if columns.wide && first_record && id_text.is_empty() {
            // The units row of `--page raw`.
            units = Some(
                (0..record.len())
                    .map(|i| field(&record, Some(i)).unwrap_or_default().into_owned())
                    .collect(),
            );
            first_record = false;
            continue;
        }
        first_record = false;
        let id = parse_number(&id_text)
            .and_then(Num::as_i64)
            .ok_or_else(|| {
                Error::new(
                    path,
                    ErrorKind::Csv(format!(
                        "line {line}: launch ID {id_text:?} is not an integer"
                    )),
                )
            })?;
        if current.as_ref().is_some_and(|l| l.id != id) {
            if let Some(done) = current.take() {
                builder.push(done)?;
            }
        }
        let launch = current.get_or_insert_with(|| Launch::new(id, &record, &columns));
        if columns.wide {
            launch.add_wide_row(&record, &columns, units.as_deref());
        } else {
            launch.add_long_row(&record, &columns);
        }
    }
    if let Some(done) = current.take() {
        builder.push(done)?;
    }
    Ok(builder.finish())
}

/// Builds the trace launch by launch.
struct Builder {
    path: std::path::PathBuf,
    trace: Trace,
    rank: RankId,
    tracks: TrackIndexHandle,
    level: Level,
    cursor: i64,
    pids: FxHashSet<i64>,
    devices: FxHashMap<i64, usize>,
    name: strato_trace::StrId,
    category: strato_trace::StrId,
}

impl Builder {
    fn new(path: &Path, level: Level, header: &Header, wide: bool) -> Self {
        let mut trace = Trace::default();
        let metadata = serde_json::json!({
            "form": if wide { "raw" } else { "details" },
            "placement": "synthetic: launches in ID order, back to back, each lasting its \
                          gpu__time_duration.sum (ncu serializes kernels and records no \
                          timestamps)",
            "preamble": header.preamble,
        });
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: FORMAT,
            host: None,
            metadata: SourceMetadata::of_value(metadata),
            notes: Default::default(),
        });
        let name = trace.intern("");
        let category = trace.intern(CATEGORY);
        Builder {
            path: path.to_path_buf(),
            trace,
            rank,
            tracks: TrackIndexHandle::default(),
            level,
            cursor: 0,
            pids: FxHashSet::default(),
            devices: FxHashMap::default(),
            name,
            category,
        }
    }

    /// Places a launch after the previous one. Its duration must be in the valid time range
    /// and so must its end ([`strato_trace::TIME_LIMIT_NS`]), else the import fails naming
    /// the launch; a missing or unusable duration is taken as 0 and counted
    /// (`kernels_without_duration`, `kernels_with_unusable_duration`), a negative one clamped
    /// to 0 and counted (`clamped_negative_durations`).
    fn push(&mut self, launch: Launch) -> Result<()> {
        let notes = &mut self.trace.ranks[self.rank.0 as usize].notes;
        notes.events_read += 1;
        let out_of_range = |what: String| {
            Error::new(
                &self.path,
                ErrorKind::Invalid(format!(
                    "kernel {:?} (launch ID {}): {what}",
                    launch.kernel, launch.id
                )),
            )
        };
        let duration = match launch.duration_ns() {
            Some(d) if d < 0.0 => {
                notes.count("clamped_negative_durations", 1);
                0
            }
            Some(d) if d <= strato_trace::TIME_LIMIT_NS as f64 => d as i64,
            Some(d) => {
                return Err(out_of_range(format!(
                    "duration {d} ns is outside the valid range (+-{} ns)",
                    strato_trace::TIME_LIMIT_NS
                )))
            }
            None if launch.has_unusable_duration() => {
                notes.count("kernels_with_unusable_duration", 1);
                0
            }
            None => {
                notes.count("kernels_without_duration", 1);
                0
            }
        };
        let start = self.cursor;
        let end = strato_trace::checked_end(start, duration).map_err(|e| {
            out_of_range(format!("placed after the previous launches, its end: {e}"))
        })?;
        self.note_device(&launch);
        let trace = &mut self.trace;
        if let (Some(host), Some(rank)) = (&launch.host, trace.ranks.get_mut(self.rank.0 as usize))
        {
            if rank.host.is_none() {
                rank.host = Some(host.clone());
            }
        }
        if let Some(pid) = launch.pid {
            if self.pids.insert(pid) {
                trace.processes.push(Process {
                    rank: self.rank,
                    pid,
                    name: launch.process_name.clone(),
                    labels: None,
                });
            }
        }
        let device = launch.device.unwrap_or(0);
        let stream = launch.stream.unwrap_or(0);
        let track = trace.track_for(
            &mut self.tracks,
            self.rank,
            TrackKind::DeviceQueue {
                device,
                queue: stream,
            },
        );
        if let Some(t) = trace.tracks.get_mut(track.0 as usize) {
            if t.name.is_none() {
                t.name = Some(format!("Stream {stream}"));
            }
        }
        self.cursor = end;

        let mut args = launch.args.clone();
        args.extend(launch.derived());
        if !launch.rules.is_empty() {
            args.insert("rules".into(), Value::Array(launch.rules.clone()));
        }
        args.insert("metrics".into(), Value::Object(launch.metrics));
        let args = trace.add_args(&Value::Object(args).to_string());
        let name = if launch.kernel.is_empty() {
            self.name
        } else {
            trace.intern(&launch.kernel)
        };
        trace.spans.push(Span {
            track,
            start,
            end,
            name,
            category: self.category,
            level: self.level,
            correlation: OptionalId::NONE,
            external_id: OptionalId::NONE,
            args: Some(args),
        });
        Ok(())
    }

    /// Records the device of a launch: index from `Device`, compute capability from `CC`, and
    /// name / SM count only from the raw page's `device__attribute_*` metrics.
    fn note_device(&mut self, launch: &Launch) {
        let display = launch.texts.get("device__attribute_display_name");
        if launch.device.is_none() && display.is_none() {
            return;
        }
        let index = launch.device.unwrap_or(0);
        let slot = *self.devices.entry(index).or_insert_with(|| {
            self.trace.devices.push(Device {
                rank: Some(self.rank),
                index,
                ..Device::default()
            });
            self.trace.devices.len() - 1
        });
        let Some(device) = self.trace.devices.get_mut(slot) else {
            return;
        };
        if device.compute_major.is_none() {
            if let Some((major, minor)) = launch.cc.as_deref().and_then(|cc| cc.split_once('.')) {
                device.compute_major = major.trim().parse().ok();
                device.compute_minor = minor.trim().parse().ok();
            }
        }
        if device.name.is_none() {
            device.name = display.cloned();
        }
        if device.sm_count.is_none() {
            device.sm_count = launch
                .number("device__attribute_multiprocessor_count", None)
                .and_then(Num::as_i64);
        }
    }

    fn finish(self) -> Trace {
        self.trace
    }
}

#[cfg(test)]
mod tests;
