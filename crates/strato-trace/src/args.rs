//! Attribute blobs (`args` JSON object texts) of spans and instants, stored compactly.
//!
//! Why: a large trace carries millions of small args objects, and their text is the largest
//! part of a trace held in memory (a third of a Kineto JSON file's bytes; more than the spans
//! themselves). One heap allocation per blob (`Box<str>`: 16 bytes of pointer and length, 8-16
//! bytes of allocator header and rounding) plus the source's indentation inside each object
//! would cost as much again. So:
//!
//! - blobs are stored minified: whitespace outside JSON strings is dropped on
//!   [`ArgsTable::push`] (the object means the same; `{"a": [1, 2]}` is kept as `{"a":[1,2]}`);
//! - consecutive blobs share a block of about [`BLOCK_BYTES`] of text, and a full block is
//!   compressed (LZ4: args text compresses 5-6x on the real traces of `../shared/data`); the
//!   index costs 4 bytes per blob (its end inside its block) and 32 bytes per block;
//! - reading a blob of a compressed block ([`ArgsTable::get`]) decompresses the whole block
//!   once into a small per-thread cache of the last [`CACHED_BLOCKS`] blocks read, so reading
//!   blobs in id order (or a few ids apart, as walking two or three tracks side by side does)
//!   decompresses each block once. The text read is an [`ArgsText`], which derefs to `&str`.
//!
//! A table can also keep its blocks uncompressed ([`ArgsTable::uncompressed`]): the tables of
//! a streamed batch, read once and dropped, are not worth compressing.

use std::cell::RefCell;
use std::ops::{Deref, Range};
use std::rc::Rc;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ArgsId;

/// Text of consecutive blobs kept together, and compressed together once full.
pub const BLOCK_BYTES: usize = 16 << 10;

/// Size past which an uncompressed table starts a new block (its ends are 32-bit offsets).
const UNCOMPRESSED_BLOCK_BYTES: usize = 1 << 30;

/// Decompressed blocks each thread keeps for the next reads ([`ArgsTable::get`]).
pub const CACHED_BLOCKS: usize = 8;

/// The attribute blobs of a trace, referred to by [`ArgsId`] (the index of the blob).
///
/// Two tables are equal when they hold the same blobs in the same order, whatever their
/// blocks and compression.
#[derive(Clone)]
pub struct ArgsTable {
    /// The full blocks, in id order.
    sealed: Vec<Block>,
    /// Text of the blobs after the last sealed block (always shorter than the block size).
    open: String,
    /// Id of the first blob of `open`: the number of blobs in sealed blocks.
    open_first: u32,
    /// Per blob: its end offset inside its block's text. For the last blob of a sealed block
    /// it is not read (that end is the block's length, which may pass `u32::MAX`).
    ends: Vec<u32>,
    /// Text bytes of every blob.
    text_bytes: u64,
    /// Bytes the sealed blocks hold (compressed or not).
    sealed_bytes: u64,
    /// Compress blocks as they fill up.
    compress: bool,
}

/// Consecutive blobs' text, sealed.
#[derive(Debug, Clone)]
struct Block {
    /// Id of the block's first blob.
    first: u32,
    /// Length of the block's text.
    text_len: u64,
    /// LZ4 block of the text (`lz4_flex::block`), or the text itself when not compressed.
    data: Arc<[u8]>,
    compressed: bool,
}

impl Default for ArgsTable {
    fn default() -> Self {
        ArgsTable {
            sealed: Vec::new(),
            open: String::new(),
            open_first: 0,
            ends: Vec::new(),
            text_bytes: 0,
            sealed_bytes: 0,
            compress: true,
        }
    }
}

impl std::fmt::Debug for ArgsTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsTable")
            .field("blobs", &self.len())
            .field("text_bytes", &self.text_bytes)
            .field("blocks", &self.sealed.len())
            .field("sealed_bytes", &self.sealed_bytes)
            .finish()
    }
}

impl PartialEq for ArgsTable {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.text_bytes == other.text_bytes
            && self.iter().zip(other.iter()).all(|(a, b)| *a == *b)
    }
}

impl Eq for ArgsTable {}

/// The text of one blob: derefs to `&str`. It borrows the table, or shares a decompressed
/// block with the reading thread's cache (cheap to hold; not sent across threads).
#[derive(Clone)]
pub struct ArgsText<'a> {
    source: TextSource<'a>,
}

