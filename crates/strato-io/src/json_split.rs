//! Splits a Chrome-trace JSON document into its top-level keys and its single events without
//! ever holding the whole text: a reader thread feeds chunks of a fixed read size (1 MiB by
//! default, [`Splitter::with_chunk_size`] for tests), decompressing gzip on the second core, and
//! this side hands each event to a callback that parses it with serde.
//!
//! Correct for every split of the document, in linear time per event: the callback first tries
//! the event at the front of the window as read so far (the common case: the event is whole
//! within it). When that fails for *any* reason — the window may end inside a number, `true`,
//! an escape or a string, where serde reports a syntax error rather than an end of data — the
//! splitter finds the event's end with a resumable byte scanner (strings, escapes, nesting;
//! never re-scanning bytes already seen), reading more as needed, and hands the complete bytes
//! to the callback once more; only then is an error the event's own. An event is therefore
//! parsed at most twice, and scanned at most once.
//!
//! Accepted shapes: `{"traceEvents": [ ... ], "other": ...}` (keys in any order) and a bare
//! `[ ... ]` array, whose closing `]` may be missing as the Chrome format allows. After the
//! document only whitespace may follow, and the input is read to its end, so a gzip member's
//! CRC32 and length (ISIZE) are always checked. Anything else is a syntax error with its byte
//! offset.

use std::io::{self, BufRead, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::json_lenient::Key;

/// Default read size: bytes per chunk the reader thread hands over.
pub const DEFAULT_CHUNK_SIZE: usize = 1 << 20;
/// Room left in front of each chunk so the unparsed tail of the previous one can be put there
/// instead of copying the new chunk behind it.
const HEADROOM: usize = 64 << 10;

/// What the splitter hands to its callback.
#[derive(Debug)]
pub enum TopLevel<'a> {
    /// A top-level key other than `traceEvents`, with its raw JSON value.
    Key(&'a str, &'a [u8]),
    /// One element of `traceEvents`, starting at document byte `offset`.
    ///
    /// When `complete` is false, `bytes` runs from the element's start to the end of the data
    /// read so far: the callback parses one event from the front and returns how many bytes it
    /// took, or `None` when it could not (for whatever reason: the event may be cut off).
    /// The splitter then finds the element's end itself and calls again with `complete` true
    /// and `bytes` exactly the element's text: now the callback must parse all of it
    /// (`Some(bytes.len())`) or return an error.
    Event {
        bytes: &'a [u8],
        offset: u64,
        complete: bool,
    },
}

/// Why splitting stopped.
#[derive(Debug)]
pub enum SplitError {
    /// Reading (or decompressing) failed.
    Io(io::Error),
    /// The document is not well-formed where the splitter looks.
    Syntax { offset: u64, message: String },
    /// The callback rejected an event.
    Event { offset: u64, message: String },
}

/// Read sizes below this are read on the calling thread (see [`Splitter::with_chunk_size`]).
pub const INLINE_BELOW: usize = 1024;

/// The reader of a splitter that reads on the calling thread.
struct InlineReader {
    reader: Box<dyn BufRead + Send>,
    chunk_size: usize,
    /// A spent buffer to read the next chunk into.
    spare: Vec<u8>,
    /// An error met after the last chunk's bytes, handed over next.
    error: Option<io::Error>,
    done: bool,
}

