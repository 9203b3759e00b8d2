//! The tables that are not events, read whole: strings, args blobs (all of them, or only
//! visited), ranks, processes, tracks and devices.

use std::path::Path;

use arrow::datatypes::Float64Type;
use strato_trace::metadata::{JsonObject, SourceMetadata};
use strato_trace::{
    Device, ImportNotes, Process, Rank, RankId, SourceFormat, StringTable, Trace, Track, TrackKind,
};

use super::table::Table;
use crate::error::Result;
use crate::meta::Metadata;
use crate::schema;

pub(super) fn read_strings(dir: &Path, meta: &Metadata) -> Result<StringTable> {
    let mut strings = StringTable::default();
    Table::open(dir, meta, &schema::STRINGS)?.for_each(|rows| {
        let id = rows.u32("id")?;
        let text = rows.text("text")?;
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let text = text.req(i)?;
            let row = rows.base + i;
            if row == 0 && !text.is_empty() {
                return Err(rows.bad("text", i, "string 0 must be the empty string".into()));
            }
            if strings.intern(text).0 as usize != row {
                return Err(rows.bad("text", i, format!("duplicate string {text:?}")));
            }
        }
        Ok(())
    })?;
    Ok(strings)
}

/// Reads the blobs batch by batch into the trace's arena (no allocation per blob).
pub(super) fn read_args(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::ARGS)?.for_each(|rows| {
        let id = rows.u32("id")?;
        let json = rows.text("json")?;
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            trace.args.push(json.req(i)?);
        }
        Ok(())
    })
}

/// See [`crate::visit_args`].
pub(crate) fn visit_args(dir: &Path, visit: &mut dyn FnMut(&str) -> bool) -> Result<()> {
    let meta = Metadata::read(dir)?;
    let mut going = true;
    Table::open(dir, &meta, &schema::ARGS)?.for_each(|rows| {
        if !going {
            return Ok(());
        }
        let json = rows.text("json")?;
        for i in 0..rows.len() {
            if !visit(json.req(i)?) {
                going = false;
                break;
            }
        }
        Ok(())
    })
}

pub(super) fn read_ranks(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::RANKS)?.for_each(|rows| {
        let id = rows.u32("id")?;
        let (rank, world_size) = (rows.i64("rank")?, rows.i64("world_size")?);
        let (source, format) = (rows.text("source")?, rows.text("format")?);
        let (host, metadata_json) = (rows.text("host")?, rows.text("metadata_json")?);
        let notes_json = match rows.has("import_notes_json") {
            true => Some(rows.text("import_notes_json")?),
            false => None,
        };
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let format = SourceFormat::from_name(format.req(i)?);
            let metadata = match metadata_json.opt(i)? {
                None => SourceMetadata::None,
                Some(text) => SourceMetadata::from_json(text, format.clone())
                    .map_err(|e| rows.bad("metadata_json", i, format!("not a JSON object: {e}")))?,
            };
            trace.ranks.push(Rank {
                rank: rank.opt(i),
                world_size: world_size.opt(i),
                source: source.req(i)?.to_owned(),
                format,
                host: host.opt(i)?.map(str::to_owned),
                metadata,
                notes: match notes_json.as_ref().map(|c| c.opt(i)).transpose()?.flatten() {
                    None => ImportNotes::default(),
                    Some(text) => ImportNotes::from_json(text).map_err(|e| {
                        rows.bad("import_notes_json", i, format!("not import notes: {e}"))
                    })?,
                },
            });
        }
        Ok(())
    })
}

pub(super) fn read_processes(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::PROCESSES)?.for_each(|rows| {
        let (rank, pid) = (rows.u32("rank")?, rows.i64("pid")?);
        let (name, labels) = (rows.text("name")?, rows.text("labels")?);
        for i in 0..rows.len() {
            trace.processes.push(Process {
                rank: RankId(rank.req(i)?),
                pid: pid.req(i)?,
                name: name.opt(i)?.map(str::to_owned),
                labels: labels.opt(i)?.map(str::to_owned),
            });
        }
        Ok(())
    })
}

pub(super) fn read_tracks(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::TRACKS)?.for_each(|rows| {
        let (id, rank, kind) = (rows.u32("id")?, rows.u32("rank")?, rows.text("kind")?);
        let (pid, tid) = (rows.i64("pid")?, rows.i64("tid")?);
        let (device, queue) = (rows.i64("device")?, rows.i64("queue")?);
        let (counter_name, counter_unit) = (rows.text("counter_name")?, rows.text("counter_unit")?);
        let (custom_group, custom_name) = (rows.text("custom_group")?, rows.text("custom_name")?);
        let (name, sort_index) = (rows.text("name")?, rows.i64("sort_index")?);
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let kind = match kind.req(i)? {
                "Thread" => TrackKind::Thread {
                    pid: pid.req(i)?,
                    tid: tid.req(i)?,
                },
                "DeviceQueue" => TrackKind::DeviceQueue {
                    device: device.req(i)?,
                    queue: queue.req(i)?,
                },
                "Counter" => TrackKind::Counter {
                    pid: pid.opt(i),
                    device: device.opt(i),
                    name: counter_name.req(i)?.to_owned(),
                    unit: counter_unit.req(i)?.to_owned(),
                },
                "Custom" => TrackKind::Custom {
                    group: custom_group.req(i)?.to_owned(),
                    name: custom_name.req(i)?.to_owned(),
                },
                other => {
                    return Err(rows.bad("kind", i, format!("unknown track kind {other:?}")));
                }
            };
            trace.tracks.push(Track {
                rank: RankId(rank.req(i)?),
                kind,
                name: name.opt(i)?.map(str::to_owned),
                sort_index: sort_index.opt(i),
            });
        }
        Ok(())
    })
}

pub(super) fn read_devices(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::DEVICES)?.for_each(|rows| {
        let (rank, index, name) = (rows.u32("rank")?, rows.i64("index")?, rows.text("name")?);
        let sm_count = rows.i64("sm_count")?;
        let total_memory_bytes = rows.i64("total_memory_bytes")?;
        let (major, minor) = (rows.i64("compute_major")?, rows.i64("compute_minor")?);
        let clock_rate_khz = rows.i64("clock_rate_khz")?;
        let bandwidth = rows.prim::<Float64Type>("memory_bandwidth_bytes_per_s")?;
        let extra_json = rows.text("extra_json")?;
        for i in 0..rows.len() {
            let extra = match extra_json.opt(i)? {
                None => JsonObject::default(),
                Some(text) => JsonObject::parse(text)
                    .map_err(|e| rows.bad("extra_json", i, format!("not a JSON object: {e}")))?,
            };
            trace.devices.push(Device {
                rank: rank.opt(i).map(RankId),
                index: index.req(i)?,
                name: name.opt(i)?.map(str::to_owned),
                sm_count: sm_count.opt(i),
                total_memory_bytes: total_memory_bytes.opt(i),
                compute_major: major.opt(i),
                compute_minor: minor.opt(i),
                clock_rate_khz: clock_rate_khz.opt(i),
                memory_bandwidth_bytes_per_s: bandwidth.opt(i),
                extra,
            });
        }
        Ok(())
    })
}
