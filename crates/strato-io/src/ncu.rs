//! Nsight Compute CSV importer (`ncu --csv`). Owns reading both CSV shapes ncu writes — the
//! "details" long form (one row per (launch, metric)) and the `--page raw` wide form (one column
//! per metric, a second row of units) — into one device-kernel [`Span`] per profiled launch
//! carrying every metric and the derived roofline inputs in its args, and [`attach`], which
//! merges those metrics into the matching kernels of a timeline imported beside them.
//!
//! ncu serializes kernels and records no timestamps, so spans are placed synthetically: in
//! launch (ID) order, back to back, each as long as its `gpu__time_duration.sum`. The format is
//! described in `docs/formats/ncu.md`.

use std::borrow::Cow;
use std::io::{BufRead, Read};
use std::path::Path;

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value};
use strato_trace::{
    parse_decimal_to_ns, Device, Level, Process, Rank, RankId, SourceFormat, Span, Trace, TrackId,
    TrackIndexHandle, TrackKind,
};

use crate::{input::Input, Error, ErrorKind, ImportOptions, Result};

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

/// Attaches the kernel metrics in `metrics` (an imported ncu trace) to the matching kernels of
/// `timeline`; metrics without a match are appended as their own rank.
///
/// Matching rule. Timeline kernels are the spans on device-queue tracks with level
/// `DeviceKernel` in ranks whose format is not `ncu`. ncu launches are taken in ID (launch)
/// order. For an ncu launch named `N`:
/// - if some timeline kernel is named exactly `N`, the k-th ncu launch named `N` matches the
///   k-th timeline kernel named `N` in start order (ties by span order);
/// - otherwise it matches the earliest not yet matched timeline kernel whose name matches by
///   short name: both names reduced to their function identifier (Itanium-mangled names
///   demangled to the last source name; return type, scopes, template and parameter lists
///   removed) are equal, or one name contains the other's short name as a whole identifier.
///   Timeline names that some ncu launch matches exactly are reserved for exact matches.
///
/// A matched span gets its args rewritten: the existing args JSON object (a non-object blob is
/// kept under `"original_args"`) plus key `"ncu"` holding the launch's args object (`metrics`,
/// launch configuration, `flops`, `dram_bytes`, `duration_ns`, `occupancy_pct`, ...). Launches
/// left unmatched (ncu profiled more launches of a name than the timeline holds, or a kernel
/// the timeline lacks) are appended as their own `ncu` rank with their synthetic placement.
pub fn attach(timeline: &mut Trace, metrics: Trace) {
    let ncu_ranks: FxHashSet<u32> = timeline
        .ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.format == FORMAT)
        .map(|(i, _)| i as u32)
        .collect();
    // Timeline kernels by name, in start order.
    let mut by_name: FxHashMap<String, Vec<usize>> = FxHashMap::default();
    for (i, span) in timeline.spans.iter().enumerate() {
        let Some(track) = timeline.tracks.get(span.track.0 as usize) else {
            continue;
        };
        if track.is_device()
            && span.level == Level::DeviceKernel
            && !ncu_ranks.contains(&track.rank.0)
        {
            by_name
                .entry(timeline.str(span.name).to_owned())
                .or_default()
                .push(i);
        }
    }
    for list in by_name.values_mut() {
        list.sort_by_key(|&i| (timeline.spans[i].start, i));
    }

    let launches: Vec<usize> = (0..metrics.spans.len()).collect();
    let exact_names: FxHashSet<&str> = launches
        .iter()
        .map(|&i| metrics.str(metrics.spans[i].name))
        .filter(|n| by_name.contains_key(*n))
        .collect();
    let mut next_exact: FxHashMap<&str, usize> = FxHashMap::default();
    let mut fallback_pools: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    let mut consumed: FxHashSet<usize> = FxHashSet::default();
    let mut matches: Vec<(usize, usize)> = Vec::new();
    let mut unmatched: Vec<usize> = Vec::new();
    for &launch in &launches {
        let name = metrics.str(metrics.spans[launch].name);
        let found = if let Some(list) = by_name.get(name) {
            let k = next_exact.entry(name).or_insert(0);
            let hit = list.get(*k).copied();
            *k += 1;
            hit
        } else {
            let pool = fallback_pools.entry(name).or_insert_with(|| {
                let short = short_name(name);
                let mut pool: Vec<usize> = by_name
                    .iter()
                    .filter(|(tl, _)| !exact_names.contains(tl.as_str()))
                    .filter(|(tl, _)| names_match(name, &short, tl))
                    .flat_map(|(_, list)| list.iter().copied())
                    .collect();
                pool.sort_by_key(|&i| (timeline.spans[i].start, i));
                pool
            });
            pool.iter().copied().find(|i| !consumed.contains(i))
        };
        match found {
            Some(span) => {
                consumed.insert(span);
                matches.push((span, launch));
            }
            None => unmatched.push(launch),
        }
    }

    for (span, launch) in matches {
        let ncu_args = metrics
            .args_text(metrics.spans[launch].args)
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .unwrap_or_else(|| Value::Object(Map::new()));
        let mut object = match timeline.args_text(timeline.spans[span].args) {
            None => Map::new(),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                _ => {
                    let mut map = Map::new();
                    map.insert("original_args".into(), Value::String(text.to_owned()));
                    map
                }
            },
        };
        object.insert("ncu".into(), ncu_args);
        let id = timeline.add_args(&Value::Object(object).to_string());
        timeline.spans[span].args = Some(id);
    }
    if !unmatched.is_empty() {
        timeline.append(subset(&metrics, &unmatched));
    }
}