/// Reads up to `chunk_size` bytes into `chunk` behind [`HEADROOM`] bytes of room. Returns the
/// chunk (its length is `HEADROOM` + the bytes read), the error that stopped reading (after
/// the bytes read before it) and whether the input ended.
fn read_chunk(
    reader: &mut dyn Read,
    mut chunk: Vec<u8>,
    chunk_size: usize,
) -> (Vec<u8>, Option<io::Error>, bool) {
    chunk.resize(HEADROOM + chunk_size, 0);
    let mut filled = HEADROOM;
    let error = loop {
        match reader.read(&mut chunk[filled..]) {
            Ok(0) => break None,
            Ok(n) => {
                filled += n;
                if filled == HEADROOM + chunk_size {
                    break None;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    chunk.truncate(filled);
    let done = filled < HEADROOM + chunk_size;
    (chunk, error, done)
}

/// The splitter: owns the reader thread and the current window of bytes.
pub struct Splitter {
    chunks: Receiver<io::Result<Vec<u8>>>,
    /// Spent buffers go back to the reader thread, so pages are not faulted in again.
    spent: SyncSender<Vec<u8>>,
    reader: Option<JoinHandle<()>>,
    /// Small read sizes: read on the calling thread instead.
    inline: Option<InlineReader>,
    buf: Vec<u8>,
    pos: usize,
    /// Document offset of `buf[0]` (may be negative: buffers start with headroom).
    base: i64,
    eof: bool,
    /// Whether the document's last byte was seen (for salvage figures).
    ended: bool,
    /// Lone surrogates replaced by U+FFFD in top-level keys ([`crate::json_lenient`]).
    replaced_surrogates: u64,
}

impl std::fmt::Debug for Splitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Splitter")
            .field("offset", &self.offset())
            .finish()
    }
}

impl Drop for Splitter {
    fn drop(&mut self) {
        // Dropping the receiver makes the reader thread's next send fail, so it ends.
        let (_, dummy) = sync_channel(0);
        drop(std::mem::replace(&mut self.chunks, dummy));
        if let Some(handle) = self.reader.take() {
            let _ = handle.join();
        }
    }
}

/// Where [`scan_value`] stopped: resumable, so a long value is scanned once however it is cut.
#[derive(Default)]
struct ScanState {
    scanned: usize,
    depth: u32,
    in_string: bool,
    escape: bool,
}

impl Splitter {
    /// Starts the reader thread over `reader`, with the default read size.
    pub fn new(reader: Box<dyn BufRead + Send>) -> Self {
        Self::with_chunk_size(reader, DEFAULT_CHUNK_SIZE)
    }

    /// Reads `reader` in chunks of `chunk_size` bytes (at least 1). Results do not depend on
    /// it; tests use tiny sizes to end windows everywhere. From [`INLINE_BELOW`] bytes up a
    /// reader thread reads ahead (and decompresses on the second core); smaller chunks are read
    /// on the calling thread, where a thread hand-off per few bytes would cost more than the
    /// read. Either way the splitter sees the same sequence of windows.
    pub fn with_chunk_size(mut reader: Box<dyn BufRead + Send>, chunk_size: usize) -> Self {
        let chunk_size = chunk_size.max(1);
        let (tx, rx) = sync_channel::<io::Result<Vec<u8>>>(4);
        let (spent_tx, spent_rx) = sync_channel::<Vec<u8>>(8);
        let mut splitter = Splitter {
            chunks: rx,
            spent: spent_tx,
            reader: None,
            inline: None,
            buf: Vec::new(),
            pos: 0,
            base: 0,
            eof: false,
            ended: false,
            replaced_surrogates: 0,
        };
        if chunk_size < INLINE_BELOW {
            splitter.inline = Some(InlineReader {
                reader,
                chunk_size,
                spare: Vec::new(),
                error: None,
                done: false,
            });
            return splitter;
        }
        splitter.reader = std::thread::Builder::new()
            .name("strato-read".into())
            .spawn(move || loop {
                let recycled = spent_rx.try_recv().unwrap_or_default();
                let (chunk, error, done) = read_chunk(&mut reader, recycled, chunk_size);
                if chunk.len() > HEADROOM && tx.send(Ok(chunk)).is_err() {
                    return;
                }
                if let Some(e) = error {
                    let _ = tx.send(Err(e));
                    return;
                }
                if done {
                    return;
                }
            })
            .ok();
        splitter
    }

    /// The next chunk: `None` at the end of input.
    fn next_chunk(&mut self) -> Option<io::Result<Vec<u8>>> {
        match &mut self.inline {
            None => self.chunks.recv().ok(),
            Some(inline) => loop {
                if let Some(e) = inline.error.take() {
                    inline.done = true;
                    return Some(Err(e));
                }
                if inline.done {
                    return None;
                }
                let recycled = std::mem::take(&mut inline.spare);
                let (chunk, error, done) =
                    read_chunk(&mut inline.reader, recycled, inline.chunk_size);
                inline.error = error;
                inline.done = done;
                if chunk.len() > HEADROOM {
                    return Some(Ok(chunk));
                }
            },
        }
    }

    /// Bytes of the document consumed so far (the offset of the next unread byte).
    pub fn consumed(&self) -> u64 {
        self.offset()
    }

    /// Hands a spent buffer back to the reader thread, unless it grew for a long value (then
    /// it is freed rather than kept alive as a chunk).
    fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= 2 * (HEADROOM + DEFAULT_CHUNK_SIZE) {
            match &mut self.inline {
                Some(inline) => inline.spare = buf,
                None => {
                    let _ = self.spent.try_send(buf);
                }
            }
        }
    }

    fn offset(&self) -> u64 {
        (self.base + self.pos as i64).max(0) as u64
    }

    fn syntax(&self, message: impl Into<String>) -> SplitError {
        SplitError::Syntax {
            offset: self.offset(),
            message: message.into(),
        }
    }

    /// Drops consumed bytes and appends the next chunk. False at end of input.
    fn fill(&mut self) -> Result<bool, SplitError> {
        if self.eof {
            return Ok(false);
        }
        match self.next_chunk() {
            Some(Ok(mut chunk)) => {
                let tail = self.buf.len() - self.pos;
                let tail_offset = self.base + self.pos as i64;
                let data = chunk.len() - HEADROOM;
                if tail <= HEADROOM && tail <= data {
                    // Put the unparsed tail in the new chunk's headroom: no copy of the chunk
                    // (and the tail is no longer than the chunk, so copying it is linear).
                    let start = HEADROOM - tail;
                    chunk[start..HEADROOM].copy_from_slice(&self.buf[self.pos..]);
                    let old = std::mem::replace(&mut self.buf, chunk);
                    self.recycle(old);
                    self.pos = start;
                    self.base = tail_offset - start as i64;
                } else {
                    // A value longer than the headroom or the chunk: keep growing the current
                    // buffer (amortised linear; the tail moves down once, then pos stays 0).
                    self.buf.drain(..self.pos);
                    self.base = tail_offset;
                    self.pos = 0;
                    self.buf.extend_from_slice(&chunk[HEADROOM..]);
                    self.recycle(chunk);
                }
                Ok(true)
            }
            Some(Err(e)) => Err(SplitError::Io(e)),
            None => {
                self.eof = true;
                Ok(false)
            }
        }
    }

    /// The next non-whitespace byte (not consumed), or None at end of input.
    fn peek(&mut self) -> Result<Option<u8>, SplitError> {
        loop {
            while self.pos < self.buf.len() {
                let b = self.buf[self.pos];
                if b.is_ascii_whitespace() {
                    self.pos += 1;
                } else {
                    return Ok(Some(b));
                }
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Finds the end of the JSON value starting at `self.pos`, reading more as needed.
    fn value_end(&mut self) -> Result<usize, SplitError> {
        let mut state = ScanState::default();
        loop {
            if let Some(end) = scan_value(&self.buf[self.pos..], &mut state, self.eof) {
                return Ok(self.pos + end);
            }
            if !self.fill()? {
                if let Some(end) = scan_value(&self.buf[self.pos..], &mut state, true) {
                    return Ok(self.pos + end);
                }
                return Err(self.syntax("unexpected end of data inside a value (file truncated?)"));
            }
        }
    }

    /// Runs the split, calling `each` for every top-level key and event. Returns whether a
    /// `traceEvents` array (or a bare event array) was found.
    pub fn run<F>(&mut self, mut each: F) -> Result<bool, SplitError>
    where
        F: FnMut(TopLevel<'_>) -> Result<Option<usize>, String>,
    {
        // A UTF-8 byte order mark is tolerated.
        self.peek()?;
        if self.buf[self.pos..].starts_with(b"\xEF\xBB\xBF") {
            self.pos += 3;
        }
        match self.peek()? {
            None => Err(self.syntax("no JSON value (empty document)")),
            Some(b'[') => {
                self.pos += 1;
                self.events(&mut each, true)?;
                self.expect_end()?;
                Ok(true)
            }
            Some(b'{') => {
                self.pos += 1;
                let mut saw_events = false;
                loop {
                    match self.peek()? {
                        Some(b'}') => {
                            self.pos += 1;
                            self.expect_end()?;
                            return Ok(saw_events);
                        }
                        Some(b'"') => {}
                        Some(_) => return Err(self.syntax("expected a key or '}'")),
                        None => return Err(self.syntax("unexpected end of data (file truncated?)")),
                    }
                    let end = self.value_end()?;
                    let key: Key<'_> = serde_json::from_slice(&self.buf[self.pos..end])
                        .map_err(|e| self.syntax(format!("bad key: {e}")))?;
                    let (key, replaced) = key.into_text();
                    self.replaced_surrogates += u64::from(replaced);
                    self.pos = end;
                    if self.peek()? != Some(b':') {
                        return Err(self.syntax("expected ':'"));
                    }
                    self.pos += 1;
                    match self.peek()? {
                        None => return Err(self.syntax("unexpected end of data (file truncated?)")),
                        Some(b'[') if key == "traceEvents" => {
                            self.pos += 1;
                            self.events(&mut each, false)?;
                            saw_events = true;
                        }
                        Some(_) if key == "traceEvents" => {
                            return Err(self.syntax("\"traceEvents\" is not an array"));
                        }
                        Some(_) => {
                            let end = self.value_end()?;
                            let offset = self.offset();
                            each(TopLevel::Key(&key, &self.buf[self.pos..end]))
                                .map_err(|message| SplitError::Event { offset, message })?;
                            self.pos = end;
                        }
                    }
                    match self.peek()? {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        Some(_) => return Err(self.syntax("expected ',' or '}'")),
                        None => return Err(self.syntax("unexpected end of data (file truncated?)")),
                    }
                }
            }
            Some(_) => Err(self.syntax("expected a JSON object or array")),
        }
    }

    /// After the document: only whitespace may follow. Reads the input to its end, so the
    /// decompressor checks the gzip trailer (CRC32, ISIZE) and any further member.
    fn expect_end(&mut self) -> Result<(), SplitError> {
        match self.peek()? {
            None => {
                self.ended = true;
                Ok(())
            }
            Some(_) => Err(self.syntax("data after the end of the JSON document")),
        }
    }

    /// Lone surrogates replaced by U+FFFD in the top-level keys read.
    pub fn replaced_surrogates(&self) -> u64 {
        self.replaced_surrogates
    }

    /// Whether the whole input was read and ended where a document may end.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Splits an event array whose '[' was just consumed.
    fn events<F>(&mut self, each: &mut F, bare: bool) -> Result<(), SplitError>
    where
        F: FnMut(TopLevel<'_>) -> Result<Option<usize>, String>,
    {
        loop {
            match self.peek()? {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'{') => {}
                Some(_) => return Err(self.syntax("an event is not a JSON object")),
                None if bare => {
                    self.ended = true;
                    return Ok(());
                }
                None => {
                    return Err(
                        self.syntax("unexpected end of data in traceEvents (file truncated?)")
                    )
                }
            }
            let offset = self.offset();
            // Fast path: the event is whole within the window (one parse, no scan).
            let quick = each(TopLevel::Event {
                bytes: &self.buf[self.pos..],
                offset,
                complete: false,
            })
            .map_err(|message| SplitError::Event { offset, message })?;
            let used = match quick {
                Some(used) => used,
                None => {
                    // Cut off or bad: find the end by scanning (linear), then parse once.
                    let end = self.value_end().map_err(|e| match e {
                        SplitError::Syntax { .. } => SplitError::Syntax {
                            offset,
                            message: "unexpected end of data inside an event (file truncated?)"
                                .into(),
                        },
                        other => other,
                    })?;
                    let bytes = &self.buf[self.pos..end];
                    match each(TopLevel::Event {
                        bytes,
                        offset,
                        complete: true,
                    }) {
                        Ok(Some(used)) if used == bytes.len() => used,
                        Ok(_) => {
                            return Err(SplitError::Event {
                                offset,
                                message: "bad event: not one JSON object".into(),
                            })
                        }
                        Err(message) => return Err(SplitError::Event { offset, message }),
                    }
                }
            };
            self.pos += used;
            match self.peek()? {
                Some(b',') => self.pos += 1,
                Some(b']') => {}
                Some(_) => return Err(self.syntax("expected ',' or ']' after an event")),
                None if bare => {
                    self.ended = true;
                    return Ok(());
                }
                None => {
                    return Err(
                        self.syntax("unexpected end of data in traceEvents (file truncated?)")
                    )
                }
            }
        }
    }
}

/// Scans the value at the start of `bytes`, resuming from `state`. Returns the end offset when
/// the value is complete within `bytes`. A scalar ends at a delimiter, or at the end of input
/// when `at_eof`.
fn scan_value(bytes: &[u8], state: &mut ScanState, at_eof: bool) -> Option<usize> {
    let first = *bytes.first()?;
    match first {
        b'{' | b'[' | b'"' => {
            let mut i = state.scanned;
            while i < bytes.len() {
                if state.in_string {
                    if state.escape {
                        state.escape = false;
                        i += 1;
                        continue;
                    }
                    match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                        None => {
                            i = bytes.len();
                            break;
                        }
                        Some(k) => {
                            i += k;
                            if bytes[i] == b'\\' {
                                state.escape = true;
                            } else {
                                state.in_string = false;
                                if state.depth == 0 {
                                    return Some(i + 1);
                                }
                            }
                            i += 1;
                        }
                    }
                    continue;
                }
                match bytes[i] {
                    b'"' => state.in_string = true,
                    b'{' | b'[' => state.depth += 1,
                    b'}' | b']' => {
                        state.depth = state.depth.saturating_sub(1);
                        if state.depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            state.scanned = i;
            None
        }
        _ => {
            let from = state.scanned.min(bytes.len());
            let end = bytes[from..]
                .iter()
                .position(|&b| matches!(b, b',' | b']' | b'}') || b.is_ascii_whitespace());
            match end {
                Some(e) => Some(from + e),
                None if at_eof => Some(bytes.len()),
                None => {
                    state.scanned = bytes.len();
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn split(text: &[u8]) -> Result<(bool, Vec<String>), SplitError> {
        split_with(text, DEFAULT_CHUNK_SIZE)
    }

    /// Splits with a given read size; the callback parses with serde like the importer does.
    fn split_with(text: &[u8], chunk: usize) -> Result<(bool, Vec<String>), SplitError> {
        let mut seen = Vec::new();
        let mut splitter = Splitter::with_chunk_size(Box::new(Cursor::new(text.to_vec())), chunk);
        let saw = splitter.run(|item| match item {
            TopLevel::Key(k, v) => {
                seen.push(format!("{k}={}", String::from_utf8_lossy(v)));
                Ok(Some(0))
            }
            TopLevel::Event {
                bytes, complete, ..
            } => {
                let parsed: Option<(&serde_json::value::RawValue, usize)> = if complete {
                    serde_json::from_slice(bytes)
                        .map(|v| Some((v, bytes.len())))
                        .map_err(|e| e.to_string())?
                } else {
                    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter();
                    match stream.next() {
                        Some(Ok(v)) => Some((v, stream.byte_offset())),
                        _ => None,
                    }
                };
                Ok(parsed.map(|(v, used)| {
                    seen.push(v.get().to_owned());
                    used
                }))
            }
        })?;
        Ok((saw, seen))
    }

    #[test]
    fn every_read_size_gives_the_same_split() {
        let doc = br#" {"a": -1.5e+3, "traceEvents": [ {"name":"x}\"]","v":-0.25E-7,"t":true,"n":null,"u":"\u00e9\ud83d\ude00"} , {"n":[1,{"b":2e5}], "f": false} ], "z": {"k":"v"}, "s":"str", "num": 12.5e-1 } "#;
        let expected = split(doc).unwrap();
        assert_eq!(expected.1.len(), 6);
        for chunk in 1..=doc.len() + 1 {
            let got = split_with(doc, chunk).unwrap();
            assert_eq!(got.1, expected.1, "read size {chunk}");
        }
    }

    #[test]
    fn bad_events_and_trailing_data_are_errors_at_every_read_size() {
        for chunk in [1, 2, 3, 7, 64, DEFAULT_CHUNK_SIZE] {
            for bad in [
                &br#"{"traceEvents":[{"a":1.}]}"#[..],
                br#"{"traceEvents":[{"a":tru}]}"#,
                br#"{"traceEvents":[{"a":1}]} x"#,
                br#"{"traceEvents":[{"a":1}]}{}"#,
                br#"[{"a":1}] ]"#,
                br#"{"traceEvents":[{"a":"\u12"}]}"#,
            ] {
                assert!(
                    split_with(bad, chunk).is_err(),
                    "{chunk} {:?}",
                    String::from_utf8_lossy(bad)
                );
            }
            assert!(split_with(b"{\"traceEvents\":[]} \r\n\t ", chunk).is_ok());
        }
    }

    #[test]
    fn splits_keys_and_events_with_tricky_strings() {
        let (saw, seen) = split(
            br#"{"a": 1, "traceEvents": [ {"name":"x}\"]"} , {"n":[1,{"b":2}]} ], "z": {"k":"v"}, "s":"str"}"#,
        )
        .unwrap();
        assert!(saw);
        assert_eq!(
            seen,
            vec![
                "a=1".to_owned(),
                r#"{"name":"x}\"]"}"#.into(),
                r#"{"n":[1,{"b":2}]}"#.into(),
                r#"z={"k":"v"}"#.into(),
                r#"s="str""#.into()
            ]
        );
    }

    #[test]
    fn events_spanning_many_chunks() {
        let mut doc = b"{\"traceEvents\":[".to_vec();
        let long = "x".repeat(3 * DEFAULT_CHUNK_SIZE);
        doc.extend_from_slice(format!("{{\"name\":\"{long}\"}},{{\"a\":1}}]}}").as_bytes());
        let (_, seen) = split(&doc).unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].len(), long.len() + 11);
        let mut many = b"[".to_vec();
        for i in 0..200_000 {
            many.extend_from_slice(format!("{{\"i\":{i},\"pad\":\"\\\\\\\"\"}},").as_bytes());
        }
        many.pop();
        many.push(b']');
        let (_, seen) = split(&many).unwrap();
        assert_eq!(seen.len(), 200_000);
        assert_eq!(seen[199_999], "{\"i\":199999,\"pad\":\"\\\\\\\"\"}");
    }

    #[test]
    fn bare_array_may_lack_its_bracket_but_objects_may_not() {
        let (_, seen) = split(b"[{\"a\":1},{\"b\":2},").unwrap();
        assert_eq!(seen.len(), 2);
        assert!(matches!(
            split(b"{\"traceEvents\":[{\"a\":1},"),
            Err(SplitError::Syntax { .. })
        ));
        assert!(matches!(
            split(b"{\"traceEvents\":[{\"a\":1"),
            Err(SplitError::Syntax { .. })
        ));
        assert!(matches!(split(b"nope"), Err(SplitError::Syntax { .. })));
        assert!(matches!(split(b"   "), Err(SplitError::Syntax { .. })));
        assert!(matches!(
            split(b"{\"traceEvents\":3}"),
            Err(SplitError::Syntax { .. })
        ));
        let (saw, _) = split(b"{\"x\":[1,2]}").unwrap();
        assert!(!saw);
    }
}
