//! Reading JSON values as leniently as the grammar allows, for the Chrome/Kineto importer.
//!
//! Owns the rules that make every grammatical JSON document (RFC 8259; what Python's `json`
//! reads) import, where serde's typed parsing would refuse it:
//! - **Lone surrogates.** `"\ud800"` is grammatical JSON (Python reads it), but not a Unicode
//!   string: serde refuses it in a `str`. Each lone surrogate of a string the importer decodes
//!   (names, categories, keys, metadata names) becomes U+FFFD and is counted (the importer
//!   reports the count as `lone_surrogates_replaced`). Text kept verbatim (args, top-level
//!   metadata) keeps its escapes as written: it stays valid JSON.
//! - **Any value where a string or a number is expected.** A field is first taken as its raw
//!   JSON text ([`RawValue`]: checked for grammar only, never for range or type), then read:
//!   a string is decoded, any other value is its text as written (`"name": 123` is `123`), and
//!   a number of any size or precision is kept as text too (`1e400` does not overflow).
//! - **Duplicate keys.** The importer's own map visitors keep the last value of a key, as
//!   Python does (serde's derived structs refuse a duplicate).
//!
//! Two speeds: reading every field through its raw text costs about a third more time on a
//! whole Kineto file, so an event is first read the fast way (strings and numbers through
//! serde's visitors, refusing anything else), and only an event that fails is read again in
//! [`lenient`] mode, where the types here take every value through its raw text. The answer is
//! the same either way for every event the fast way accepts.

use std::borrow::Cow;
use std::cell::Cell;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::value::RawValue;

/// A JSON value read as text: a string decoded (lone surrogates replaced and counted in
/// `replaced`), any other value as written.
#[derive(Debug, Clone)]
pub struct LooseStr<'a> {
    pub text: Cow<'a, str>,
    /// Lone surrogates replaced by U+FFFD.
    pub replaced: u32,
    /// Whether the value was a JSON string (else it is the text of a number, a literal, an
    /// array or an object).
    pub was_string: bool,
}

impl<'a> LooseStr<'a> {
    /// Reads the raw text of one JSON value (already checked for grammar).
    pub fn from_raw(raw: &'a str) -> Self {
        let raw = trim_json(raw);
        let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
            return LooseStr {
                text: Cow::Borrowed(raw),
                replaced: 0,
                was_string: false,
            };
        };
        if !inner.contains('\\') {
            // Without escapes a string's text is its value (control characters were refused
            // by the grammar check).
            return LooseStr {
                text: Cow::Borrowed(inner),
                replaced: 0,
                was_string: true,
            };
        }
        let (text, replaced) = decode_string(raw);
        LooseStr {
            text: Cow::Owned(text),
            replaced,
            was_string: true,
        }
    }
}

thread_local! {
    /// Whether this thread reads in lenient mode (see [`lenient`]).
    static LENIENT: Cell<bool> = const { Cell::new(false) };
    /// Lone surrogates replaced in values read without a count of their own (the importer's
    /// `Loose` pid / tid / id) while the current [`LenientGuard`] lives.
    static UNCOUNTED_REPLACED: Cell<u32> = const { Cell::new(0) };
}

/// Adds `n` lone surrogates replaced in a value whose type has no count of its own (the
/// importer's `Loose`), for [`LenientGuard::take_replaced`]. Outside lenient mode nothing is
/// kept: only the lenient reading decodes such strings for an event.
pub fn note_replaced(n: u32) {
    if is_lenient() {
        UNCOUNTED_REPLACED.with(|c| c.set(c.get().saturating_add(n)));
    }
}

/// Lenient mode while the guard lives: the types of this module (and the importer's `Loose`)
/// read every value through its raw text, so no grammatical value is refused. For re-reading
/// the rare event the fast way refused.
pub fn lenient() -> LenientGuard {
    LENIENT.with(|l| l.set(true));
    UNCOUNTED_REPLACED.with(|c| c.set(0));
    LenientGuard(())
}

/// Ends lenient mode when dropped.
#[derive(Debug)]
pub struct LenientGuard(());

impl LenientGuard {
    /// The lone surrogates [`note_replaced`] while this guard lived (or since the last take).
    pub fn take_replaced(&self) -> u32 {
        UNCOUNTED_REPLACED.with(|c| c.replace(0))
    }
}