/// A trace holding only the spans `keep` of `source`, with their ranks, processes, devices and
/// tracks.
fn subset(source: &Trace, keep: &[usize]) -> Trace {
    let mut out = Trace::default();
    let mut ranks: FxHashMap<u32, RankId> = FxHashMap::default();
    let mut tracks: FxHashMap<u32, TrackId> = FxHashMap::default();
    for &i in keep {
        let span = &source.spans[i];
        let Some(track) = source.tracks.get(span.track.0 as usize) else {
            continue;
        };
        let old_rank = track.rank;
        let rank = match ranks.get(&old_rank.0) {
            Some(&r) => r,
            None => {
                let Some(info) = source.ranks.get(old_rank.0 as usize) else {
                    continue;
                };
                let r = out.add_rank(info.clone());
                for p in source.processes.iter().filter(|p| p.rank == old_rank) {
                    out.processes.push(Process {
                        rank: r,
                        ..p.clone()
                    });
                }
                for d in source.devices.iter().filter(|d| d.rank == Some(old_rank)) {
                    out.devices.push(Device {
                        rank: Some(r),
                        ..d.clone()
                    });
                }
                ranks.insert(old_rank.0, r);
                r
            }
        };
        let track_id = *tracks.entry(span.track.0).or_insert_with(|| {
            out.add_track(strato_trace::Track {
                rank,
                ..track.clone()
            })
        });
        let name = out.intern(source.str(span.name));
        let category = out.intern(source.str(span.category));
        let args = source.args_text(span.args).map(|t| out.add_args(t));
        out.spans.push(Span {
            track: track_id,
            name,
            category,
            args,
            ..span.clone()
        });
    }
    out.clock = source.clock.clone();
    out
}

/// True when timeline kernel `timeline_name` matches ncu launch `ncu_name` (whose short name is
/// `ncu_short`) by short name: equal short names, or whole-identifier containment either way.
fn names_match(ncu_name: &str, ncu_short: &str, timeline_name: &str) -> bool {
    let tl_short = short_name(timeline_name);
    (!ncu_short.is_empty() && ncu_short == tl_short)
        || contains_identifier(timeline_name, ncu_short)
        || contains_identifier(ncu_name, &tl_short)
}