#[derive(Clone)]
enum TextSource<'a> {
    Borrowed(&'a str),
    Decoded(Rc<String>, Range<usize>),
}

impl Deref for ArgsText<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match &self.source {
            TextSource::Borrowed(s) => s,
            TextSource::Decoded(block, range) => &block[range.clone()],
        }
    }
}

impl AsRef<str> for ArgsText<'_> {
    fn as_ref(&self) -> &str {
        self
    }
}

impl std::fmt::Debug for ArgsText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl std::fmt::Display for ArgsText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl PartialEq for ArgsText<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for ArgsText<'_> {}

impl PartialEq<str> for ArgsText<'_> {
    fn eq(&self, other: &str) -> bool {
        **self == *other
    }
}

impl PartialEq<String> for ArgsText<'_> {
    fn eq(&self, other: &String) -> bool {
        **self == **other
    }
}

impl PartialEq<&str> for ArgsText<'_> {
    fn eq(&self, other: &&str) -> bool {
        **self == **other
    }
}

/// A block a thread decompressed: the block's data (which identifies it, and keeps its address
/// from being reused while cached) and its text.
type DecodedBlock = (Arc<[u8]>, Rc<String>);

thread_local! {
    /// The blocks this thread decompressed last, most recent first.
    static DECODED: RefCell<Vec<DecodedBlock>> = const { RefCell::new(Vec::new()) };
}

impl Block {
    /// The block's text, decompressed once per thread while it stays among the
    /// [`CACHED_BLOCKS`] last read.
    fn text(&self) -> Rc<String> {
        DECODED.with(|cache| {
            let mut cache = cache.borrow_mut();
            if let Some(at) = cache.iter().position(|(d, _)| Arc::ptr_eq(d, &self.data)) {
                let entry = cache.remove(at);
                let text = Rc::clone(&entry.1);
                cache.insert(0, entry);
                return text;
            }
            // The least recent block's buffer is reused when nobody holds its text any more.
            let buffer = if cache.len() >= CACHED_BLOCKS {
                cache
                    .pop()
                    .and_then(|(_, text)| Rc::try_unwrap(text).ok())
                    .unwrap_or_default()
            } else {
                String::new()
            };
            let text = Rc::new(self.decode_into(buffer));
            cache.insert(0, (Arc::clone(&self.data), Rc::clone(&text)));
            text
        })
    }

    /// The block's text, written over `buffer`.
    fn decode_into(&self, buffer: String) -> String {
        let mut bytes = buffer.into_bytes();
        bytes.clear();
        if self.compressed {
            // The table wrote this block: it decompresses to `text_len` bytes of UTF-8.
            bytes.resize(self.text_len as usize, 0);
            let written = lz4_flex::block::decompress_into(&self.data, &mut bytes)
                .expect("an args block of this table decompresses");
            bytes.truncate(written);
        } else {
            bytes.extend_from_slice(&self.data);
        }
        String::from_utf8(bytes).expect("an args block holds UTF-8 text")
    }
}

impl ArgsTable {
    /// An empty table that keeps its text uncompressed: for tables read once and dropped
    /// (a streamed batch's), where compressing would cost time and save nothing.
    pub fn uncompressed() -> ArgsTable {
        ArgsTable {
            compress: false,
            ..ArgsTable::default()
        }
    }

    /// Appends a blob (minified: whitespace outside strings dropped) and returns its id.
    ///
    /// Panics when the table already holds `u32::MAX` blobs (an [`ArgsId`] is 32 bits).
    pub fn push(&mut self, json_object: &str) -> ArgsId {
        let id = u32::try_from(self.ends.len()).expect("more than u32::MAX args blobs");
        let before = self.open.len();
        push_minified(&mut self.open, json_object);
        self.text_bytes += (self.open.len() - before) as u64;
        // Past `u32::MAX` only for the last blob of a block, whose end is never read.
        self.ends
            .push(u32::try_from(self.open.len()).unwrap_or(u32::MAX));
        if self.open.len() >= self.block_bytes() {
            self.seal();
        }
        ArgsId(id)
    }

    fn block_bytes(&self) -> usize {
        if self.compress {
            BLOCK_BYTES
        } else {
            UNCOMPRESSED_BLOCK_BYTES
        }
    }

