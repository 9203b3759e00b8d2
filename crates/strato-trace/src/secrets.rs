//! The vocabulary of secrets, shared by whoever redacts and whoever reports what was redacted:
//! the words that make a variable, key or flag name secret ([`SECRET_WORDS`]), the
//! [`MARKER`] a redacted value is replaced with, and where a trace carries that marker
//! ([`redacted_names`], what `strato info` reports). The redaction rules themselves
//! (`strato_io::redact`) use these definitions; an analysis reads a trace's redacted names
//! without the importers.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::Trace;

/// What a redacted value is replaced with.
pub const MARKER: &str = "<redacted by stratoscope>";

/// Words that make a variable, key or flag name secret (compared upper-case, whole words).
pub const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "KEY",
    "APIKEY",
    "ACCESSKEY",
    "SECRETKEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PASS",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
    "PRIVATE",
];

/// Words that make even a numeric JSON value secret (a PIN-like password); under the other
/// secret words a number is a count or an index (`MAX_TOKEN: 5`, `"key": 3`).
pub const NUMERIC_SECRET_WORDS: &[&str] = &["PASSWORD", "PASSWD", "PASSPHRASE", "PASS", "SECRET"];

/// The last word of `name`, upper-case: split at non-alphanumerics and at lower-to-upper case
/// changes (`hfToken`, `HF_TOKEN`, `api-key`).
fn last_word(name: &str) -> Option<String> {
    let mut last: Option<String> = None;
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                last = Some(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
            last = Some(std::mem::take(&mut current));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_uppercase());
    }
    if current.is_empty() {
        last
    } else {
        Some(current)
    }
}

/// True when `name` ends in a secret word ([`SECRET_WORDS`]; see [`last_word`] for the split).
pub fn is_secret_name(name: &str) -> bool {
    last_word(name).is_some_and(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// True when a numeric value under `name` is secret ([`NUMERIC_SECRET_WORDS`]).
pub fn is_numeric_secret_name(name: &str) -> bool {
    last_word(name).is_some_and(|w| NUMERIC_SECRET_WORDS.contains(&w.as_str()))
}

/// The names of what carries [`MARKER`] in `trace`'s metadata, host, device, process and track
/// names and its event names (redacted when it was imported, or now): what `strato info` reports. Event
/// attributes are not searched (a stored profile's are not read for it).
pub fn redacted_names(trace: &Trace) -> Vec<String> {
    let mut names = BTreeSet::new();
    let texts = trace
        .ranks
        .iter()
        .filter_map(|r| r.metadata.to_json())
        .chain(
            trace
                .devices
                .iter()
                .filter(|d| !d.extra.is_empty())
                .map(|d| d.extra.to_json()),
        );
    for text in texts.filter(|t| t.contains(MARKER)) {
        if let Ok(value) = serde_json::from_str::<Value>(&text) {
            collect_marked(&value, "", &mut names);
        }
    }
    let labelled = trace
        .ranks
        .iter()
        .map(|r| ("host", &r.host))
        .chain(trace.devices.iter().map(|d| ("device name", &d.name)))
        .chain(trace.processes.iter().map(|p| ("process name", &p.name)))
        .chain(
            trace
                .processes
                .iter()
                .map(|p| ("process labels", &p.labels)),
        )
        .chain(trace.tracks.iter().map(|t| ("track name", &t.name)));
    for (label, text) in labelled {
        if let Some(text) = text.as_deref().filter(|t| t.contains(MARKER)) {
            marker_labels(label, text, None, &mut names);
        }
    }
    for (_, text) in trace.strings.iter().filter(|(_, t)| t.contains(MARKER)) {
        marker_labels("event name", text, None, &mut names);
    }
    names.into_iter().collect()
}

/// A byte of a variable or flag name.
pub fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')
}

/// True when `value` is a text naming a secret flag (`--hf-token`, `-password`; not
/// `--api-key=X`, an assignment).
pub fn is_secret_flag(value: &Value) -> bool {
    value.as_str().is_some_and(|s| {
        s.starts_with('-') && !s.contains('=') && s.bytes().all(is_name_byte) && is_secret_name(s)
    })
}

/// Collects the names of the marked values in `value` (under `key`).
pub fn collect_marked(value: &Value, key: &str, names: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| collect_marked(v, k, names)),
        Value::Array(items) => {
            let mut flag: Option<&str> = None;
            for v in items {
                match v {
                    Value::String(s) if s.contains(MARKER) => marker_labels(key, s, flag, names),
                    _ => collect_marked(v, key, names),
                }
                flag = is_secret_flag(v).then(|| v.as_str()).flatten();
            }
        }
        Value::String(s) if s.contains(MARKER) => marker_labels(key, s, None, names),
        _ => {}
    }
}

/// The name of each marker in `text` (found under `key`, after the list element `flag` when
/// that is a secret flag), from what precedes it: `NAME=` gives `NAME`, a flag gives the flag,
/// `scheme://user:` gives `key (URL password)`, `Bearer ` gives `key (Bearer token)`, a whole
/// value gives `key`, anything else (a known token shape) `key (secret-shaped value)`.
pub fn marker_labels(key: &str, text: &str, flag: Option<&str>, names: &mut BTreeSet<String>) {
    let key = if key.is_empty() { "metadata" } else { key };
    if text == MARKER {
        names.insert(flag.unwrap_or(key).to_owned());
        return;
    }
    for (at, _) in text.match_indices(MARKER) {
        let before = &text[..at];
        let label = if let Some(assigned) = before.strip_suffix('=') {
            let b = assigned.as_bytes();
            let start = b
                .iter()
                .rposition(|&c| !is_name_byte(c))
                .map_or(0, |p| p + 1);
            Some(assigned[start..].to_owned()).filter(|n| !n.is_empty())
        } else {
            None
        };
        let label = label.or_else(|| {
            let stripped = before.trim_end_matches([' ', '\t', '\n', '\0', '"', '\'', ',']);
            let start = stripped
                .bytes()
                .rposition(|c| !is_name_byte(c))
                .map_or(0, |p| p + 1);
            let word = &stripped[start..];
            (stripped.len() < before.len() && word.starts_with('-') && is_secret_name(word))
                .then(|| word.to_owned())
        });
        let label = label.unwrap_or_else(|| {
            let lower = before.to_ascii_lowercase();
            if before.ends_with(':') && before.contains("://") {
                format!("{key} (URL password)")
            } else if lower.trim_end_matches(' ').ends_with("bearer") {
                format!("{key} (Bearer token)")
            } else {
                format!("{key} (secret-shaped value)")
            }
        });
        names.insert(label);
    }
}