/// True when `needle` occurs in `haystack` with no identifier character on either side.
fn contains_identifier(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        !is_ident(before) && !is_ident(after)
    })
}

/// The function identifier of a kernel name: `void ns::gemm<32>(const float *, int)` ->
/// `gemm`; `_ZN12_GLOBAL__N_14gemmILi32EEEvPKf` -> `gemm`; `ampere_sgemm_128x64_tn` as is.
fn short_name(name: &str) -> String {
    let name = name.trim();
    if let Some(ident) = itanium_last_name(name) {
        return ident;
    }
    let cleaned = name
        .replace("(anonymous namespace)", "")
        .replace("<unnamed>", "");
    let mut depth = 0i32;
    let mut last = String::new();
    let mut token = String::new();
    for c in cleaned.chars() {
        let ident_char = c.is_alphanumeric() || c == '_';
        if depth == 0 && ident_char {
            token.push(c);
            continue;
        }
        if !token.is_empty() {
            last = std::mem::take(&mut token);
        }
        match c {
            '(' if depth == 0 && !last.is_empty() => return last,
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth = (depth - 1).max(0),
            _ => {}
        }
    }
    if !token.is_empty() {
        last = token;
    }
    last
}

/// The last source name of an Itanium-mangled function name (`_Z...`), or `None`.
fn itanium_last_name(name: &str) -> Option<String> {
    let rest = name.strip_prefix("_Z")?.as_bytes();
    let mut i = 0;
    let skip = |i: &mut usize, b: u8| {
        if rest.get(*i) == Some(&b) {
            *i += 1;
        }
    };
    skip(&mut i, b'L');
    skip(&mut i, b'N');
    while matches!(rest.get(i), Some(b'r' | b'V' | b'K')) {
        i += 1;
    }
    if rest.get(i..i + 2) == Some(b"St") {
        i += 2;
    }
    let mut last = None;
    while rest.get(i).is_some_and(u8::is_ascii_digit) {
        let start = i;
        while rest.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let len: usize = std::str::from_utf8(&rest[start..i]).ok()?.parse().ok()?;
        let ident = rest.get(i..i.checked_add(len)?)?;
        last = Some(String::from_utf8_lossy(ident).into_owned());
        i += len;
    }
    last
}

// ---------------------------------------------------------------------------------------------
// Header and columns.

/// The header line and what came before it.
struct Header {
    fields: Vec<String>,
    /// 1-based line number of the header in the file.
    line: u64,
    /// Program output and `==PROF==` lines before the header (bounded).
    preamble: Vec<String>,
}

/// Reads lines until the ncu header: a line starting with `"ID"` (or `ID,`) whose fields
/// include `Kernel Name`. Everything before it is program output or ncu log lines.
fn find_header(path: &Path, reader: &mut Box<dyn BufRead + Send>) -> Result<Header> {
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut read = 0u64;
    let mut preamble = Vec::new();
    loop {
        line.clear();
        let n = (&mut *reader)
            .take(MAX_PREAMBLE_BYTES.saturating_sub(read))
            .read_until(b'\n', &mut line)
            .map_err(|e| crate::input::classify(path, e))?;
        if n == 0 {
            return Err(Error::new(
                path,
                ErrorKind::NotATrace(
                    "no Nsight Compute header (\"ID\",...,\"Metric Name\") found".into(),
                ),
            ));
        }
        read += n as u64;
        number += 1;
        let mut text: &[u8] = &line;
        if number == 1 {
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        }
        let text = text.trim_ascii();
        if text.starts_with(b"\"ID\"") || text.starts_with(b"ID,") {
            let fields = header_fields(text);
            if fields.iter().any(|f| f == "Kernel Name") {
                return Ok(Header {
                    fields,
                    line: number,
                    preamble,
                });
            }
        }
        if preamble.len() < KEPT_PREAMBLE_LINES {
            let kept: String = String::from_utf8_lossy(text)
                .chars()
                .take(KEPT_PREAMBLE_CHARS)
                .collect();
            preamble.push(kept);
        }
    }
}

