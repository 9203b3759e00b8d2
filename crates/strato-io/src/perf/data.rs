//! The `perf.data` reader: the file's layout checked before `linux-perf-data` reads it (every
//! count and size it trusts), the attributes (which event each is to this importer), the
//! tracepoint field layouts from the file's tracing data, and the records turned into
//! [`super::Ev`]s for the state machine, sample call chains symbolized through [`Symbolizer`].

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use linux_perf_data::linux_perf_event_reader::{
    ClockId, CommonData, ContextSwitchRecord, EventRecord, PerfClock, PerfEventType,
    RawEventRecord, ReadFormat, RecordType, SampleFormat, TaskWasPreempted,
};
use linux_perf_data::{Feature, PerfFileReader, PerfFileRecord};
use rustc_hash::FxHashMap;
use strato_trace::Trace;

use super::state::{clock_info, Builder};
use super::symbols::{Symbolizer, PROT_EXEC};
use super::{is_page_fault, left_from_bits, syscall_name, Ev, Header};
use crate::error::{Error, ErrorKind, Result};
use crate::ImportOptions;

/// One tracepoint's field layout, from the format text in the file's tracing data.
#[derive(Debug, Default, Clone)]
pub(super) struct Format {
    pub(super) fields: FxHashMap<String, (usize, usize, bool)>,
}

