//! Decoding a `*.strato` file's bytes into a [`Recording`]: whole chunks in order, stopping at
//! the first torn or corrupt chunk (everything before it is kept). No file I/O: the caller
//! reads the bytes (the `strato-io` importer does).

use crate::format::{
    tag, Dec, Malformed, CHUNK_HEADER_LEN, CHUNK_MAGIC, FLAG_ARGS, FLAG_CORR, MAGIC,
};

/// Why a recording could not be decoded at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a stratoscope recording (no STRATREC magic)")]
    NotARecording,
    #[error("chunk {chunk}: {source}")]
    Malformed { chunk: usize, source: Malformed },
    #[error("chunk {chunk}: unknown record tag {tag:#04x}")]
    UnknownTag { chunk: usize, tag: u8 },
    #[error("recording has no PROCESS record")]
    NoProcess,
}

/// The PROCESS record: who wrote the file and the clock pair read at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i64,
    pub ppid: i64,
    /// CLOCK_MONOTONIC at start.
    pub mono_ns: i64,
    /// CLOCK_REALTIME read right after `mono_ns`.
    pub wall_ns: i64,
    pub host: String,
    pub component: String,
    pub argv_json: String,
}

/// A track definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrackDef {
    Thread { tid: i64, name: u32 },
    Queue { device: i64, queue: i64, name: u32 },
    Counter { name: u32, unit: u32, device: i64 },
}

/// A CLOCK record.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockRecord {
    pub name: u32,
    pub domain: u32,
    pub offset_ns: i64,
    pub drift_ppb: f64,
    pub anchor_ns: i64,
    pub error_ns: Option<i64>,
    pub method: u32,
}

/// A DEVICE record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRecord {
    pub index: i64,
    pub name: u32,
    pub props_json: String,
}

/// One timed record. String fields are ids into [`Recording::strings`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Begin {
        track: u32,
        ts: i64,
        level: u8,
        category: u32,
        name: u32,
        correlation: Option<u64>,
        args: Option<String>,
    },
    End {
        track: u32,
        ts: i64,
    },
    Span {
        track: u32,
        start: i64,
        end: i64,
        level: u8,
        category: u32,
        name: u32,
        correlation: Option<u64>,
        args: Option<String>,
    },
    Instant {
        track: u32,
        ts: i64,
        level: u8,
        category: u32,
        name: u32,
        args: Option<String>,
    },
    Counter {
        track: u32,
        ts: i64,
        value: f64,
    },
    Untraced {
        track: u32,
        ts: i64,
        count: u64,
    },
    Start {
        ts: i64,
        level: u64,
    },
    Stop {
        ts: i64,
    },
    TrackName {
        track: u32,
        name: u32,
    },
}

/// A decoded recording (one file).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recording {
    pub process: Option<ProcessInfo>,
    pub process_name: Option<u32>,
    /// String table; index = id, id 0 = "".
    pub strings: Vec<String>,
    /// Track definitions; index = track id.
    pub tracks: Vec<Option<TrackDef>>,
    pub events: Vec<Event>,
    /// (key, JSON value text).
    pub metadata: Vec<(u32, String)>,
    pub clocks: Vec<ClockRecord>,
    pub devices: Vec<DeviceRecord>,
    /// Whole chunks loaded.
    pub chunks: usize,
    /// Bytes after the last good chunk (a torn tail), 0 for a clean file.
    pub torn_bytes: usize,
}