/// The fields of one CSV line.
fn header_fields(line: &[u8]) -> Vec<String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line);
    let mut record = csv::ByteRecord::new();
    match reader.read_byte_record(&mut record) {
        Ok(true) => record
            .iter()
            .map(|f| String::from_utf8_lossy(f).trim().to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

/// Column positions by role.
#[derive(Default)]
struct Columns {
    count: usize,
    wide: bool,
    id: Option<usize>,
    pid: Option<usize>,
    process_name: Option<usize>,
    host: Option<usize>,
    kernel: Option<usize>,
    context: Option<usize>,
    stream: Option<usize>,
    block: Option<usize>,
    grid: Option<usize>,
    device: Option<usize>,
    cc: Option<usize>,
    section: Option<usize>,
    metric_name: Option<usize>,
    metric_unit: Option<usize>,
    metric_value: Option<usize>,
    /// Rule columns (`Rule Name`, ..., `Estimated Speedup`): (index, args key).
    rules: Vec<(usize, String)>,
    /// Other per-launch columns (`Kernel Time`, unknown ones): (index, header).
    extra: Vec<(usize, String)>,
    /// Metric columns of the wide form: (index, metric name).
    metrics: Vec<(usize, String)>,
}

impl Columns {
    /// True when a record has the fields this layout needs: at least up to the last identity
    /// or metric column (ncu ends metric rows with a trailing comma and leaves the rule columns
    /// off them, so short rows are normal), and nothing but empty fields past the header.
    fn accepts(&self, record: &csv::ByteRecord) -> bool {
        let needed = [self.id, self.kernel, self.metric_name, self.metric_value]
            .into_iter()
            .flatten()
            .max()
            .map_or(1, |i| i + 1);
        record.len() >= needed
            && record
                .iter()
                .skip(self.count)
                .all(|f| f.iter().all(u8::is_ascii_whitespace))
    }

    fn new(fields: &[String]) -> Self {
        let mut c = Columns {
            count: fields.len(),
            wide: !(fields.iter().any(|f| f == "Metric Name")
                && fields.iter().any(|f| f == "Metric Value")),
            ..Columns::default()
        };
        for (i, name) in fields.iter().enumerate() {
            let slot = match name.as_str() {
                "ID" => &mut c.id,
                "Process ID" => &mut c.pid,
                "Process Name" => &mut c.process_name,
                "Host Name" => &mut c.host,
                "Kernel Name" => &mut c.kernel,
                "Context" => &mut c.context,
                "Stream" => &mut c.stream,
                "Block Size" => &mut c.block,
                "Grid Size" => &mut c.grid,
                "Device" => &mut c.device,
                "CC" => &mut c.cc,
                "Section Name" => &mut c.section,
                "Metric Name" => &mut c.metric_name,
                "Metric Unit" => &mut c.metric_unit,
                "Metric Value" => &mut c.metric_value,
                _ => {
                    if name.starts_with("Rule ") || name.starts_with("Estimated Speedup") {
                        c.rules.push((i, rule_key(name)));
                    } else if c.wide && name != "Kernel Time" && !name.is_empty() {
                        c.metrics.push((i, name.clone()));
                    } else if !name.is_empty() {
                        c.extra.push((i, name.clone()));
                    }
                    continue;
                }
            };
            if slot.is_none() {
                *slot = Some(i);
            }
        }
        c
    }
}

/// Args key of a rule column: `Rule Name` -> `name`, `Estimated Speedup Type` ->
/// `speedup_type`, others snake-cased.
fn rule_key(header: &str) -> String {
    let trimmed = header
        .strip_prefix("Rule ")
        .or_else(|| header.strip_prefix("Estimated "))
        .unwrap_or(header);
    trimmed
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("_")
}

/// A trimmed field; empty when the column is absent.
fn field(record: &csv::ByteRecord, index: Option<usize>) -> Option<Cow<'_, str>> {
    let raw = record.get(index?)?;
    let text = String::from_utf8_lossy(raw);
    Some(match text {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
        Cow::Owned(s) => Cow::Owned(s.trim().to_owned()),
    })
}

/// A non-empty trimmed field.
fn nonempty(record: &csv::ByteRecord, index: Option<usize>) -> Option<String> {
    field(record, index)
        .filter(|s| !s.is_empty())
        .map(Cow::into_owned)
}

// ---------------------------------------------------------------------------------------------
// Values and units.

/// A parsed number: integers stay exact.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn as_i64(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i),
            Num::Float(_) => None,
        }
    }

    fn add(self, other: Num) -> Num {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a
                .checked_add(b)
                .map_or(Num::Float(a as f64 + b as f64), Num::Int),
            (a, b) => Num::Float(a.as_f64() + b.as_f64()),
        }
    }

    fn to_json(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

/// Removes thousands separators when they group digits by three (`53,261,312`); `None` when
/// the text is not a plain decimal number.
fn clean_number(text: &str) -> Option<String> {
    let text = text.trim();
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    if body.is_empty()
        || !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b',' | b'.' | b'e' | b'E' | b'-' | b'+'))
        || !body
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.')
    {
        return None;
    }
    if body.contains(',') {
        let int_end = body.find(['.', 'e', 'E']).unwrap_or(body.len());
        if body[int_end..].contains(',') {
            return None;
        }
        let mut groups = body[..int_end].split(',');
        let first = groups.next()?;
        if first.is_empty() || first.len() > 3 || groups.any(|g| g.len() != 3) {
            return None;
        }
    }
    Some(text.replace(',', ""))
}