    /// Closes the open block (compressing it when the table compresses).
    fn seal(&mut self) {
        if self.ends.len() == self.open_first as usize {
            return;
        }
        let data: Arc<[u8]> = if self.compress {
            Arc::from(lz4_flex::block::compress(self.open.as_bytes()))
        } else {
            Arc::from(self.open.as_bytes())
        };
        self.sealed_bytes += data.len() as u64;
        self.sealed.push(Block {
            first: self.open_first,
            text_len: self.open.len() as u64,
            data,
            compressed: self.compress,
        });
        self.open.clear();
        self.open_first = self.ends.len() as u32;
    }

    /// The blob with index `index`, when it exists.
    pub fn get(&self, index: usize) -> Option<ArgsText<'_>> {
        if index >= self.ends.len() {
            return None;
        }
        let start_of = |first: usize| match index {
            i if i == first => 0,
            i => self.ends[i - 1] as usize,
        };
        if index >= self.open_first as usize {
            let range = start_of(self.open_first as usize)..self.ends[index] as usize;
            return Some(ArgsText {
                source: TextSource::Borrowed(&self.open[range]),
            });
        }
        let b = self.sealed.partition_point(|b| b.first as usize <= index) - 1;
        let block = &self.sealed[b];
        let next_first = self.sealed.get(b + 1).map_or(self.open_first, |n| n.first) as usize;
        let end = if index + 1 == next_first {
            block.text_len as usize
        } else {
            self.ends[index] as usize
        };
        let range = start_of(block.first as usize)..end;
        Some(ArgsText {
            source: TextSource::Decoded(block.text(), range),
        })
    }

    /// Number of blobs.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no blob.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total bytes of blob text held (uncompressed).
    pub fn text_bytes(&self) -> usize {
        self.text_bytes as usize
    }

    /// The blobs in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ArgsText<'_>> + '_ {
        self.range(0..self.len())
    }

    /// The blobs with ids in `ids` (clamped to the table), in id order.
    pub fn range(
        &self,
        ids: std::ops::Range<usize>,
    ) -> impl ExactSizeIterator<Item = ArgsText<'_>> + '_ {
        let end = ids.end.min(self.len());
        (ids.start.min(end)..end).map(|i| {
            self.get(i).unwrap_or(ArgsText {
                source: TextSource::Borrowed(""),
            })
        })
    }

    /// Appends every blob of `other` (ids shift by `self.len()`). Its sealed blocks are moved,
    /// not copied or compressed again.
    pub fn append(&mut self, mut other: ArgsTable) {
        if self.is_empty() {
            // Nothing to renumber: moved, not copied.
            other.compress = self.compress;
            *self = other;
            return;
        }
        self.seal();
        let base = self.open_first;
        let shifted = |first: u32| {
            first
                .checked_add(base)
                .expect("more than u32::MAX args blobs")
        };
        for mut block in other.sealed {
            block.first = shifted(block.first);
            self.sealed_bytes += block.data.len() as u64;
            self.sealed.push(block);
        }
        self.open_first = shifted(other.open_first);
        self.ends.extend_from_slice(&other.ends);
        self.text_bytes += other.text_bytes;
        self.open = other.open;
        if self.open.len() >= self.block_bytes() {
            self.seal();
        }
    }

    /// Heap bytes held (sealed blocks, the open block, the index), with the growth the next
    /// push may cause when the index is full: what a memory budget counts.
    pub fn heap_bytes(&self) -> usize {
        let ends = self.ends.capacity()
            + if self.ends.len() == self.ends.capacity() {
                self.ends.capacity().max(4)
            } else {
                0
            };
        self.sealed_bytes as usize
            + self.sealed.capacity() * std::mem::size_of::<Block>()
            + self
                .open
                .capacity()
                .max(self.block_bytes().min(BLOCK_BYTES))
            + ends * std::mem::size_of::<u32>()
    }

    /// Reserves room for `blobs` more blobs (their text goes to blocks as they fill).
    pub fn reserve(&mut self, blobs: usize, _bytes: usize) {
        self.ends.reserve(blobs);
    }
}

impl<S: AsRef<str>> FromIterator<S> for ArgsTable {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut table = ArgsTable::default();
        for blob in iter {
            table.push(blob.as_ref());
        }
        table
    }
}