impl Format {
    pub(super) fn int(&self, raw: &[u8], name: &str, little: bool) -> Option<i64> {
        let &(off, size, signed) = self.fields.get(name)?;
        let b = raw.get(off..off.checked_add(size)?)?;
        let mut v: u64 = 0;
        for i in 0..size {
            let byte = if little { b[size - 1 - i] } else { b[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(match (size, signed) {
            (1, true) => i64::from(v as u8 as i8),
            (2, true) => i64::from(v as u16 as i16),
            (4, true) => i64::from(v as u32 as i32),
            _ => v as i64,
        })
    }
}

/// Parses the format text of event `id` from the tracing data (`ID: N` then `field:` lines).
pub(super) fn tracepoint_format(tracing: &[u8], id: u64) -> Option<Format> {
    let needle = format!("\nID: {id}\n");
    let at = memchr::memmem::find(tracing, needle.as_bytes())?;
    let end = memchr::memmem::find(&tracing[at..], b"print fmt:").map_or(tracing.len(), |e| at + e);
    let text = String::from_utf8_lossy(&tracing[at..end]);
    let mut f = Format::default();
    for line in text.lines() {
        let line = line.trim();
        let Some(decl) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = decl.split(';').map(str::trim);
        let decl = parts.next()?;
        let name = decl
            .split_whitespace()
            .last()?
            .split('[')
            .next()?
            .to_owned();
        let mut off = None;
        let mut size = None;
        let mut signed = false;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                off = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("signed:") {
                signed = v == "1";
            }
        }
        if let (Some(o), Some(s)) = (off, size) {
            f.fields.insert(name, (o, s, signed));
        }
    }
    Some(f)
}

/// What an attribute (event) of a `perf.data` file is to this importer.
#[derive(Debug, Clone)]
pub(super) enum AttrKind {
    Switch(Format),
    Wakeup(Format),
    Migrate(Format),
    SysEnterRaw(Format),
    SysExitRaw(Format),
    SysEnter(String),
    SysExit(String),
    PageFault(String),
    Sample(String),
    Other,
}

/// The `perf.data` file header (`struct perf_file_header`): magic, its size, the size of one
/// attribute entry, the attribute, data and event-type sections, the feature bits.
pub(super) const PERF_HEADER_BYTES: u64 = 8 + 8 + 8 + 3 * 16 + 32;
/// `perf_event_attr` sizes perf writes range from 64 (`PERF_ATTR_SIZE_VER0`) to ~140 bytes;
/// an attribute entry of the file adds a 16-byte id section.
pub(super) const ATTR_SIZES: std::ops::RangeInclusive<u64> = 64..=4096;
/// `HEADER_EVENT_DESC` and `HEADER_SIMPLEPERF_META_INFO`: the feature sections the attributes
/// are read from.
pub(super) const FEATURE_EVENT_DESC: u32 = 12;
pub(super) const FEATURE_SIMPLEPERF_META_INFO: u32 = 129;

/// Checks, before `linux-perf-data` reads the file, every count and size in it that the crate
/// allocates from or adds up unchecked: the header's sections and the feature sections lie
/// within the file, the attribute size is one perf writes, the event description's counts and
/// the event-id sections fit in what is there. A damaged or hostile header would otherwise
/// make the reader allocate terabytes (an abort), overflow or divide by zero.
pub(super) fn check_layout(file: &mut std::fs::File) -> std::result::Result<(), String> {
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let head = read_at(file, len, 0, PERF_HEADER_BYTES).map_err(|e| format!("header: {e}"))?;
    let little = match &head[..8] {
        b"PERFILE2" => true,
        b"2ELIFREP" => false,
        _ => return Err("not a perf.data file (magic)".into()),
    };
    let u64_at = |b: &[u8], at: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        if little {
            u64::from_le_bytes(w)
        } else {
            u64::from_be_bytes(w)
        }
    };
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    };
    let within = |what: &str, offset: u64, size: u64| -> std::result::Result<(), String> {
        match offset.checked_add(size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(format!(
                "the {what} ({size} bytes at {offset}) lies beyond the end of the file ({len} bytes)"
            )),
        }
    };
    let header_size = u64_at(&head, 8);
    if !(PERF_HEADER_BYTES..=len).contains(&header_size) {
        return Err(format!(
            "header size {header_size} is not a perf.data header's"
        ));
    }
    let attr_size = u64_at(&head, 16);
    if !ATTR_SIZES.contains(&attr_size) {
        return Err(format!("attribute size {attr_size} is not one perf writes"));
    }
    let section = |at: usize| (u64_at(&head, at), u64_at(&head, at + 8));
    let (attrs, data, event_types) = (section(24), section(40), section(56));
    within("attribute section", attrs.0, attrs.1)?;
    within("data section", data.0, data.1)?;
    within("event-type section", event_types.0, event_types.1)?;
    // The feature sections' table follows the data; one entry per feature bit.
    let features: Vec<u32> = (0..256u32)
        .filter(|bit| u64_at(&head, 72 + (bit / 64) as usize * 8) >> (bit % 64) & 1 == 1)
        .collect();
    let table_at = data.0 + data.1;
    let table_len = features.len() as u64 * 16;
    within("feature table", table_at, table_len)?;
    let table = read_at(file, len, table_at, table_len).map_err(|e| e.to_string())?;
    let mut sections = FxHashMap::default();
    let mut total = 0u64;
    for (i, feature) in features.iter().enumerate() {
        let (offset, size) = (u64_at(&table, i * 16), u64_at(&table, i * 16 + 8));
        within(&format!("feature section {feature}"), offset, size)?;
        total = total.saturating_add(size);
        sections.insert(*feature, (offset, size));
    }
    if total > len {
        return Err(format!(
            "the feature sections add up to {total} bytes, more than the file ({len} bytes)"
        ));
    }
    // The attributes come from the first of these the reader finds.
    if let Some(&(offset, size)) = sections.get(&FEATURE_EVENT_DESC) {
        // nr, attr_size, then per event: attr, nr_ids, name (u32 length + bytes), ids.
        let desc = read_at(file, len, offset, size).map_err(|e| e.to_string())?;
        let short = || "the event description is cut short".to_string();
        let nr = u32_at(&desc, 0).ok_or_else(short)?;
        let desc_attr = u64::from(u32_at(&desc, 4).ok_or_else(short)?);
        if !ATTR_SIZES.contains(&desc_attr) {
            return Err(format!(
                "attribute size {desc_attr} in the event description is not one perf writes"
            ));
        }
        let mut at = 8u64;
        for _ in 0..nr {
            at = at.saturating_add(desc_attr);
            let nr_ids =
                u32_at(&desc, usize::try_from(at).unwrap_or(usize::MAX)).ok_or_else(short)?;
            let name_len =
                u32_at(&desc, usize::try_from(at + 4).unwrap_or(usize::MAX)).ok_or_else(short)?;
            at = at
                .saturating_add(8)
                .saturating_add(u64::from(name_len))
                .saturating_add(u64::from(nr_ids) * 8);
            if at > size {
                return Err(short());
            }
        }
    } else if event_types.1 != 0 || sections.contains_key(&FEATURE_SIMPLEPERF_META_INFO) {
        // Entries of an attribute and the (offset, size) of its event ids: in the event-type
        // section (old perf), or in the attribute section (simpleperf, whose attr_size counts
        // the id section).
        let (table, entry, ids_at) = if event_types.1 != 0 {
            (event_types, attr_size + 16, attr_size)
        } else {
            (attrs, attr_size, attr_size - 16)
        };
        let entries = read_at(file, len, table.0, table.1).map_err(|e| e.to_string())?;
        for start in (0..table.1 / entry).map(|i| i * entry + ids_at) {
            let start = start as usize;
            within(
                "event-id section",
                u64_at(&entries, start),
                u64_at(&entries, start + 8),
            )?;
        }
    }
    Ok(())
}