/// Parses a metric value: integers exactly, decimals as `f64`.
fn parse_number(text: &str) -> Option<Num> {
    let cleaned = clean_number(text)?;
    if let Ok(i) = cleaned.parse::<i64>() {
        return Some(Num::Int(i));
    }
    cleaned
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Num::Float)
}

/// Unit normalisation: `(normalised unit, multiplier)` for times (to ns) and sizes (to bytes,
/// ncu's decimal prefixes; binary ones when written `Kibyte`...).
fn unit_scale(unit: &str) -> Option<(&'static str, i64)> {
    Some(match unit {
        "ns" | "nsecond" => ("ns", 1),
        "us" | "usecond" => ("ns", 1_000),
        "ms" | "msecond" => ("ns", 1_000_000),
        "s" | "second" => ("ns", 1_000_000_000),
        "byte" => ("byte", 1),
        "Kbyte" => ("byte", 1_000),
        "Mbyte" => ("byte", 1_000_000),
        "Gbyte" => ("byte", 1_000_000_000),
        "Tbyte" => ("byte", 1_000_000_000_000),
        "Kibyte" => ("byte", 1 << 10),
        "Mibyte" => ("byte", 1 << 20),
        "Gibyte" => ("byte", 1 << 30),
        "Tibyte" => ("byte", 1 << 40),
        _ => return None,
    })
}

/// One metric after normalisation.
struct Metric {
    json: Value,
    number: Option<Num>,
    unit: String,
}

/// Normalises a value with its unit: times to ns, sizes to bytes (exact decimal scaling), the
/// original value and unit kept as `source_value` / `source_unit` when they changed.
fn normalise(value: &str, unit: &str, section: Option<&str>) -> Metric {
    let mut object = Map::new();
    let number = parse_number(value);
    let (out_unit, number) = match (number, unit_scale(unit)) {
        (Some(n), Some((to, scale))) => {
            if to != unit {
                object.insert("source_unit".into(), Value::String(unit.to_owned()));
            }
            if scale == 1 {
                (to.to_owned(), Some(n))
            } else {
                object.insert("source_value".into(), n.to_json());
                let cleaned = clean_number(value).unwrap_or_default();
                let scaled = parse_decimal_to_ns(&cleaned, scale)
                    .map(Num::Int)
                    .unwrap_or(Num::Float(n.as_f64() * scale as f64));
                (to.to_owned(), Some(scaled))
            }
        }
        (n, _) => (unit.to_owned(), n),
    };
    let value_json = match number {
        Some(n) => n.to_json(),
        None => Value::String(value.to_owned()),
    };
    object.insert("value".into(), value_json);
    object.insert("unit".into(), Value::String(out_unit.clone()));
    if let Some(section) = section.filter(|s| !s.is_empty()) {
        object.insert("section".into(), Value::String(section.to_owned()));
    }
    Metric {
        json: Value::Object(object),
        number,
        unit: out_unit,
    }
}

