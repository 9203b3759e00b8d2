//! Opening inputs: plain or gzip-compressed, with a bound on the decompressed size (a gzip
//! bomb is stopped with a clear error instead of filling memory or disk), and sniffing the
//! format from the first bytes rather than trusting the file name.
//!
//! Every input is opened once and read once, front to back: the format is sniffed from the
//! buffered head, so pipes (`<(gunzip -c x.json.gz)`, FIFOs) and standard input (`-`) work.
//! A gzip stream is checked to its end by the decoder (CRC32 and ISIZE of every member;
//! garbage after a member is an error) — as long as the reader reads to the end, which every
//! importer does. Members are read one after another ([`GzipMembers`]), and zero bytes after
//! the last member are padding, as `gzip -d` and Python's `gzip` read them.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::GzDecoder;

use crate::error::{Error, ErrorKind, Result};

/// Default bound on decompressed bytes: 64 GiB. Override with `STRATO_MAX_DECOMPRESSED_BYTES`.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: u64 = 64 << 30;

/// The environment variable that overrides [`DEFAULT_MAX_DECOMPRESSED_BYTES`].
pub const MAX_DECOMPRESSED_BYTES_VAR: &str = "STRATO_MAX_DECOMPRESSED_BYTES";

/// The decompression bound in force: `STRATO_MAX_DECOMPRESSED_BYTES` when set, else the
/// default. An invalid value is an error (never silently replaced by the default).
pub fn max_decompressed_bytes() -> std::result::Result<u64, String> {
    match std::env::var(MAX_DECOMPRESSED_BYTES_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX_DECOMPRESSED_BYTES),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "{MAX_DECOMPRESSED_BYTES_VAR}={v:?} is not a byte count"
        )),
        Ok(v) => parse_byte_count(&v).ok_or_else(|| {
            format!(
                "{MAX_DECOMPRESSED_BYTES_VAR}={v:?} is not a byte count: expected a positive \
                 integer, optionally with a K, M, G or T suffix (powers of 1024), e.g. 64G"
            )
        }),
    }
}

/// Parses `123`, `64K`, `64M`, `64G`, `1T` (binary multiples; `KiB`/`KB` spellings too).
/// Zero, negative, fractional and overflowing values are `None`.
pub fn parse_byte_count(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let shift = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    let value = number.checked_mul(1u64 << shift)?;
    (value > 0).then_some(value)
}

/// What a file looks like from its first bytes (after gzip decompression).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// Starts with `{` or `[` (Chrome-trace JSON family).
    Json,
    /// SQLite database (`SQLite format 3\0`).
    Sqlite,
    /// Nsight Compute CSV (BOM, `==PROF==` preamble or a quoted `"ID"` header).
    NcuCsv,
    /// Anything else (protobuf is recognised by the caller from its name and structure).
    Binary,
}

/// An opened input: a buffered reader over the (decompressed) bytes.
pub struct Input {
    pub reader: Box<dyn BufRead + Send>,
    pub gzip: bool,
    /// The raw head is a stratoscope recording (`*.strato`), which is read by path.
    pub recording: bool,
    /// The input is a regular file (so it may be opened again by path, e.g. by SQLite).
    pub regular_file: bool,
}

impl Input {
    /// An input over already-decompressed bytes (tests, callers holding a reader).
    pub fn from_reader(reader: Box<dyn BufRead + Send>) -> Self {
        Input {
            reader,
            gzip: false,
            recording: false,
            regular_file: false,
        }
    }
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input").field("gzip", &self.gzip).finish()
    }
}