/// `len` bytes at `offset` of `file` (whose length is `file_len`; the range is checked first).
pub(super) fn read_at(
    file: &mut std::fs::File,
    file_len: u64,
    offset: u64,
    len: u64,
) -> std::result::Result<Vec<u8>, String> {
    if offset.checked_add(len).is_none_or(|end| end > file_len) {
        return Err(format!(
            "the file ends before byte {}",
            offset.saturating_add(len)
        ));
    }
    let mut buf = vec![0; usize::try_from(len).map_err(|e| e.to_string())?];
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(&mut buf))
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// Whether a SAMPLE record's call chain (if it has one) fits in the record. The reader
/// multiplies the recorded length by 8 unchecked (an overflow for a damaged length): this walks
/// to the length the way `linux_perf_event_reader::SampleRecord::parse` does. A record that
/// ends before the length is left to the reader (its own error).
pub(super) fn callchain_fits(record: &RawEventRecord<'_>) -> bool {
    let info = &record.parse_info;
    let format = info.sample_format;
    if !format.contains(SampleFormat::CALLCHAIN) {
        return true;
    }
    let data = record.data.as_slice();
    let little = matches!(info.endian, linux_perf_data::Endianness::LittleEndian);
    let word = |at: usize| -> Option<u64> {
        let w: [u8; 8] = data.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(w)
        } else {
            u64::from_be_bytes(w)
        })
    };
    let fixed = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ];
    let mut at = 8 * fixed.iter().filter(|f| format.contains(**f)).count();
    if format.contains(SampleFormat::READ) {
        let read = info.read_format;
        let times = [
            ReadFormat::TOTAL_TIME_ENABLED,
            ReadFormat::TOTAL_TIME_RUNNING,
        ]
        .iter()
        .filter(|f| read.contains(**f))
        .count();
        // As the reader walks it: a value, times, an id; or a count, times and the values.
        if read.contains(ReadFormat::GROUP) {
            at += 8 * (1 + times + usize::from(read.contains(ReadFormat::ID)));
        } else {
            let Some(nr) = word(at) else { return true };
            let each = if read.contains(ReadFormat::ID) { 16 } else { 8 };
            let values = usize::try_from(nr)
                .ok()
                .and_then(|nr| nr.checked_mul(each))
                .unwrap_or(usize::MAX);
            at = at.saturating_add(8 * (1 + times)).saturating_add(values);
        }
    }
    let Some(len) = word(at) else { return true };
    len <= (data.len().saturating_sub(at + 8) / 8) as u64
}

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an `MMAP2` record carries a build id, not an inode.
pub(super) const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Whether an `MMAP2` record's build id (if it has one) is at most the 20 bytes the kernel
/// writes: the reader asserts it (a panic on a damaged length). Its length byte follows pid,
/// tid, address, length and page offset.
pub(super) fn build_id_fits(record: &RawEventRecord<'_>) -> bool {
    record.misc & MISC_MMAP_BUILD_ID == 0
        || record
            .data
            .get(32..33)
            .is_none_or(|len| len.as_slice().first().is_none_or(|&len| len <= 20))
}