/// `(32, 32, 1)` -> `[32, 32, 1]`.
fn parse_dim3(text: &str) -> Option<Value> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    let dims: Option<Vec<Value>> = inner
        .split(',')
        .map(|p| p.trim().parse::<i64>().ok().map(Value::from))
        .collect();
    dims.filter(|d| !d.is_empty()).map(Value::Array)
}

fn parse_int(text: &str) -> Option<i64> {
    parse_number(text).and_then(Num::as_i64)
}

// ---------------------------------------------------------------------------------------------
// Launches.

/// Everything read about one launch ID.
struct Launch {
    id: i64,
    kernel: String,
    pid: Option<i64>,
    process_name: Option<String>,
    host: Option<String>,
    device: Option<i64>,
    stream: Option<i64>,
    cc: Option<String>,
    args: Map<String, Value>,
    metrics: Map<String, Value>,
    /// Normalised numeric values and units by metric name (first occurrence), for derivations.
    numbers: FxHashMap<String, (Num, String)>,
    /// Section-qualified numbers (`Section/Label`) for the section-label aliases.
    labelled: FxHashMap<String, (Num, String)>,
    /// Text values by metric name (for device attributes of the wide form).
    texts: FxHashMap<String, String>,
    rules: Vec<Value>,
}

impl Launch {
    fn new(id: i64, record: &csv::ByteRecord, c: &Columns) -> Self {
        let mut args = Map::new();
        args.insert("id".into(), Value::from(id));
        let block = nonempty(record, c.block);
        if let Some(v) = block.as_deref().and_then(parse_dim3) {
            args.insert("block".into(), v);
        }
        if let Some(v) = nonempty(record, c.grid).as_deref().and_then(parse_dim3) {
            args.insert("grid".into(), v);
        }
        let cc = nonempty(record, c.cc);
        if let Some(cc) = &cc {
            args.insert("cc".into(), Value::String(cc.clone()));
        }
        let context = nonempty(record, c.context).as_deref().and_then(parse_int);
        if let Some(ctx) = context {
            args.insert("context".into(), Value::from(ctx));
        }
        let stream = nonempty(record, c.stream).as_deref().and_then(parse_int);
        if let Some(s) = stream {
            args.insert("stream".into(), Value::from(s));
        }
        let device = nonempty(record, c.device).as_deref().and_then(parse_int);
        if let Some(d) = device {
            args.insert("device".into(), Value::from(d));
        }
        for (i, name) in &c.extra {
            if let Some(v) = nonempty(record, Some(*i)) {
                let key = name.to_ascii_lowercase().replace(' ', "_");
                args.insert(key, Value::String(v));
            }
        }
        Launch {
            id,
            kernel: nonempty(record, c.kernel).unwrap_or_default(),
            pid: nonempty(record, c.pid).as_deref().and_then(parse_int),
            process_name: nonempty(record, c.process_name),
            host: nonempty(record, c.host),
            device,
            stream,
            cc,
            args,
            metrics: Map::new(),
            numbers: FxHashMap::default(),
            labelled: FxHashMap::default(),
            texts: FxHashMap::default(),
            rules: Vec::new(),
        }
    }

