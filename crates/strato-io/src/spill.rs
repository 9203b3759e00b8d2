//! Events spilled to anonymous temporary files and read back: what a command that must see a
//! trace's events more than once, or in another order, keeps on disk instead of in memory.
//!
//! - [`Log`]: records appended to an anonymous file, read back in order once.
//! - [`SpanLog`] / [`SpilledSpans`]: spans (with their attribute text) appended as an import
//!   streams them, then read back in that order as often as needed ([`SpilledSpans::read`]).
//! - The record codec ([`read_array`], [`u32_of`], [`u64_of`], [`level_of`],
//!   [`encode_optional`], [`decode_optional`]) that the streamed Perfetto export's runs share.
//!
//! The files have no name: nothing is left behind, whatever ends the process. A record is read
//! back exactly as written (times, ids, level, correlations, args text, byte for byte).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

use strato_trace::{Level, Ns, Span, StrId, TrackId};

/// Read buffer of a spilled file read back.
pub const READ_BUFFER: usize = 64 << 10;

/// Records appended to an anonymous file in `dir`, read back in order.
#[derive(Debug)]
pub struct Log {
    out: BufWriter<File>,
}

impl Log {
    /// An empty log in `dir` (an anonymous file: removed when the last handle closes).
    pub fn new(dir: &Path) -> io::Result<Self> {
        Ok(Log {
            out: BufWriter::new(tempfile::tempfile_in(dir)?),
        })
    }

    /// Appends one record.
    pub fn write(&mut self, record: &[u8]) -> io::Result<()> {
        self.out.write_all(record)
    }

    /// The file, flushed and rewound to its first record.
    pub fn into_file(self) -> io::Result<File> {
        let mut file = self
            .out
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        file.rewind()?;
        Ok(file)
    }

    /// The records, from the first, through a buffered reader.
    pub fn reader(self) -> io::Result<BufReader<File>> {
        Ok(BufReader::with_capacity(READ_BUFFER, self.into_file()?))
    }
}

/// One span read back from a [`SpilledSpans`]: the span as it was written, with its
/// attribute text beside it (`span.args` is `None`: the text has no table to index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpilledSpan {
    pub span: Span,
    pub args: Option<String>,
}

/// Spans appended as they come ([`SpanLog::push`]), in order; [`SpanLog::finish`] makes them
/// readable.
#[derive(Debug)]
pub struct SpanLog {
    log: Log,
    record: Vec<u8>,
    spans: u64,
}

impl SpanLog {
    /// An empty span log in `dir`.
    pub fn new(dir: &Path) -> io::Result<Self> {
        Ok(SpanLog {
            log: Log::new(dir)?,
            record: Vec::with_capacity(128),
            spans: 0,
        })
    }

    /// Appends `span` with `args`, its attribute text (the span's own `args` id is not kept).
    pub fn push(&mut self, span: &Span, args: Option<&str>) -> io::Result<()> {
        self.record.clear();
        encode_span(span, args, &mut self.record);
        self.spans += 1;
        self.log.write(&self.record)
    }

    /// The spans appended so far.
    pub fn len(&self) -> u64 {
        self.spans
    }

    /// Whether no span was appended.
    pub fn is_empty(&self) -> bool {
        self.spans == 0
    }

    /// The spans, readable from the first as often as needed.
    pub fn finish(self) -> io::Result<SpilledSpans> {
        Ok(SpilledSpans {
            file: self.log.into_file()?,
            spans: self.spans,
        })
    }
}

/// Spans spilled by a [`SpanLog`], read back in the order they were appended.
#[derive(Debug)]
pub struct SpilledSpans {
    file: File,
    spans: u64,
}

impl SpilledSpans {
    /// How many spans the file holds.
    pub fn len(&self) -> u64 {
        self.spans
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.spans == 0
    }

    /// Every span, from the first. One reading at a time: a reading started later moves the
    /// file's offset under an earlier one.
    pub fn read(&self) -> io::Result<SpanReader> {
        let mut file = self.file.try_clone()?;
        file.rewind()?;
        Ok(SpanReader {
            input: BufReader::with_capacity(READ_BUFFER, file),
            left: self.spans,
        })
    }
}

/// The spans of a [`SpilledSpans`], in order; an error ends the reading.
#[derive(Debug)]
pub struct SpanReader {
    input: BufReader<File>,
    left: u64,
}

impl Iterator for SpanReader {
    type Item = io::Result<SpilledSpan>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match decode_span(&mut self.input) {
            Ok(Some(span)) => Some(Ok(span)),
            Ok(None) => {
                self.left = 0;
                Some(Err(io::ErrorKind::UnexpectedEof.into()))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(left))
    }
}

fn encode_span(s: &Span, args: Option<&str>, out: &mut Vec<u8>) {
    out.extend_from_slice(&s.track.0.to_le_bytes());
    out.extend_from_slice(&s.start.to_le_bytes());
    out.extend_from_slice(&s.end.to_le_bytes());
    out.extend_from_slice(&s.name.0.to_le_bytes());
    out.extend_from_slice(&s.category.0.to_le_bytes());
    out.push(s.level.code());
    encode_optional(s.correlation.get(), s.external_id.get(), args, out);
}