/// A table is written as the sequence of its blobs' texts.
impl Serialize for ArgsTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(|t| t.to_string()))
    }
}

impl<'de> Deserialize<'de> for ArgsTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let blobs = Vec::<String>::deserialize(deserializer)?;
        Ok(blobs.iter().collect())
    }
}

/// Appends `json` to `out` without the whitespace outside strings. Text that is not JSON is
/// kept as it is, except for that whitespace.
fn push_minified(out: &mut String, json: &str) {
    let bytes = json.as_bytes();
    if !bytes
        .iter()
        .any(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
    {
        out.push_str(json);
        return;
    }
    let mut in_string = false;
    let mut escaped = false;
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            // ASCII whitespace is never inside a multi-byte UTF-8 sequence: slicing is safe.
            out.push_str(&json[run_start..i]);
            run_start = i + 1;
        }
    }
    out.push_str(&json[run_start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_minified() {
        let mut t = ArgsTable::default();
        let a = t.push("{\n  \"External id\": 3073, \"grid\": [1, 1, 1]\n}");
        let b = t.push("{}");
        let c = t.push("{\"s\": \"a b\\\" c\\\\\", \"t\" : \"\\t \"}");
        assert_eq!((a.0, b.0, c.0), (0, 1, 2));
        assert_eq!(
            t.get(0).as_deref(),
            Some("{\"External id\":3073,\"grid\":[1,1,1]}")
        );
        assert_eq!(t.get(1).as_deref(), Some("{}"));
        assert_eq!(
            t.get(2).as_deref(),
            Some("{\"s\":\"a b\\\" c\\\\\",\"t\":\"\\t \"}")
        );
        assert_eq!(t.get(3), None);
        assert_eq!(t.len(), 3);
        let parsed: serde_json::Value = serde_json::from_str(&t.get(2).unwrap()).unwrap();
        assert_eq!(parsed["s"], "a b\" c\\");
        assert_eq!(parsed["t"], "\t ");
    }

    #[test]
    fn minified_blob_parses_to_the_same_value() {
        let texts = [
            "{ \"Input Dims\": [[64, 1024], []], \"name\": \"é x\" , \"v\": -1.5e3 }",
            "{\r\n\t\"a\" :\r\n\t{ \"b\" : null }\r\n}",
        ];
        let table: ArgsTable = texts.iter().collect();
        for (i, text) in texts.iter().enumerate() {
            let want: serde_json::Value = serde_json::from_str(text).unwrap();
            let got: serde_json::Value = serde_json::from_str(&table.get(i).unwrap()).unwrap();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn model_sizes_stay_known() {
        // docs/benchmarks.md counts memory per event from these sizes: update it with them.
        assert_eq!(std::mem::size_of::<crate::Span>(), 56);
        assert_eq!(std::mem::size_of::<crate::Instant>(), 32);
        // The module header counts the index per block from this.
        assert_eq!(std::mem::size_of::<Block>(), 32);
    }

    #[test]
    fn append_shifts_ids() {
        let mut a: ArgsTable = ["{\"x\":1}"].into_iter().collect();
        let b: ArgsTable = ["{\"y\":2}", "{\"z\":3}"].into_iter().collect();
        a.append(b);
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            ["{\"x\":1}", "{\"y\":2}", "{\"z\":3}"]
        );
    }

    /// A blob of `len` characters drawn from `seed`: JSON-ish text with repeats (so blocks
    /// compress), multi-byte characters and whitespace outside strings (which is dropped).
    fn blob(seed: u64, len: usize) -> String {
        let pieces = [
            "\"Input Dims\": [[64, 1024], []]",
            "\"é\"",
            "\"grid\":[1,1,1]",
            " ",
            "7",
            "\"a b\"",
        ];
        let mut out = String::from("{");
        let mut x = seed;
        while out.len() < len {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.push_str(pieces[(x >> 33) as usize % pieces.len()]);
            out.push(',');
        }
        out.push('}');
        out
    }

    fn minified(text: &str) -> String {
        let mut out = String::new();
        push_minified(&mut out, text);
        out
    }

    proptest::proptest! {
        /// Whatever the blob sizes (empty, small, over a block), the split points of `append`
        /// and the compression, every blob reads back as pushed (minified), in every access
        /// path, and the tables compare equal.
        #[test]
        fn blobs_read_back_across_blocks_and_appends(
            sizes in proptest::collection::vec(
                proptest::prop_oneof![0usize..40, 40usize..400, (BLOCK_BYTES - 50)..(BLOCK_BYTES + 50), (2 * BLOCK_BYTES)..(3 * BLOCK_BYTES)],
                0..120,
            ),
            split in 0usize..120,
            compress_a in proptest::bool::ANY,
            compress_b in proptest::bool::ANY,
        ) {
            let blobs: Vec<String> = sizes.iter().enumerate().map(|(i, &n)| blob(i as u64, n)).collect();
            let want: Vec<String> = blobs.iter().map(|b| minified(b)).collect();
            let new = |compress: bool| if compress { ArgsTable::default() } else { ArgsTable::uncompressed() };
            let mut whole = new(compress_a);
            for b in &blobs {
                whole.push(b);
            }
            let split = split.min(blobs.len());
            let mut a = new(compress_a);
            let mut b = new(compress_b);
            for x in &blobs[..split] {
                a.push(x);
            }
            for x in &blobs[split..] {
                b.push(x);
            }
            a.append(b);
            for t in [&whole, &a] {
                proptest::prop_assert_eq!(t.len(), want.len());
                proptest::prop_assert_eq!(t.text_bytes(), want.iter().map(String::len).sum::<usize>());
                // Backwards (every read a different block from the one before) and forwards.
                for i in (0..want.len()).rev() {
                    let got = t.get(i);
                    proptest::prop_assert_eq!(got.as_deref(), Some(want[i].as_str()));
                }
                let read: Vec<String> = t.iter().map(|x| x.to_string()).collect();
                proptest::prop_assert_eq!(&read, &want);
                let mid = want.len() / 2;
                let part: Vec<String> = t.range(mid..want.len() + 5).map(|x| x.to_string()).collect();
                proptest::prop_assert_eq!(&part[..], &want[mid..]);
                proptest::prop_assert!(t.get(want.len()).is_none());
            }
            proptest::prop_assert_eq!(&whole, &a);
            let json = serde_json::to_string(&whole).unwrap();
            let back: ArgsTable = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(&back, &whole);
        }
    }

    #[test]
    fn compressed_blocks_hold_less_than_the_text() {
        let mut t = ArgsTable::default();
        let mut plain = ArgsTable::uncompressed();
        for i in 0..20_000u64 {
            let b = format!(
                "{{\"External id\":{i},\"queued\":0,\"device\":0,\"stream\":7,\"grid\":[{},1,1]}}",
                i % 97
            );
            t.push(&b);
            plain.push(&b);
        }
        assert_eq!(t, plain);
        assert!(t.sealed.len() > 10);
        assert!(t.sealed.iter().all(|b| b.compressed));
        assert!(plain.sealed.is_empty());
        // The text is about 1.4 MB; compressed it is several times smaller, index included.
        assert!(
            t.heap_bytes() * 3 < t.text_bytes(),
            "{} of {}",
            t.heap_bytes(),
            t.text_bytes()
        );
        assert!(plain.heap_bytes() > plain.text_bytes());
    }

    #[test]
    fn tables_are_read_from_many_threads_and_dropped_safely() {
        let tables: Vec<ArgsTable> = (0..3u64)
            .map(|k| (0..3_000u64).map(|i| blob(k * 10_000 + i, 60)).collect())
            .collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    // More tables and blocks than a thread caches, read interleaved.
                    for i in (0..3_000).step_by(7) {
                        for (k, t) in tables.iter().enumerate() {
                            let want = minified(&blob(k as u64 * 10_000 + i as u64, 60));
                            assert_eq!(t.get(i).as_deref(), Some(want.as_str()));
                        }
                    }
                });
            }
        });
        // A table dropped and another built in its place never reads the old one's cache.
        let first = tables[0].get(5).unwrap().to_string();
        drop(tables);
        let other: ArgsTable = (0..3_000u64).map(|i| blob(99_000 + i, 60)).collect();
        assert_ne!(other.get(5).unwrap().to_string(), first);
        assert_eq!(other.get(5).unwrap(), minified(&blob(99_005, 60)));
    }
}