    /// One row of the details long form.
    fn add_long_row(&mut self, record: &csv::ByteRecord, c: &Columns) {
        let section = nonempty(record, c.section);
        if let Some(name) = nonempty(record, c.metric_name) {
            if let Some(value) = nonempty(record, c.metric_value) {
                let unit = nonempty(record, c.metric_unit).unwrap_or_default();
                self.add_metric(&name, &value, &unit, section.as_deref());
            }
        }
        let mut rule = Map::new();
        for (i, key) in &c.rules {
            if let Some(v) = nonempty(record, Some(*i)) {
                let value = match parse_number(&v) {
                    Some(n) if key == "speedup" => n.to_json(),
                    _ => Value::String(v),
                };
                rule.insert(key.clone(), value);
            }
        }
        if !rule.is_empty() {
            if let Some(section) = section {
                rule.insert("section".into(), Value::String(section));
            }
            let rule = Value::Object(rule);
            if !self.rules.contains(&rule) {
                self.rules.push(rule);
            }
        }
    }

    /// One row of the `--page raw` wide form.
    fn add_wide_row(&mut self, record: &csv::ByteRecord, c: &Columns, units: Option<&[String]>) {
        for (i, name) in &c.metrics {
            if let Some(value) = nonempty(record, Some(*i)) {
                let unit = units
                    .and_then(|u| u.get(*i))
                    .map_or("", String::as_str)
                    .to_owned();
                self.add_metric(name, &value, &unit, None);
            }
        }
    }

    fn add_metric(&mut self, name: &str, value: &str, unit: &str, section: Option<&str>) {
        let metric = normalise(value, unit, section);
        if let Some(n) = metric.number {
            self.numbers
                .entry(name.to_owned())
                .or_insert((n, metric.unit.clone()));
            if let Some(s) = section {
                self.labelled
                    .entry(format!("{s}/{name}"))
                    .or_insert((n, metric.unit.clone()));
            }
        } else {
            self.texts
                .entry(name.to_owned())
                .or_insert_with(|| value.to_owned());
        }
        let mut key = name.to_owned();
        if self.metrics.contains_key(&key) {
            key = match section {
                Some(s) => format!("{s}/{name}"),
                None => name.to_owned(),
            };
            let mut n = 2;
            while self.metrics.contains_key(&key) {
                key = format!("{name}#{n}");
                n += 1;
            }
        }
        self.metrics.insert(key, metric.json);
    }

    /// A metric's normalised number when its unit is `unit` (any unit when `None`).
    fn number(&self, name: &str, unit: Option<&str>) -> Option<Num> {
        let (n, u) = self.numbers.get(name)?;
        unit.is_none_or(|want| want == u).then_some(*n)
    }

    /// The derived roofline inputs; a key is absent when its inputs are.
    fn derived(&self) -> Map<String, Value> {
        let mut out = Map::new();
        // FLOPs: per precision when all three counters of it are present.
        let mut total: Option<Num> = None;
        let mut partial = false;
        for (prefix, key) in [("f", "fp32"), ("d", "fp64"), ("h", "fp16")] {
            let get = |op: &str| {
                self.number(
                    &format!("sm__sass_thread_inst_executed_op_{prefix}{op}_pred_on.sum"),
                    None,
                )
            };
            let (add, mul, fma) = (get("add"), get("mul"), get("fma"));
            match (add, mul, fma) {
                (Some(a), Some(m), Some(f)) => {
                    let flops = a.add(m).add(f).add(f);
                    out.insert(format!("flops_{key}"), flops.to_json());
                    total = Some(total.map_or(flops, |t| t.add(flops)));
                }
                (None, None, None) => {}
                _ => partial = true,
            }
        }
        if let (Some(total), false) = (total, partial) {
            out.insert("flops".into(), total.to_json());
        }
        // DRAM bytes.
        let bytes = |names: [&str; 2]| names.into_iter().find_map(|n| self.number(n, Some("byte")));
        let read = bytes(["dram__bytes_read.sum", "dram__bytes_op_read.sum"]);
        let write = bytes(["dram__bytes_write.sum", "dram__bytes_op_write.sum"]);
        let dram = match (read, write) {
            (Some(r), Some(w)) => Some(r.add(w)),
            _ => self.number("dram__bytes.sum", Some("byte")),
        };
        if let Some(d) = dram {
            out.insert("dram_bytes".into(), d.to_json());
        }
        // Whole nanoseconds as an integer (a duration outside the valid time range is refused
        // by the builder before these args are kept).
        if let Some(d) = self.duration_ns() {
            out.insert("duration_ns".into(), Value::from(d as i64));
        }
        let occupancy = self
            .number("sm__warps_active.avg.pct_of_peak_sustained_active", None)
            .or_else(|| self.labelled_number("Occupancy/Achieved Occupancy", "%"));
        if let Some(o) = occupancy {
            out.insert("occupancy_pct".into(), o.to_json());
        }
        out
    }