impl Drop for LenientGuard {
    fn drop(&mut self) {
        LENIENT.with(|l| l.set(false));
    }
}

/// Whether values are read leniently now (see [`lenient`]).
pub fn is_lenient() -> bool {
    LENIENT.with(Cell::get)
}

impl<'de> Deserialize<'de> for LooseStr<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if is_lenient() {
            let raw = <&'de RawValue>::deserialize(deserializer)?;
            return Ok(LooseStr::from_raw(raw.get()));
        }
        // Fast: a valid Unicode string only (anything else fails the event, which is then
        // read again leniently).
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LooseStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<LooseStr<'de>, E> {
                Ok(LooseStr {
                    text: Cow::Borrowed(v),
                    replaced: 0,
                    was_string: true,
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LooseStr<'de>, E> {
                Ok(LooseStr {
                    text: Cow::Owned(v.to_owned()),
                    replaced: 0,
                    was_string: true,
                })
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// Decodes a JSON string literal (with its quotes; grammatical), replacing lone surrogates by
/// U+FFFD. Returns the text and how many were replaced.
pub fn decode_string(literal: &str) -> (String, u32) {
    match serde_json::from_str::<String>(literal) {
        Ok(text) => (text, 0),
        Err(_) => {
            // Only lone surrogates make a grammatical string fail: decode to WTF-8 bytes (which
            // serde allows for byte strings) and replace each surrogate.
            let bytes = serde_json::from_str::<WtfBytes>(literal)
                .map(|b| b.0)
                .unwrap_or_default();
            replace_surrogates(bytes)
        }
    }
}

/// A key or string as (WTF-8) bytes: serde_json decodes escapes without refusing lone
/// surrogates when asked for bytes.
#[derive(Debug)]
pub struct WtfBytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for WtfBytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WtfBytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<WtfBytes, E> {
                Ok(WtfBytes(v.to_vec()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<WtfBytes, E> {
                Ok(WtfBytes(v.as_bytes().to_vec()))
            }
        }
        deserializer.deserialize_bytes(V)
    }
}

/// A map key as the importer's visitors read it: bytes (escapes decoded, lone surrogates kept
/// as WTF-8), borrowed when the key has no escapes. Compared with known keys as bytes.
#[derive(Debug)]
pub struct Key<'a>(pub Cow<'a, [u8]>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v.as_bytes())))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_vec())))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.as_bytes().to_vec())))
            }
        }
        deserializer.deserialize_bytes(V)
    }
}

impl Key<'_> {
    /// The key as text, lone surrogates replaced (and counted in the second value).
    pub fn into_text(self) -> (String, u32) {
        replace_surrogates(self.0.into_owned())
    }
}

/// WTF-8 bytes to UTF-8: each encoded surrogate (`ED A0..BF xx`, 3 bytes) becomes U+FFFD
/// (`EF BF BD`, 3 bytes too). Returns the text and how many were replaced.
pub fn replace_surrogates(mut bytes: Vec<u8>) -> (String, u32) {
    let mut replaced = 0;
    let mut i = 0;
    while let Some(k) = memchr::memchr(0xED, &bytes[i..]) {
        i += k;
        if i + 2 < bytes.len() && (0xA0..=0xBF).contains(&bytes[i + 1]) {
            bytes[i..i + 3].copy_from_slice("\u{FFFD}".as_bytes());
            replaced += 1;
        }
        i += 1;
    }
    match String::from_utf8(bytes) {
        Ok(text) => (text, replaced),
        // Cannot happen for bytes serde decoded from valid UTF-8 input; be safe anyway.
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), replaced),
    }
}