impl Recording {
    /// The text of string `id` ("" when unknown).
    pub fn str(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// True when the recorder stopped cleanly (a STOP record is present).
    pub fn stopped(&self) -> bool {
        self.events.iter().any(|e| matches!(e, Event::Stop { .. }))
    }
}

/// True when `bytes` start with the recording magic.
pub fn is_recording(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Decodes a whole file's bytes. A torn or corrupt chunk ends the recording; everything before
/// it is returned (`torn_bytes` says how much was dropped).
pub fn decode(bytes: &[u8]) -> Result<Recording, DecodeError> {
    if !is_recording(bytes) {
        return Err(DecodeError::NotARecording);
    }
    let mut rec = Recording {
        strings: vec![String::new()],
        ..Recording::default()
    };
    let mut pos = MAGIC.len();
    while pos < bytes.len() {
        let Some(header) = bytes.get(pos..pos + CHUNK_HEADER_LEN) else {
            break;
        };
        if &header[0..4] != CHUNK_MAGIC {
            break;
        }
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        let crc = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        let start = pos + CHUNK_HEADER_LEN;
        let Some(payload) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
            break;
        };
        if crate::format::crc32(payload) != crc {
            break;
        }
        let chunk = rec.chunks;
        decode_chunk(payload, &mut rec).map_err(|e| match e {
            ChunkError::Malformed(source) => DecodeError::Malformed { chunk, source },
            ChunkError::UnknownTag(tag) => DecodeError::UnknownTag { chunk, tag },
        })?;
        rec.chunks += 1;
        pos = start + len;
    }
    rec.torn_bytes = bytes.len() - pos;
    if rec.process.is_none() {
        if rec.chunks == 0 {
            // Only the magic (or a torn first chunk) made it to disk: an empty recording.
            return Ok(rec);
        }
        return Err(DecodeError::NoProcess);
    }
    Ok(rec)
}

enum ChunkError {
    Malformed(Malformed),
    UnknownTag(u8),
}

impl From<Malformed> for ChunkError {
    fn from(m: Malformed) -> Self {
        ChunkError::Malformed(m)
    }
}

fn set_at<T>(v: &mut Vec<Option<T>>, index: usize, value: T) {
    if v.len() <= index {
        v.resize_with(index + 1, || None);
    }
    v[index] = Some(value);
}

fn decode_chunk(payload: &[u8], rec: &mut Recording) -> Result<(), ChunkError> {
    let mut d = Dec::new(payload);
    while !d.done() {
        let t = d.u8()?;
        match t {
            tag::PROCESS => {
                rec.process = Some(ProcessInfo {
                    pid: d.sv()?,
                    ppid: d.sv()?,
                    mono_ns: d.sv()?,
                    wall_ns: d.sv()?,
                    host: d.text()?,
                    component: d.text()?,
                    argv_json: d.text()?,
                });
            }
            tag::STRING => {
                let id = d.u32()? as usize;
                let text = d.text()?;
                if rec.strings.len() <= id {
                    rec.strings.resize(id + 1, String::new());
                }
                rec.strings[id] = text;
            }
            tag::THREAD_TRACK => {
                let id = d.u32()? as usize;
                let def = TrackDef::Thread {
                    tid: d.sv()?,
                    name: d.u32()?,
                };
                set_at(&mut rec.tracks, id, def);
            }
            tag::QUEUE_TRACK => {
                let id = d.u32()? as usize;
                let def = TrackDef::Queue {
                    device: d.sv()?,
                    queue: d.sv()?,
                    name: d.u32()?,
                };
                set_at(&mut rec.tracks, id, def);
            }
            tag::COUNTER_TRACK => {
                let id = d.u32()? as usize;
                let def = TrackDef::Counter {
                    name: d.u32()?,
                    unit: d.u32()?,
                    device: d.sv()?,
                };
                set_at(&mut rec.tracks, id, def);
            }
            tag::PROCESS_NAME => rec.process_name = Some(d.u32()?),
            tag::TRACK_NAME => {
                let track = d.u32()?;
                let name = d.u32()?;
                rec.events.push(Event::TrackName { track, name });
            }
            tag::METADATA => {
                let key = d.u32()?;
                let json = d.text()?;
                rec.metadata.push((key, json));
            }
            tag::CLOCK => {
                let name = d.u32()?;
                let domain = d.u32()?;
                let offset_ns = d.sv()?;
                let drift_ppb = d.f64()?;
                let anchor_ns = d.sv()?;
                let error = d.sv()?;
                let method = d.u32()?;
                rec.clocks.push(ClockRecord {
                    name,
                    domain,
                    offset_ns,
                    drift_ppb,
                    anchor_ns,
                    error_ns: (error >= 0).then_some(error),
                    method,
                });
            }
            tag::DEVICE => {
                let index = d.sv()?;
                let name = d.u32()?;
                let props_json = d.text()?;
                rec.devices.push(DeviceRecord {
                    index,
                    name,
                    props_json,
                });
            }
            tag::BEGIN => {
                let track = d.u32()?;
                let ts = d.ts()?;
                let level = d.u8()?;
                let category = d.u32()?;
                let name = d.u32()?;
                let (correlation, args) = flagged(&mut d, true)?;
                rec.events.push(Event::Begin {
                    track,
                    ts,
                    level,
                    category,
                    name,
                    correlation,
                    args,
                });
            }
            tag::END => {
                let track = d.u32()?;
                let ts = d.ts()?;
                rec.events.push(Event::End { track, ts });
            }
            tag::SPAN => {
                let track = d.u32()?;
                let start = d.ts()?;
                let dur = d.uv()?;
                let level = d.u8()?;
                let category = d.u32()?;
                let name = d.u32()?;
                let (correlation, args) = flagged(&mut d, true)?;
                rec.events.push(Event::Span {
                    track,
                    start,
                    end: start.saturating_add(i64::try_from(dur).unwrap_or(i64::MAX)),
                    level,
                    category,
                    name,
                    correlation,
                    args,
                });
            }
            tag::INSTANT => {
                let track = d.u32()?;
                let ts = d.ts()?;
                let level = d.u8()?;
                let category = d.u32()?;
                let name = d.u32()?;
                let (_, args) = flagged(&mut d, false)?;
                rec.events.push(Event::Instant {
                    track,
                    ts,
                    level,
                    category,
                    name,
                    args,
                });
            }
            tag::COUNTER => {
                let track = d.u32()?;
                let ts = d.ts()?;
                let value = d.f64()?;
                rec.events.push(Event::Counter { track, ts, value });
            }
            tag::UNTRACED => {
                let track = d.u32()?;
                let ts = d.ts()?;
                let count = d.uv()?;
                rec.events.push(Event::Untraced { track, ts, count });
            }
            tag::START => {
                let ts = d.ts()?;
                let level = d.uv()?;
                rec.events.push(Event::Start { ts, level });
            }
            tag::STOP => {
                let ts = d.ts()?;
                rec.events.push(Event::Stop { ts });
            }
            other => return Err(ChunkError::UnknownTag(other)),
        }
    }
    Ok(())
}

fn flagged(d: &mut Dec<'_>, has_corr: bool) -> Result<(Option<u64>, Option<String>), Malformed> {
    let flags = d.u8()?;
    let corr = if has_corr && flags & FLAG_CORR != 0 {
        Some(d.uv()?)
    } else {
        None
    };
    let args = if flags & FLAG_ARGS != 0 {
        Some(d.text()?)
    } else {
        None
    };
    Ok((corr, args))
}
