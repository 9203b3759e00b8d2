//! String interning: names and categories repeat millions of times in a trace (kernel names
//! are hundreds of bytes), so spans carry a 4-byte [`StrId`] into the trace's [`StringTable`].

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Index of a string in a [`StringTable`]. Id 0 is always the empty string.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct StrId(pub u32);

impl StrId {
    /// The empty string, present in every table.
    pub const EMPTY: StrId = StrId(0);
}

/// Interned strings. Interning the same text twice returns the same id.
#[derive(Debug, Clone)]
pub struct StringTable {
    strings: Vec<Box<str>>,
    index: FxHashMap<Box<str>, StrId>,
    /// Total bytes of the texts (for [`StringTable::heap_bytes`]).
    text_bytes: usize,
}

impl Default for StringTable {
    fn default() -> Self {
        let mut table = StringTable {
            strings: Vec::new(),
            index: FxHashMap::default(),
            text_bytes: 0,
        };
        table.intern("");
        table
    }
}

impl PartialEq for StringTable {
    fn eq(&self, other: &Self) -> bool {
        self.strings == other.strings
    }
}

impl StringTable {
    /// Returns the id of `text`, adding it if new.
    pub fn intern(&mut self, text: &str) -> StrId {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        let id = StrId(u32::try_from(self.strings.len()).expect("more than 4 billion strings"));
        self.strings.push(text.into());
        self.index.insert(text.into(), id);
        self.text_bytes += text.len();
        id
    }

    /// An estimate of the heap bytes the table holds (texts twice, the id list and the
    /// index), including the growth the next new string may cause: for the memory budget.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Box<str>, StrId)>() + 1;
        let mut bytes = 2 * self.text_bytes
            + self.strings.capacity() * std::mem::size_of::<Box<str>>()
            + self.index.capacity() * entry;
        if self.strings.len() == self.strings.capacity() {
            bytes += self.strings.capacity() * std::mem::size_of::<Box<str>>();
        }
        if self.index.len() == self.index.capacity() {
            bytes += self.index.capacity() * entry;
        }
        bytes
    }

    /// The id of `text` if it was interned.
    pub fn lookup(&self, text: &str) -> Option<StrId> {
        self.index.get(text).copied()
    }

    /// The text of `id`; the empty string for an id that is not in the table.
    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id.0 as usize).map_or("", |s| s)
    }

    /// Number of strings, the empty one included.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Never true: the empty string is always present.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Replaces the text of `id` with `text`, keeping the id, so that everything naming `id`
    /// now reads `text` (redaction rewrites a name this way). The texts stay unique: when
    /// `text` is already another id's, ` (2)`, ` (3)`, ... is appended until it is not. Returns
    /// the text stored. The empty string's id and ids not in the table are left as they are.
    pub fn replace(&mut self, id: StrId, text: &str) -> &str {
        let i = id.0 as usize;
        if id == StrId::EMPTY || i >= self.strings.len() || &*self.strings[i] == text {
            return self.get(id);
        }
        let mut unique = text.to_owned();
        let mut n = 1;
        while self.index.contains_key(unique.as_str()) {
            n += 1;
            unique = format!("{text} ({n})");
        }
        let old = std::mem::replace(&mut self.strings[i], unique.as_str().into());
        self.index.remove(&old);
        self.text_bytes = self.text_bytes - old.len() + unique.len();
        self.index.insert(unique.into(), id);
        &self.strings[i]
    }

    /// All strings in id order.
    pub fn iter(&self) -> impl Iterator<Item = (StrId, &str)> {
        self.strings
            .iter()
            .enumerate()
            .map(|(i, s)| (StrId(i as u32), &**s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_idempotent_and_empty_is_zero() {
        let mut table = StringTable::default();
        assert_eq!(table.lookup(""), Some(StrId::EMPTY));
        let a = table.intern("cudaLaunchKernel");
        let b = table.intern("kernel");
        assert_ne!(a, b);
        assert_eq!(table.intern("cudaLaunchKernel"), a);
        assert_eq!(table.get(a), "cudaLaunchKernel");
        assert_eq!(table.len(), 3);
        assert_eq!(table.get(StrId(99)), "");
    }

    #[test]
    fn replacing_keeps_the_id_and_the_texts_unique() {
        let mut table = StringTable::default();
        let a = table.intern("load https://u:pw@host");
        let b = table.intern("load https://u:<x>@host");
        assert_eq!(
            table.replace(a, "load https://u:<x>@host"),
            "load https://u:<x>@host (2)"
        );
        assert_eq!(table.lookup("load https://u:<x>@host (2)"), Some(a));
        assert_eq!(table.lookup("load https://u:pw@host"), None);
        assert_eq!(table.get(b), "load https://u:<x>@host");
        assert_eq!(table.replace(b, "other"), "other");
        assert_eq!(table.lookup("other"), Some(b));
        assert_eq!(table.replace(StrId::EMPTY, "x"), "");
        assert_eq!(table.replace(StrId(99), "x"), "");
        assert_eq!(table.intern("load https://u:<x>@host"), StrId(3));
    }
}
