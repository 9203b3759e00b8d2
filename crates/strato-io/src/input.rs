//! Opening inputs: plain or gzip-compressed, with a bound on the decompressed size (a gzip
//! bomb is stopped with a clear error instead of filling memory or disk), and sniffing the
//! format from the first bytes rather than trusting the file name.
//!
//! Every input is opened once and read once, front to back: the format is sniffed from the
//! buffered head, so pipes (`<(gunzip -c x.json.gz)`, FIFOs) and standard input (`-`) work.
//! A gzip stream is checked to its end by the decoder (CRC32 and ISIZE of every member;
//! garbage after a member is an error) — as long as the reader reads to the end, which every
//! importer does.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

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
        let decoder = MultiGzDecoder::new(raw);
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
            reader: Box::new(reader),
            gzip: true,
            recording,
            regular_file,
        })
    } else {
        Ok(Input {
            reader: Box::new(raw),
            gzip: false,
            recording,
            regular_file,
        })
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