fn decode_span(input: &mut impl Read) -> io::Result<Option<SpilledSpan>> {
    let Some(track) = read_array::<4>(input, true)? else {
        return Ok(None);
    };
    let start = u64_of(input)? as Ns;
    let end = u64_of(input)? as Ns;
    let name = StrId(u32_of(input)?);
    let category = StrId(u32_of(input)?);
    let level = level_of(input)?;
    let (correlation, external_id, args) = decode_optional(input)?;
    Ok(Some(SpilledSpan {
        span: Span {
            track: TrackId(u32::from_le_bytes(track)),
            start,
            end,
            name,
            category,
            level,
            correlation: correlation.into(),
            external_id: external_id.into(),
            args: None,
        },
        args,
    }))
}

const HAS_CORRELATION: u8 = 1;
const HAS_EXTERNAL_ID: u8 = 2;
const HAS_ARGS: u8 = 4;

/// Appends a record's optional tail: a flags byte, then the correlation, the external id and
/// the args text (its length first) that are present.
pub fn encode_optional(
    correlation: Option<u64>,
    external_id: Option<u64>,
    args: Option<&str>,
    out: &mut Vec<u8>,
) {
    let flag = |present: bool, bit: u8| if present { bit } else { 0 };
    let flags = flag(correlation.is_some(), HAS_CORRELATION)
        | flag(external_id.is_some(), HAS_EXTERNAL_ID)
        | flag(args.is_some(), HAS_ARGS);
    out.push(flags);
    for value in [correlation, external_id].into_iter().flatten() {
        out.extend_from_slice(&value.to_le_bytes());
    }
    if let Some(text) = args {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
}

/// Reads what [`encode_optional`] wrote: correlation, external id and args text.
pub fn decode_optional(
    input: &mut impl Read,
) -> io::Result<(Option<u64>, Option<u64>, Option<String>)> {
    let [flags] = read_array::<1>(input, false)?.unwrap_or_default();
    let correlation = (flags & HAS_CORRELATION != 0)
        .then(|| u64_of(input))
        .transpose()?;
    let external_id = (flags & HAS_EXTERNAL_ID != 0)
        .then(|| u64_of(input))
        .transpose()?;
    let args = if flags & HAS_ARGS != 0 {
        let len = u64_of(input)?;
        let mut text = Vec::new();
        input.take(len).read_to_end(&mut text)?;
        if text.len() as u64 != len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Some(String::from_utf8(text).map_err(io::Error::other)?)
    } else {
        None
    };
    Ok((correlation, external_id, args))
}

/// Reads `N` bytes; `None` at a clean end of the input (before its first byte) when `first`
/// (the first field of a record), an error anywhere else.
pub fn read_array<const N: usize>(
    input: &mut impl Read,
    first: bool,
) -> io::Result<Option<[u8; N]>> {
    let mut bytes = [0u8; N];
    if first {
        let mut read = 0;
        while read < N {
            match input.read(&mut bytes[read..])? {
                0 if read == 0 => return Ok(None),
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => read += n,
            }
        }
    } else {
        input.read_exact(&mut bytes)?;
    }
    Ok(Some(bytes))
}

/// A little-endian `u32` field.
pub fn u32_of(input: &mut impl Read) -> io::Result<u32> {
    Ok(u32::from_le_bytes(
        read_array(input, false)?.unwrap_or_default(),
    ))
}

/// A little-endian `u64` field.
pub fn u64_of(input: &mut impl Read) -> io::Result<u64> {
    Ok(u64::from_le_bytes(
        read_array(input, false)?.unwrap_or_default(),
    ))
}

/// A level field ([`Level::code`]).
pub fn level_of(input: &mut impl Read) -> io::Result<Level> {
    let [code] = read_array::<1>(input, false)?.unwrap_or_default();
    Level::from_code(code).ok_or_else(|| io::Error::other("spill: a level code out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(i: u32) -> Span {
        Span {
            track: TrackId(i % 3),
            start: i64::from(i) * 7 - 100,
            end: i64::from(i) * 7 + i64::from(i % 5),
            name: StrId(i),
            category: StrId(i / 2),
            level: Level::ALL[i as usize % Level::ALL.len()],
            correlation: i.is_multiple_of(2).then_some(u64::from(i) << 33).into(),
            external_id: i
                .is_multiple_of(3)
                .then_some(u64::MAX - u64::from(i))
                .into(),
            args: None,
        }
    }

    #[test]
    fn spans_come_back_as_written_as_often_as_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SpanLog::new(dir.path()).unwrap();
        let written: Vec<SpilledSpan> = (0..5000)
            .map(|i| SpilledSpan {
                span: span(i),
                args: (i % 4 == 1)
                    .then(|| format!("{{\"n\":{i},\"s\":\"é{}\"}}", "x".repeat(i as usize % 300))),
            })
            .collect();
        for s in &written {
            log.push(&s.span, s.args.as_deref()).unwrap();
        }
        assert_eq!(log.len(), 5000);
        let spilled = log.finish().unwrap();
        for _ in 0..2 {
            let back: Vec<SpilledSpan> = spilled.read().unwrap().map(Result::unwrap).collect();
            assert_eq!(back, written);
        }
        // Nothing is left in the directory: the file has no name.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_cut_file_is_an_error_not_a_short_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SpanLog::new(dir.path()).unwrap();
        log.push(&span(1), Some("{\"a\":1}")).unwrap();
        log.push(&span(2), None).unwrap();
        let spilled = log.finish().unwrap();
        spilled.file.set_len(30).unwrap();
        let back: Vec<io::Result<SpilledSpan>> = spilled.read().unwrap().collect();
        assert!(back.iter().any(Result::is_err), "{back:?}");
    }
}