/// Bytes gathered from a pipe before its format is sniffed.
const PIPE_HEAD: usize = 64 << 10;

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Opens `path` (`-`: standard input), transparently decompressing gzip (by magic bytes, not
/// by name), bounded by `limit` decompressed bytes. An empty file is an error. Opens once:
/// pipes and FIFOs work, as the format is sniffed from the buffered head.
pub fn open(path: &Path, limit: u64) -> Result<Input> {
    let (mut source, regular_file): (Box<dyn Read + Send>, bool) = if is_stdin(path) {
        (Box::new(io::stdin()), false)
    } else {
        let file = File::open(path).map_err(|e| Error::new(path, e))?;
        let regular = file.metadata().map(|m| m.is_file()).unwrap_or(false);
        (Box::new(file), regular)
    };
    if !regular_file {
        // A pipe hands over what its writer wrote so far: gather a head long enough to sniff
        // the format (or the whole input, when shorter), then read on behind it.
        let mut head = Vec::with_capacity(PIPE_HEAD);
        (&mut source)
            .take(PIPE_HEAD as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::new(path, e))?;
        source = Box::new(io::Cursor::new(head).chain(source));
    }
    let mut raw = BufReader::with_capacity(1 << 20, source);
    let head = raw.fill_buf().map_err(|e| Error::new(path, e))?;
    if head.is_empty() {
        return Err(Error::new(path, ErrorKind::Empty));
    }
    let recording = head.len() >= 8 && strato_record::is_recording_bytes(&head[..8]);
    if head.starts_with(&[0x1f, 0x8b]) {
        let decoder = GzipMembers::new(raw);
        let limited = LimitedReader {
            inner: decoder,
            remaining: limit,
            limit,
        };
        let mut reader = BufReader::with_capacity(1 << 20, GzipErrors { inner: limited });
        let head = reader.fill_buf().map_err(|e| classify(path, e))?;
        if head.is_empty() {
            return Err(Error::new(path, ErrorKind::Empty));
        }
        Ok(Input {
            reader: utf8(path, Box::new(reader))?,
            gzip: true,
            recording,
            regular_file,
        })
    } else {
        Ok(Input {
            reader: utf8(path, Box::new(raw))?,
            gzip: false,
            recording,
            regular_file,
        })
    }
}

/// Text encodings JSON may come in besides UTF-8, told from the first bytes as RFC 8259 and
/// Python's `json` tell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Utf16 {
    Le,
    Be,
}

/// The input as UTF-8: UTF-16 JSON (with a byte order mark, or starting `{`/`[` with the zero
/// bytes of UTF-16; what Windows PowerShell's `Out-File` writes) is transcoded as it is read.
/// UTF-32 is refused with a clear error. Anything else passes untouched.
fn utf8(path: &Path, mut reader: Box<dyn BufRead + Send>) -> Result<Box<dyn BufRead + Send>> {
    let head = reader.fill_buf().map_err(|e| classify(path, e))?;
    let json_start = |b: u8| b == b'{' || b == b'[';
    let utf32 = head.starts_with(b"\xFF\xFE\0\0")
        || head.starts_with(b"\0\0\xFE\xFF")
        || (head.len() >= 4 && head[1..4] == [0, 0, 0] && json_start(head[0]))
        || (head.len() >= 4 && head[..3] == [0, 0, 0] && json_start(head[3]));
    if utf32 {
        return Err(Error::new(
            path,
            ErrorKind::UnknownFormat(
                "UTF-32 text: convert it to UTF-8 (iconv -f UTF-32 -t UTF-8)".into(),
            ),
        ));
    }
    let (encoding, bom) = if head.starts_with(b"\xFF\xFE") {
        (Some(Utf16::Le), 2)
    } else if head.starts_with(b"\xFE\xFF") {
        (Some(Utf16::Be), 2)
    } else if head.len() >= 2 && json_start(head[0]) && head[1] == 0 {
        (Some(Utf16::Le), 0)
    } else if head.len() >= 2 && head[0] == 0 && json_start(head[1]) {
        (Some(Utf16::Be), 0)
    } else {
        (None, 0)
    };
    let Some(encoding) = encoding else {
        return Ok(reader);
    };
    reader.consume(bom);
    Ok(Box::new(BufReader::with_capacity(
        1 << 20,
        Utf16Reader {
            inner: reader,
            encoding,
            units: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
        },
    )))
}

