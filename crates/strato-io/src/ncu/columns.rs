//! The CSV shape: the preamble ncu prints before the header (kept, bounded), the header line,
//! and which column holds what in the long ("details") and wide (`--page raw`) forms.

use std::borrow::Cow;
use std::io::{BufRead, Read};
use std::path::Path;

use super::{KEPT_PREAMBLE_CHARS, KEPT_PREAMBLE_LINES, MAX_PREAMBLE_BYTES};
use crate::{Error, ErrorKind, Result};

/// The header line and what came before it.
pub(super) struct Header {
    pub(super) fields: Vec<String>,
    /// 1-based line number of the header in the file.
    pub(super) line: u64,
    /// Program output and `==PROF==` lines before the header (bounded).
    pub(super) preamble: Vec<String>,
}

/// Reads lines until the ncu header: a line starting with `"ID"` (or `ID,`) whose fields
/// include `Kernel Name`. Everything before it is program output or ncu log lines.
pub(super) fn find_header(path: &Path, reader: &mut Box<dyn BufRead + Send>) -> Result<Header> {
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
pub(super) fn header_fields(line: &[u8]) -> Vec<String> {
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
pub(super) struct Columns {
    pub(super) count: usize,
    pub(super) wide: bool,
    pub(super) id: Option<usize>,
    pub(super) pid: Option<usize>,
    pub(super) process_name: Option<usize>,
    pub(super) host: Option<usize>,
    pub(super) kernel: Option<usize>,
    pub(super) context: Option<usize>,
    pub(super) stream: Option<usize>,
    pub(super) block: Option<usize>,
    pub(super) grid: Option<usize>,
    pub(super) device: Option<usize>,
    pub(super) cc: Option<usize>,
    pub(super) section: Option<usize>,
    pub(super) metric_name: Option<usize>,
    pub(super) metric_unit: Option<usize>,
    pub(super) metric_value: Option<usize>,
    /// Rule columns (`Rule Name`, ..., `Estimated Speedup`): (index, args key).
    pub(super) rules: Vec<(usize, String)>,
    /// Other per-launch columns (`Kernel Time`, unknown ones): (index, header).
    pub(super) extra: Vec<(usize, String)>,
    /// Metric columns of the wide form: (index, metric name).
    pub(super) metrics: Vec<(usize, String)>,
}

impl Columns {
    /// True when a record has the fields this layout needs: at least up to the last identity
    /// or metric column (ncu ends metric rows with a trailing comma and leaves the rule columns
    /// off them, so short rows are normal), and nothing but empty fields past the header.
    pub(super) fn accepts(&self, record: &csv::ByteRecord) -> bool {
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

    pub(super) fn new(fields: &[String]) -> Self {
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
pub(super) fn rule_key(header: &str) -> String {
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
pub(super) fn field(record: &csv::ByteRecord, index: Option<usize>) -> Option<Cow<'_, str>> {
    let raw = record.get(index?)?;
    let text = String::from_utf8_lossy(raw);
    Some(match text {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
        Cow::Owned(s) => Cow::Owned(s.trim().to_owned()),
    })
}

/// A non-empty trimmed field.
pub(super) fn nonempty(record: &csv::ByteRecord, index: Option<usize>) -> Option<String> {
    field(record, index)
        .filter(|s| !s.is_empty())
        .map(Cow::into_owned)
}