/// Imports a `perf.data` file (file mode; see the module docs).
pub fn import_data(path: &Path, options: &ImportOptions) -> Result<Trace> {
    let perr = |what: String| Error::new(path, ErrorKind::Perf(what));
    let mut file = std::fs::File::open(path).map_err(|e| Error::new(path, e))?;
    check_layout(&mut file).map_err(|e| perr(format!("not a readable perf.data file: {e}")))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::new(path, e))?;
    let reader = BufReader::with_capacity(1 << 20, file);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(reader)
        .map_err(|e| perr(format!("not a readable perf.data file: {e}")))?;
    let little = matches!(
        perf_file.endian(),
        linux_perf_data::Endianness::LittleEndian
    );
    let tracing = perf_file
        .feature_section_data(Feature::TRACING_DATA)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let mut clockid: Option<ClockId> = None;
    let mut kinds = Vec::new();
    for attr in perf_file.event_attributes() {
        let name = attr.name().unwrap_or("").to_owned();
        let a = attr.attributes();
        if let PerfClock::ClockId(c) = a.clock {
            clockid = Some(c);
        }
        let tp = |what: &str| -> Result<Format> {
            match a.type_ {
                PerfEventType::Tracepoint(id) => tracepoint_format(&tracing, id).ok_or_else(|| {
                    perr(format!(
                        "event {name}: its format (tracepoint id {id}) is not in the file's \
                         tracing data; {what} cannot be read"
                    ))
                }),
                _ => Err(perr(format!("event {name} is not a tracepoint"))),
            }
        };
        let kind = if name.ends_with("sched_switch") {
            AttrKind::Switch(tp("switches")?)
        } else if name.ends_with("sched_wakeup") || name.ends_with("sched_wakeup_new") {
            AttrKind::Wakeup(tp("wakeups")?)
        } else if name.ends_with("sched_migrate_task") {
            AttrKind::Migrate(tp("migrations")?)
        } else if name == "raw_syscalls:sys_enter" {
            AttrKind::SysEnterRaw(tp("system calls")?)
        } else if name == "raw_syscalls:sys_exit" {
            AttrKind::SysExitRaw(tp("system calls")?)
        } else if let Some(n) = name.strip_prefix("syscalls:sys_enter_") {
            AttrKind::SysEnter(n.to_owned())
        } else if let Some(n) = name.strip_prefix("syscalls:sys_exit_") {
            AttrKind::SysExit(n.to_owned())
        } else if is_page_fault(&name) {
            AttrKind::PageFault(name.clone())
        } else if matches!(a.type_, PerfEventType::Tracepoint(_)) {
            AttrKind::Other
        } else {
            AttrKind::Sample(if name.is_empty() {
                "sample".into()
            } else {
                name.clone()
            })
        };
        kinds.push(kind);
    }
    let mut meta = serde_json::Map::new();
    for (key, value) in [
        ("hostname", perf_file.hostname().ok().flatten()),
        ("os_release", perf_file.os_release().ok().flatten()),
        ("perf_version", perf_file.perf_version().ok().flatten()),
        ("arch", perf_file.arch().ok().flatten()),
    ] {
        if let Some(v) = value {
            meta.insert(key.into(), v.into());
        }
    }
    let host = perf_file.hostname().ok().flatten().map(str::to_owned);
    if let Ok(Some(cd)) = perf_file.clock_data() {
        meta.insert(
            "clock_data".into(),
            serde_json::json!({"clockid": cd.clockid, "wall_clock_ns": cd.wall_clock_ns,
                "clockid_time_ns": cd.clockid_time_ns}),
        );
    }
    let mut builder = Builder::new(path, options);
    builder.trace.ranks[0].host = host;
    let mut comms: FxHashMap<i32, String> = FxHashMap::default();
    let mut symbolizer = Symbolizer::default();
    loop {
        let record = record_iter.next_record(&mut perf_file).map_err(|e| {
            perr(format!(
                "a record cannot be read (truncated or corrupt?): {e}"
            ))
        })?;
        let Some(record) = record else { break };
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let record_type = record.record_type;
        let common: CommonData = match record.common_data() {
            Ok(c) => c,
            Err(_) => continue,
        };
        if record_type == RecordType::SAMPLE && !callchain_fits(&record) {
            return Err(perr(
                "a SAMPLE record does not parse: its call chain is longer than the record".into(),
            ));
        }
        if record_type == RecordType::MMAP2 && !build_id_fits(&record) {
            return Err(perr(
                "a MMAP2 record does not parse: its build id is longer than 20 bytes".into(),
            ));
        }
        let parsed = record
            .parse()
            .map_err(|e| perr(format!("a {record_type:?} record does not parse: {e}")))?;
        // The code mappings, with or without a time: a process's maps as perf keeps them
        // (inherited at fork, replaced at exec).
        let code = match &parsed {
            EventRecord::Mmap(m) if m.is_executable => {
                Some((m.pid, m.address, m.length, m.page_offset, &m.path))
            }
            EventRecord::Mmap2(m) if m.protection & PROT_EXEC != 0 => {
                Some((m.pid, m.address, m.length, m.page_offset, &m.path))
            }
            EventRecord::Fork(f) if f.pid != f.ppid => {
                symbolizer.fork(f.ppid, f.pid);
                None
            }
            EventRecord::Comm(c) if c.is_execve => {
                symbolizer.exec(c.pid);
                None
            }
            _ => None,
        };
        if let Some((pid, start, length, page_offset, path)) = code {
            symbolizer.map(pid, start, length, page_offset, &path.as_slice());
        }
        let Some(ts) = common.timestamp.and_then(|t| i64::try_from(t).ok()) else {
            if record_type == RecordType::SAMPLE {
                builder.count("records_without_time");
            }
            continue;
        };
        let header = |tid: Option<i32>| Header {
            ts,
            pid: common.pid,
            tid: tid.or(common.tid).unwrap_or(-1),
        };
        let ev = match parsed {
            EventRecord::Sample(s) => {
                let raw: Vec<u8> = s.raw.map(|r| r.as_slice().into_owned()).unwrap_or_default();
                let kind = kinds.get(attr_index).cloned().unwrap_or(AttrKind::Other);
                let int = |f: &Format, name: &str| f.int(&raw, name, little);
                let missing = |what: &str| perr(format!("a {what} sample lacks its fields"));
                match kind {
                    AttrKind::Switch(f) => Ev::Switch {
                        prev: int(&f, "prev_pid").ok_or_else(|| missing("sched_switch"))? as i32,
                        left: left_from_bits(
                            int(&f, "prev_state").ok_or_else(|| missing("sched_switch"))?,
                        ),
                        next: int(&f, "next_pid").ok_or_else(|| missing("sched_switch"))? as i32,
                    },
                    AttrKind::Wakeup(f) => Ev::Wakeup {
                        woken: int(&f, "pid").ok_or_else(|| missing("sched_wakeup"))? as i32,
                    },
                    AttrKind::Migrate(f) => Ev::Migrate {
                        task: int(&f, "pid").ok_or_else(|| missing("sched_migrate_task"))? as i32,
                        from: int(&f, "orig_cpu").unwrap_or(-1),
                        to: int(&f, "dest_cpu").unwrap_or(-1),
                    },
                    AttrKind::SysEnterRaw(f) => Ev::SysEnter {
                        name: syscall_name(int(&f, "id").ok_or_else(|| missing("sys_enter"))?),
                    },
                    AttrKind::SysExitRaw(f) => Ev::SysExit {
                        name: Some(syscall_name(
                            int(&f, "id").ok_or_else(|| missing("sys_exit"))?,
                        )),
                    },
                    AttrKind::SysEnter(n) => Ev::SysEnter { name: n },
                    AttrKind::SysExit(n) => Ev::SysExit { name: Some(n) },
                    AttrKind::PageFault(n) => Ev::PageFault { event: n },
                    AttrKind::Sample(n) => Ev::Sample {
                        event: n,
                        frames: symbolizer.frames(
                            s.pid.or(common.pid).unwrap_or(-1),
                            s.ip,
                            s.callchain
                                .map(|c| (0..c.len()).filter_map(|i| c.get(i)).collect()),
                        ),
                    },
                    AttrKind::Other => Ev::Other,
                }
            }
            EventRecord::ContextSwitch(cs) => match cs {
                ContextSwitchRecord::Out { preempted, .. } => Ev::SwitchOut {
                    preempted: preempted == TaskWasPreempted::Yes,
                },
                ContextSwitchRecord::In { .. } => Ev::SwitchIn,
            },
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                comms.insert(c.tid, name);
                let t = builder.thread(c.tid);
                t.pid = Some(c.pid);
                continue;
            }
            EventRecord::Fork(f) => {
                builder.handle(
                    header(None),
                    Ev::Fork {
                        pid: f.pid,
                        tid: f.tid,
                    },
                );
                continue;
            }
            EventRecord::Exit(f) => {
                builder.handle(header(Some(f.tid)), Ev::Exit);
                continue;
            }
            EventRecord::Lost(l) => {
                builder.trace.ranks[0].notes.count("lost_records", l.count);
                continue;
            }
            _ => continue,
        };
        builder.handle(header(None), ev);
    }
    for (tid, name) in comms {
        if let Some(t) = builder.threads.get_mut(&tid) {
            t.comm = Some(name);
        }
    }
    if builder.trace.ranks[0].notes.events_read == 0 {
        return Err(perr(
            "no sample records (an empty or unfinished recording?)".into(),
        ));
    }
    let clock = clock_info(clockid, 1, "perf.data attributes");
    builder.finish(path, clock, meta)
}