/// Transcodes UTF-16 to UTF-8 as it is read; an unpaired surrogate becomes U+FFFD (the text
/// of a JSON document never holds one: its escapes are ASCII).
struct Utf16Reader {
    inner: Box<dyn BufRead + Send>,
    encoding: Utf16,
    /// Bytes read but not yet decoded (an odd byte, or a high surrogate waiting for its pair).
    units: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
}

impl Read for Utf16Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
            let chunk = self.inner.fill_buf()?;
            let ended = chunk.is_empty();
            let taken = chunk.len();
            self.units.extend_from_slice(chunk);
            self.inner.consume(taken);
            let whole = self.units.len() / 2 * 2;
            let mut units: Vec<u16> = self.units[..whole]
                .chunks_exact(2)
                .map(|p| match self.encoding {
                    Utf16::Le => u16::from_le_bytes([p[0], p[1]]),
                    Utf16::Be => u16::from_be_bytes([p[0], p[1]]),
                })
                .collect();
            // A high surrogate at the end may be paired by the next read.
            let keep = !ended && units.last().is_some_and(|u| (0xD800..0xDC00).contains(u));
            if keep {
                units.pop();
            }
            let decoded = if keep { whole - 2 } else { whole };
            self.units.drain(..decoded);
            let mut text = String::with_capacity(units.len());
            text.extend(char::decode_utf16(units).map(|c| c.unwrap_or('\u{FFFD}')));
            self.out.extend_from_slice(text.as_bytes());
            if ended {
                if !self.units.is_empty() {
                    // An odd byte at the end: cut text.
                    self.units.clear();
                    self.out.extend_from_slice("\u{FFFD}".as_bytes());
                }
                break;
            }
        }
        let n = (self.out.len() - self.out_pos).min(buf.len());
        buf[..n].copy_from_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        Ok(n)
    }
}

/// Turns an I/O error from a decompressing reader into the right [`ErrorKind`].
pub fn classify(path: &Path, error: io::Error) -> Error {
    if let Some(limit) = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<LimitExceeded>())
    {
        return Error::new(path, ErrorKind::DecompressedTooLarge { limit: limit.0 });
    }
    if let Some(gz) = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<GzipFailure>())
    {
        return Error::new(path, ErrorKind::Gzip(gz.0.clone()));
    }
    Error::new(path, error)
}

/// Looks at the first bytes of a reader without consuming them.
pub fn sniff(path: &Path, input: &mut Input) -> Result<Sniffed> {
    let head = input.reader.fill_buf().map_err(|e| classify(path, e))?;
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let first = text.iter().copied().find(|b| !b.is_ascii_whitespace());
    if head.starts_with(b"SQLite format 3\0") {
        return Ok(Sniffed::Sqlite);
    }
    if text.starts_with(b"==PROF==") || text.starts_with(b"\"ID\"") || text.starts_with(b"ID,") {
        return Ok(Sniffed::NcuCsv);
    }
    if head.starts_with(b"\xEF\xBB\xBF") && text.starts_with(b"==") {
        return Ok(Sniffed::NcuCsv);
    }
    match first {
        // Only whitespace so far: JSON is the only format that may start so (and the parser
        // then reads on, within the decompression limit).
        None => Ok(Sniffed::Json),
        Some(b'{') | Some(b'[') => Ok(Sniffed::Json),
        _ => {
            // A CSV with a free-text preamble: look for the ncu header line.
            if memchr::memmem::find(head, b"\"Kernel Name\"").is_some() {
                Ok(Sniffed::NcuCsv)
            } else {
                Ok(Sniffed::Binary)
            }
        }
    }
}

#[derive(Debug)]
struct LimitExceeded(u64);
impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "decompressed size exceeds {} bytes", self.0)
    }
}
impl std::error::Error for LimitExceeded {}