/// The fields of a JSON object, each value as its raw text; a duplicate key's last value wins.
/// For objects read rarely (top-level metadata, counter args), where a derived struct would
/// refuse a duplicate key or a value of an unexpected type.
#[derive(Debug)]
pub struct Fields<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'a> Fields<'a> {
    /// The fields of `text` when it is a JSON object.
    pub fn parse(text: &'a str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The raw text of `key`'s (last) value, `None` when absent or `null`.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| *k.0 == *key.as_bytes())
            .map(|(_, v)| v.get())
            .filter(|v| *v != "null")
    }

    /// Every key (lone surrogates replaced) with its last value, sorted by key; and how many
    /// surrogates were replaced.
    pub fn into_sorted(self) -> (Vec<(String, &'a str)>, u32) {
        let mut replaced = 0;
        let mut out: Vec<(String, &'a str)> = Vec::with_capacity(self.0.len());
        for (key, value) in self.0 {
            let (key, r) = key.into_text();
            replaced += r;
            out.push((key, value.get()));
        }
        // Stable: of equal keys the last stays last; keep it.
        out.sort_by(|a, b| a.0.cmp(&b.0));
        let mut deduped: Vec<(String, &'a str)> = Vec::with_capacity(out.len());
        for item in out {
            match deduped.last_mut() {
                Some(last) if last.0 == item.0 => *last = item,
                _ => deduped.push(item),
            }
        }
        (deduped, replaced)
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<Fields<'de>, M::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    fields.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// `text` without JSON whitespace around it (a raw value has none; text cut by hand may). ASCII
/// only, unlike `str::trim`, which the hot path cannot afford.
pub fn trim_json(text: &str) -> &str {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let bytes = text.as_bytes();
    let start = bytes.iter().position(|b| !ws(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    // Whitespace is ASCII: both ends are character boundaries.
    &text[start..end]
}

/// A JSON number's text read as an `i64` when it is an integer in range, else as an `f64`
/// (`1e400` gives infinity, as Python reads it). `None` when the text is not a number.
pub fn number(text: &str) -> Option<Result<i64, f64>> {
    let t = trim_json(text);
    if !matches!(t.as_bytes().first(), Some(b'-' | b'0'..=b'9')) {
        return None;
    }
    if let Ok(v) = t.parse::<i64>() {
        return Some(Ok(v));
    }
    t.parse::<f64>().ok().map(Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_decoded_and_surrogates_replaced() {
        let s = |raw| {
            let l = LooseStr::from_raw(raw);
            (l.text.into_owned(), l.replaced, l.was_string)
        };
        assert_eq!(s(r#""plain""#), ("plain".into(), 0, true));
        assert_eq!(s(r#""a\/b\n""#), ("a/b\n".into(), 0, true));
        assert_eq!(s(r#""\ud83d\ude00""#), ("\u{1F600}".into(), 0, true));
        assert_eq!(s(r#""x\ud800y""#), ("x\u{FFFD}y".into(), 1, true));
        assert_eq!(
            s(r#""\udc00\ud800\\ud800""#),
            ("\u{FFFD}\u{FFFD}\\ud800".into(), 2, true)
        );
        assert_eq!(
            s(r#""\ud800\ud83d\ude00""#),
            ("\u{FFFD}\u{1F600}".into(), 1, true)
        );
        assert_eq!(s("123"), ("123".into(), 0, false));
        assert_eq!(s("1e400"), ("1e400".into(), 0, false));
        assert_eq!(s(r#"["a"]"#), (r#"["a"]"#.into(), 0, false));
    }

    #[test]
    fn numbers_of_any_size() {
        assert_eq!(number("-0"), Some(Ok(0)));
        assert_eq!(number("12"), Some(Ok(12)));
        assert_eq!(number("1.5"), Some(Err(1.5)));
        assert_eq!(
            number("18446744073709551616"),
            Some(Err(18446744073709551616.0))
        );
        assert_eq!(number("1e400"), Some(Err(f64::INFINITY)));
        assert_eq!(number("\"1\""), None);
        assert_eq!(number("true"), None);
    }

    #[test]
    fn fields_keep_the_last_duplicate() {
        let f = Fields::parse(r#"{"b": 1, "a": [2], "b": 3, "n": null, "\ud800": 4}"#).unwrap();
        assert_eq!(f.get("b"), Some("3"));
        assert_eq!(f.get("a"), Some("[2]"));
        assert_eq!(f.get("n"), None);
        let (sorted, replaced) = f.into_sorted();
        let keys: Vec<&str> = sorted.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "n", "\u{FFFD}"]);
        assert_eq!(sorted[1].1, "3");
        assert_eq!(replaced, 1);
        assert!(Fields::parse("[1]").is_none());
    }

    #[test]
    fn keys_keep_surrogates_until_replaced() {
        let key: Key<'_> = serde_json::from_str(r#""a\ud800""#).unwrap();
        assert_eq!(key.into_text(), ("a\u{FFFD}".into(), 1));
        let key: Key<'_> = serde_json::from_str(r#""name""#).unwrap();
        assert!(matches!(key.0, Cow::Borrowed(b"name")));
    }
}
