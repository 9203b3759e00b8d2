//! Attribute blobs (`args` JSON object texts) of spans and instants, stored compactly.
//!
//! Why: a large trace carries millions of small args objects. One heap allocation per blob
//! (`Box<str>`: 16 bytes of pointer and length, 8-16 bytes of allocator header and rounding)
//! plus the source's indentation inside each object cost as much as the text itself. Here every
//! blob lives in one text arena, and blob `i` is `text[ends[i-1]..ends[i]]` (8 bytes of index
//! per blob). Blobs are stored minified: whitespace outside JSON strings is dropped on
//! [`ArgsTable::push`] (the object means the same; `{"a": [1, 2]}` is kept as `{"a":[1,2]}`).

use serde::{Deserialize, Serialize};

use crate::ArgsId;

/// The attribute blobs of a trace, referred to by [`ArgsId`] (the index of the blob).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgsTable {
    /// Every blob, one after the other.
    text: String,
    /// End offset in `text` of each blob.
    ends: Vec<u64>,
}

impl ArgsTable {
    /// Appends a blob (minified: whitespace outside strings dropped) and returns its id.
    ///
    /// Panics when the table already holds `u32::MAX` blobs (an [`ArgsId`] is 32 bits).
    pub fn push(&mut self, json_object: &str) -> ArgsId {
        let id = u32::try_from(self.ends.len()).expect("more than u32::MAX args blobs");
        push_minified(&mut self.text, json_object);
        self.ends.push(self.text.len() as u64);
        ArgsId(id)
    }

    /// The blob with index `index`, when it exists.
    pub fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)? as usize;
        let start = match index {
            0 => 0,
            i => self.ends[i - 1] as usize,
        };
        Some(&self.text[start..end])
    }

    /// Number of blobs.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no blob.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total bytes of blob text held.
    pub fn text_bytes(&self) -> usize {
        self.text.len()
    }

    /// The blobs in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.range(0..self.len())
    }

    /// The blobs with ids in `ids` (clamped to the table), in id order.
    pub fn range(&self, ids: std::ops::Range<usize>) -> impl ExactSizeIterator<Item = &str> + '_ {
        let end = ids.end.min(self.len());
        (ids.start.min(end)..end).map(|i| self.get(i).unwrap_or_default())
    }

    /// Appends every blob of `other` (ids shift by `self.len()`).
    pub fn append(&mut self, other: ArgsTable) {
        if self.text.is_empty() && self.ends.is_empty() {
            // Nothing to renumber: moved, not copied.
            *self = other;
            return;
        }
        let base = self.text.len() as u64;
        self.text.push_str(&other.text);
        self.ends.extend(other.ends.iter().map(|e| e + base));
    }

    /// Heap bytes held (capacities of the text arena and of the index), with the growth the
    /// next push may cause when either is full: what a memory budget counts.
    pub fn heap_bytes(&self) -> usize {
        let room = self.text.capacity() - self.text.len();
        let text = self.text.capacity()
            + if room < (64 << 10) {
                self.text.capacity()
            } else {
                0
            };
        let ends = self.ends.capacity()
            + if self.ends.len() == self.ends.capacity() {
                self.ends.capacity().max(4)
            } else {
                0
            };
        text + ends * std::mem::size_of::<u64>()
    }

    /// Reserves room for `blobs` more blobs of `bytes` more text in all.
    pub fn reserve(&mut self, blobs: usize, bytes: usize) {
        self.ends.reserve(blobs);
        self.text.reserve(bytes);
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
        assert_eq!(t.get(0), Some("{\"External id\":3073,\"grid\":[1,1,1]}"));
        assert_eq!(t.get(1), Some("{}"));
        assert_eq!(t.get(2), Some("{\"s\":\"a b\\\" c\\\\\",\"t\":\"\\t \"}"));
        assert_eq!(t.get(3), None);
        assert_eq!(t.len(), 3);
        let parsed: serde_json::Value = serde_json::from_str(t.get(2).unwrap()).unwrap();
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
            let got: serde_json::Value = serde_json::from_str(table.get(i).unwrap()).unwrap();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn model_sizes_stay_known() {
        // docs/benchmarks.md counts memory per event from these sizes: update it with them.
        assert_eq!(std::mem::size_of::<crate::Span>(), 72);
        assert_eq!(std::mem::size_of::<crate::Instant>(), 32);
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
}