#[derive(Debug)]
struct GzipFailure(String);
impl std::fmt::Display for GzipFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for GzipFailure {}

struct LimitedReader<R> {
    inner: R,
    remaining: u64,
    limit: u64,
}

impl<R: Read> Read for LimitedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.remaining {
            return Err(io::Error::other(LimitExceeded(self.limit)));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// A gzip file: its members one after another (what `cat a.gz b.gz` makes), then nothing or
/// zero bytes only (padding that tape and block storage add; `gzip -d` and Python's `gzip`
/// skip it). Anything else after a member is an error. Each member's CRC32 and ISIZE are
/// checked by the decoder.
struct GzipMembers<R: BufRead> {
    /// The member being read; `None` once the input has ended.
    member: Option<GzDecoder<R>>,
}

impl<R: BufRead> GzipMembers<R> {
    fn new(reader: R) -> Self {
        GzipMembers {
            member: Some(GzDecoder::new(reader)),
        }
    }
}

impl<R: BufRead> Read for GzipMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(member) = self.member.as_mut() else {
                return Ok(0);
            };
            let n = member.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // The member ended (its trailer checked): what follows decides.
            let mut rest = self
                .member
                .take()
                .map(GzDecoder::into_inner)
                .expect("member");
            match rest.fill_buf()?.first() {
                None => return Ok(0),
                Some(0) => loop {
                    let head = rest.fill_buf()?;
                    if head.is_empty() {
                        return Ok(0);
                    }
                    if head.iter().any(|&b| b != 0) {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "data after the zero padding that follows the last gzip member",
                        ));
                    }
                    let len = head.len();
                    rest.consume(len);
                },
                Some(_) => self.member = Some(GzDecoder::new(rest)),
            }
        }
    }
}

/// Maps the decoder's errors (and an early end of stream) to [`GzipFailure`].
struct GzipErrors<R> {
    inner: R,
}