    fn labelled_number(&self, key: &str, unit: &str) -> Option<Num> {
        let (n, u) = self.labelled.get(key)?;
        (u == unit).then_some(*n)
    }

    /// `gpu__time_duration.sum` in ns (or the Speed Of Light section's `Duration`, which is
    /// that metric under its display label); `None` when absent or not a time. The number is
    /// exact (not saturated): see [`Builder::push`] for the range check.
    fn duration_ns(&self) -> Option<f64> {
        let n = self
            .number("gpu__time_duration.sum", Some("ns"))
            .or_else(|| self.labelled_number("GPU Speed Of Light Throughput/Duration", "ns"))
            .or_else(|| self.labelled_number("GPU Speed Of Light/Duration", "ns"))?;
        Some(match n {
            Num::Int(i) => i as f64,
            Num::Float(f) => f.round(),
        })
    }

    /// True when the launch has a duration metric that is not a time in ns (unparseable text
    /// or another unit).
    fn has_unusable_duration(&self) -> bool {
        ["gpu__time_duration.sum", "Duration"]
            .iter()
            .any(|k| self.texts.contains_key(*k) || self.numbers.contains_key(*k))
    }
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
            metadata_json: Some(metadata.to_string()),
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
            correlation: None,
            external_id: None,
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
mod tests {
    use super::*;

    #[test]
    fn short_names() {
        assert_eq!(
            short_name("void unnamed>::gemm_tiled_kernel<32>(const float *, int)"),
            "gemm_tiled_kernel"
        );
        assert_eq!(
            short_name("void (anonymous namespace)::gemm<32>(float const*, int)"),
            "gemm"
        );
        assert_eq!(
            short_name("_Z17gemm_tiled_kernelILi32EEvPKfS1_Pfiii"),
            "gemm_tiled_kernel"
        );
        assert_eq!(short_name("_ZN12_GLOBAL__N_14gemmILi32EEEvPKf"), "gemm");
        assert_eq!(
            short_name("ampere_sgemm_128x64_tn"),
            "ampere_sgemm_128x64_tn"
        );
        assert_eq!(short_name("gemm"), "gemm");
    }

    #[test]
    fn numbers_and_units() {
        assert_eq!(parse_number("53,261,312"), Some(Num::Int(53_261_312)));
        assert_eq!(parse_number("87.50"), Some(Num::Float(87.5)));
        assert_eq!(parse_number("1,234.5"), Some(Num::Float(1234.5)));
        assert_eq!(parse_number("(32, 32, 1)"), None);
        assert_eq!(parse_number("1,2"), None);
        assert_eq!(parse_number("n/a"), None);
        let m = normalise("1.234", "usecond", None);
        assert_eq!(m.number, Some(Num::Int(1234)));
        assert_eq!(m.unit, "ns");
        let m = normalise("2.5", "Mbyte", None);
        assert_eq!(m.number, Some(Num::Int(2_500_000)));
        assert!(contains_identifier("void gemm<1>(int)", "gemm"));
        assert!(!contains_identifier("void gemm_tiled(int)", "gemm"));
    }
}