impl<R: Read> Read for GzipErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.get_ref().is_some_and(|r| r.is::<LimitExceeded>()) => Err(e),
            Err(e) => Err(io::Error::other(GzipFailure(e.to_string()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gzip_bomb_is_stopped_by_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.json.gz");
        std::fs::write(&path, gz(&vec![b' '; 10 << 20])).unwrap();
        let mut input = open(&path, 1 << 20).unwrap();
        let mut sink = Vec::new();
        let err = input
            .reader
            .read_to_end(&mut sink)
            .map_err(|e| classify(&path, e))
            .unwrap_err();
        assert!(matches!(err.kind, ErrorKind::DecompressedTooLarge { limit } if limit == 1 << 20));
        assert!(err.to_string().contains("bomb.json.gz"));
    }

    #[test]
    fn truncated_gzip_is_a_gzip_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.json.gz");
        let data = gz(&b"{\"traceEvents\":[]}".repeat(1000));
        std::fs::write(&path, &data[..data.len() / 2]).unwrap();
        let result = open(&path, 1 << 30).and_then(|mut input| {
            let mut sink = Vec::new();
            input
                .reader
                .read_to_end(&mut sink)
                .map_err(|e| classify(&path, e))
        });
        let err = result.unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Gzip(_)), "{err}");
    }

    /// Concatenated members, empty members, FNAME/FEXTRA/FCOMMENT/FHCRC headers and zero
    /// padding after the last member are all valid gzip (Python's `gzip` reads them); data
    /// after the padding, or a member cut short, is not.
    #[test]
    fn gzip_members_and_padding() {
        fn read(bytes: &[u8]) -> Result<Vec<u8>> {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.json.gz");
            std::fs::write(&path, bytes).unwrap();
            let mut input = open(&path, 1 << 30)?;
            let mut out = Vec::new();
            input
                .reader
                .read_to_end(&mut out)
                .map_err(|e| classify(&path, e))?;
            Ok(out)
        }
        let (a, b) = (gz(b"[{\"a\":1},"), gz(b"{\"b\":2}]"));
        let joined = [a.clone(), b.clone()].concat();
        assert_eq!(read(&joined).unwrap(), b"[{\"a\":1},{\"b\":2}]");
        let with_empty = [gz(b""), a.clone(), gz(b""), b.clone(), gz(b"")].concat();
        assert_eq!(read(&with_empty).unwrap(), b"[{\"a\":1},{\"b\":2}]");
        let padded = [joined.clone(), vec![0; 3000]].concat();
        assert_eq!(read(&padded).unwrap(), b"[{\"a\":1},{\"b\":2}]");
        // FTEXT|FHCRC|FEXTRA|FNAME|FCOMMENT, built with flate2's header builder.
        let mut enc = flate2::GzBuilder::new()
            .filename("trace.json")
            .comment("a comment")
            .extra(vec![b'A', b'B', 2, 0, b'x', b'y'])
            .write(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"[]").unwrap();
        assert_eq!(read(&enc.finish().unwrap()).unwrap(), b"[]");
        for bad in [
            [padded.clone(), b"x".to_vec()].concat(),
            [joined.clone(), b"garbage".to_vec()].concat(),
            [a.clone(), b[..b.len() - 3].to_vec()].concat(),
        ] {
            assert!(matches!(read(&bad).unwrap_err().kind, ErrorKind::Gzip(_)));
        }
    }

    /// UTF-16 JSON (with or without a BOM, either byte order; Python's `json` reads it) is read
    /// as UTF-8, across any read boundary; UTF-32 is a clear error.
    #[test]
    fn utf16_json_is_transcoded() {
        let text = "{\"traceEvents\":[{\"name\":\"\u{1F600} \u{00E9}\u{4E2D}\"}]}";
        let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let dir = tempfile::tempdir().unwrap();
        for (i, bytes) in [
            [b"\xFF\xFE".to_vec(), le.clone()].concat(),
            [b"\xFE\xFF".to_vec(), be.clone()].concat(),
            le.clone(),
            be,
            gz(&[b"\xFF\xFE".to_vec(), le.clone()].concat()),
        ]
        .iter()
        .enumerate()
        {
            let path = dir.path().join(format!("u{i}.json"));
            std::fs::write(&path, bytes).unwrap();
            let mut input = open(&path, 1 << 20).unwrap();
            assert_eq!(sniff(&path, &mut input).unwrap(), Sniffed::Json);
            let mut out = String::new();
            input.reader.read_to_string(&mut out).unwrap();
            assert_eq!(out, text, "{i}");
        }
        // Fed one byte at a time: units and surrogate pairs cut everywhere.
        let mut reader = Utf16Reader {
            inner: Box::new(BufReader::with_capacity(1, io::Cursor::new(le))),
            encoding: Utf16::Le,
            units: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
        };
        let mut out = String::new();
        reader.read_to_string(&mut out).unwrap();
        assert_eq!(out, text);
        let path = dir.path().join("u32.json");
        let utf32: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        std::fs::write(&path, utf32).unwrap();
        let err = open(&path, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("UTF-32"), "{err}");
    }

    #[test]
    fn sniffing() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&[u8], Sniffed); 4] = [
            (b"  {\"traceEvents\": []}", Sniffed::Json),
            (b"SQLite format 3\0rest", Sniffed::Sqlite),
            (b"\xEF\xBB\xBF==PROF== Connected", Sniffed::NcuCsv),
            (b"\x0a\x05hello", Sniffed::Binary),
        ];
        for (i, (bytes, expected)) in cases.iter().enumerate() {
            let path = dir.path().join(format!("f{i}"));
            std::fs::write(&path, bytes).unwrap();
            let mut input = open(&path, 1 << 20).unwrap();
            assert_eq!(sniff(&path, &mut input).unwrap(), *expected);
        }
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            open(&empty, 10).unwrap_err().kind,
            ErrorKind::Empty
        ));
    }
}
