//! Secrets in what strato writes: torch.profiler (and other tools) record the process
//! environment and command line in a trace's metadata, real traces carry `HF_TOKEN`-style
//! values there, and a URL with a password or a token can end up in a device, process or thread
//! name, or in an event's attributes. Profiles and exports are what people attach to bug
//! reports, so every such string is redacted before anything is written
//! (docs/profile-format.md, "Secrets").
//!
//! This module owns the rules. A secret is replaced by [`MARKER`]:
//! - **keyed values**: a JSON value whose object key ends in a secret word ([`SECRET_WORDS`]:
//!   TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL(S), AUTH, ...) — whole words, so
//!   `TOKENIZERS_PARALLELISM`, `num_tokens`, `SSH_AUTH_SOCK` and `SecretStorage` are not
//!   secrets. Text values are redacted; numbers only under a password word
//!   ([`NUMERIC_SECRET_WORDS`]: `"PASSWORD": 1234` is a secret, `"MAX_TOKEN": 5` a count);
//!   booleans and null never;
//! - **assignments anywhere in a text**: `NAME=value` where `NAME` (a run of `[A-Za-z0-9_.-]`)
//!   ends in a secret word, wherever it stands (`env HF_TOKEN=... python x.py`, several per
//!   text, an environment block separated by NUL, newlines or spaces, a URL query
//!   `?token=...`). The value runs to the next whitespace, control character, quote, `,`, `;`
//!   or `&` (a quoted value: to its closing quote); `NAME==1.2` is a version pin, not one;
//! - **flag-value pairs**: a flag (`-x`, `--x`) whose name ends in a secret word followed by its
//!   value, in a text (`--hf-token X`, separated by spaces, NUL, quotes or commas, so
//!   `["--hf-token", "X"]` written as text is covered) and in a JSON list (the element after
//!   `"--hf-token"`); `--api-key=X` is an assignment. A value starting with `-` is the next flag;
//! - **known secret shapes** anywhere, at a word start: Hugging Face `hf_` + 20 or more letters
//!   and digits, OpenAI-style `sk-` + 20 or more, AWS access key ids `AKIA`/`ASIA` + 16
//!   upper-case letters and digits, GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 20 or more and
//!   `github_pat_` + 20 or more, Slack `xoxa-`/`xoxb-`/`xoxp-`/`xoxr-` + 10 or more, and the
//!   token after `Bearer ` (8 or more token characters);
//! - **URL passwords**: the password of `scheme://user:password@host`, wherever it appears.
//!
//! Never redacted: version-like values (`2.40.3`), empty values and values the source already
//! blanked (`REDACTED`, `<redacted>`, `***`, `xxx`, [`MARKER`] itself: redaction is idempotent).
//!
//! What is covered ([`redact_trace`]): each source's metadata (`Rank::metadata`), its host
//! name, each device's name and extra properties, process names and labels, track (thread,
//! queue) names, event names and categories (the string table: the text rules, the id kept,
//! so every event naming a redacted text reads the marker; two names that redact to the same
//! text stay apart as `text (2)`), and every event attribute blob (`Trace::args`,
//! [`redact_args`]; a blob with a secret is re-serialized, its keys then sorted). Scanning is linear in the text (no backtracking), and an
//! attribute blob holding none of the words and prefixes the rules need ([`might_hold_secret`])
//! is passed over in one pass over its bytes.

use std::collections::BTreeSet;

use serde_json::Value;
use strato_trace::metadata::{JsonObject, SourceMetadata};

use strato_trace::secrets::{collect_marked, is_name_byte, is_secret_flag, marker_labels};
pub use strato_trace::secrets::{
    is_numeric_secret_name, is_secret_name, redacted_names, MARKER, NUMERIC_SECRET_WORDS,
    SECRET_WORDS,
};
#[cfg(test)]
use strato_trace::SourceFormat;
use strato_trace::{ArgsTable, StrId, StringTable, Trace};

/// What [`redact_trace`] redacted now: the labels of the fields (sorted, no values) and the
/// number of event attribute blobs changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redacted {
    /// Names of what held a secret (a variable, a key, a flag, `process name (secret-shaped
    /// value)`, ...), as [`redacted_names`] reports them.
    pub names: Vec<String>,
    /// Event attribute blobs that held a secret.
    pub args_blobs: usize,
}

/// Redacts the secrets in `trace` (see the module docs for the rules and what is covered).
pub fn redact_trace(trace: &mut Trace) -> Redacted {
    let mut names = BTreeSet::new();
    for rank in &mut trace.ranks {
        let mut text = rank.metadata.to_json();
        if redact_json_text(&mut text, &mut names) {
            let redacted = text.map(|t| SourceMetadata::from_json(&t, rank.format.clone()));
            rank.metadata = redacted.and_then(Result::ok).unwrap_or_default();
        }
        redact_name(&mut rank.host, "host", &mut names);
    }
    for device in &mut trace.devices {
        let mut text = (!device.extra.is_empty()).then(|| device.extra.to_json());
        if redact_json_text(&mut text, &mut names) {
            let redacted = text.map(|t| JsonObject::parse(&t));
            device.extra = redacted.and_then(Result::ok).unwrap_or_default();
        }
        redact_name(&mut device.name, "device name", &mut names);
    }
    for process in &mut trace.processes {
        redact_name(&mut process.name, "process name", &mut names);
        redact_name(&mut process.labels, "process labels", &mut names);
    }
    for track in &mut trace.tracks {
        redact_name(&mut track.name, "track name", &mut names);
    }
    redact_strings(&mut trace.strings, &mut names);
    let args_blobs = redact_args(&mut trace.args);
    Redacted {
        names: names.into_iter().collect(),
        args_blobs,
    }
}

/// Redacts the secrets in every blob of `args` (the text and keyed rules of the module docs);
/// returns the number of blobs changed. Blobs without a candidate word or prefix
/// ([`might_hold_secret`]) cost one pass over their bytes; the table is rebuilt only from the
/// first blob that changes.
pub fn redact_args(args: &mut ArgsTable) -> usize {
    let mut rebuilt: Option<ArgsTable> = None;
    let mut changed = 0;
    for (i, blob) in args.iter().enumerate() {
        let redacted = if might_hold_secret(&blob) {
            redact_blob(&blob)
        } else {
            None
        };
        match (redacted, rebuilt.as_mut()) {
            (Some(new), None) => {
                let mut table = ArgsTable::default();
                table.reserve(args.len(), args.text_bytes() + MARKER.len());
                for earlier in args.range(0..i) {
                    table.push(&earlier);
                }
                table.push(&new);
                rebuilt = Some(table);
                changed += 1;
            }
            (Some(new), Some(table)) => {
                table.push(&new);
                changed += 1;
            }
            (None, Some(table)) => {
                table.push(&blob);
            }
            (None, None) => {}
        }
    }
    if let Some(table) = rebuilt {
        *args = table;
    }
    changed
}

/// One attribute blob with its secrets redacted, or `None` when it holds none. A blob that is
/// not JSON is redacted as text.
pub fn redact_blob(blob: &str) -> Option<String> {
    match serde_json::from_str::<Value>(blob) {
        Ok(mut value) => {
            if redact_value(&mut value, "") {
                serde_json::to_string(&value).ok()
            } else {
                None
            }
        }
        Err(_) => redact_text(blob),
    }
}

/// True when `text` holds one of the words or prefixes some rule needs (case-insensitive): a
/// secret word's stem (token, key, secret, pass, cred, auth, cookie, private), a shape's prefix
/// (`hf_`, `sk-`, `akia`, `asia`, `gh?_`, `github_pat_`, `xox`, `bearer`) or `://`. False
/// means no rule can redact anything in it. One pass over the bytes.
pub fn might_hold_secret(text: &str) -> bool {
    let b = text.as_bytes();
    let n = b.len();
    let mut i = 0;
    while i < n {
        // Most bytes start no needle: one table look-up each.
        if NEEDLE_START[b[i] as usize] && needle_at(b, i) {
            return true;
        }
        i += 1;
    }
    false
}

/// The bytes a [`might_hold_secret`] needle starts with (either case).
static NEEDLE_START: [bool; 256] = {
    let mut table = [false; 256];
    let starts = b"tkspcahgxb:";
    let mut j = 0;
    while j < starts.len() {
        table[starts[j] as usize] = true;
        table[starts[j].to_ascii_uppercase() as usize] = true;
        j += 1;
    }
    table
};

/// True when one of the needles of [`might_hold_secret`] starts at `b[i]`.
fn needle_at(b: &[u8], i: usize) -> bool {
    let rest = &b[i..];
    let at = |needle: &[u8]| {
        rest.len() >= needle.len() && rest[..needle.len()].eq_ignore_ascii_case(needle)
    };
    match b[i].to_ascii_lowercase() {
        b't' => at(b"token"),
        b'k' => at(b"key"),
        b's' => at(b"secret") || at(b"sk-"),
        b'p' => at(b"pass") || at(b"private"),
        b'c' => at(b"cred") || at(b"cookie"),
        b'a' => at(b"auth") || at(b"akia") || at(b"asia"),
        b'h' => at(b"hf_"),
        b'g' => {
            at(b"github_pat_")
                || (rest.len() >= 4
                    && rest[1].eq_ignore_ascii_case(&b'h')
                    && b"pousrPOUSR".contains(&rest[2])
                    && rest[3] == b'_')
        }
        b'x' => at(b"xox"),
        b'b' => at(b"bearer"),
        b':' => at(b"://"),
        _ => false,
    }
}

/// `text` with every secret the text rules find (assignments, flag-value pairs, shapes, URL
/// passwords: see the module docs) replaced by [`MARKER`], or `None` when it holds none.
pub fn redact_text(text: &str) -> Option<String> {
    let mut ranges = Vec::new();
    secret_ranges(text.as_bytes(), &mut ranges);
    if ranges.is_empty() {
        return None;
    }
    Some(with_markers(text, ranges))
}

/// `text` with the password of every `scheme://user:password@` replaced by [`MARKER`], or
/// `None` when it holds none.
pub fn redact_url_passwords(text: &str) -> Option<String> {
    let mut ranges = Vec::new();
    url_password_ranges(text.as_bytes(), &mut ranges);
    if ranges.is_empty() {
        return None;
    }
    Some(with_markers(text, ranges))
}

/// `text` with each byte range of `ranges` replaced by [`MARKER`]; overlapping ranges (a token
/// shape inside an assignment's value) are one secret.
fn with_markers(text: &str, mut ranges: Vec<(usize, usize)>) -> String {
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut out = String::with_capacity(text.len() + merged.len() * MARKER.len());
    let mut done = 0;
    for (start, end) in merged {
        out.push_str(&text[done..start]);
        out.push_str(MARKER);
        done = end;
    }
    out.push_str(&text[done..]);
    out
}

/// A byte that ends an unquoted value.
fn ends_value(c: u8) -> bool {
    c.is_ascii_whitespace()
        || c < 0x20
        || c == 0x7f
        || matches!(c, b'"' | b'\'' | b'`' | b',' | b';' | b'&')
}

/// True when the text at `b[i..]` is already [`MARKER`].
fn marker_at(b: &[u8], i: usize) -> bool {
    b[i..].starts_with(MARKER.as_bytes())
}

/// The byte ranges (`[start, end)`, on character boundaries: every bound is at an ASCII byte or
/// an end) of the secrets in `b` by the text rules, in no particular order, possibly
/// overlapping.
fn secret_ranges(b: &[u8], out: &mut Vec<(usize, usize)>) {
    assignment_and_flag_ranges(b, out);
    shape_ranges(b, out);
    url_password_ranges(b, out);
}

/// `NAME=value` and `--flag value` (module docs).
fn assignment_and_flag_ranges(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let n = b.len();
    let mut i = 0;
    while i < n {
        if !is_name_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && is_name_byte(b[i]) {
            i += 1;
        }
        // `name` is a maximal run of name bytes: b[start..i].
        let name = std::str::from_utf8(&b[start..i]).unwrap_or("");
        if i < n && b[i] == b'=' {
            let v = i + 1;
            if v < n && b[v] == b'=' {
                // `NAME==1.2`: a pin; skip the whole operator.
                i = v + 1;
                continue;
            }
            if is_secret_name(name) {
                if let Some((vs, ve)) = value_at(b, v) {
                    out.push((vs, ve));
                    i = ve;
                    continue;
                }
            }
            i = v;
            continue;
        }
        if b[start] == b'-' && is_secret_name(name) {
            // A flag: its value follows after separators.
            let mut j = i;
            while j < n
                && j - i < 8
                && matches!(b[j], b' ' | b'\t' | b'\n' | 0 | b'"' | b'\'' | b',')
            {
                j += 1;
            }
            if j > i && j < n && b[j] != b'-' {
                if let Some((vs, ve)) = value_at(b, j) {
                    out.push((vs, ve));
                    i = ve;
                    continue;
                }
            }
        }
    }
}

/// The secret value starting at `b[v]` (an unquoted run up to [`ends_value`], or the inside of
/// quotes), or `None` when it is empty, already redacted or version-like.
fn value_at(b: &[u8], v: usize) -> Option<(usize, usize)> {
    let n = b.len();
    if v >= n || marker_at(b, v) {
        return None;
    }
    let (vs, ve) = if matches!(b[v], b'"' | b'\'') {
        let quote = b[v];
        let end = b[v + 1..]
            .iter()
            .position(|&c| c == quote)
            .map_or(n, |p| v + 1 + p);
        (v + 1, end)
    } else {
        let end = b[v..]
            .iter()
            .position(|&c| ends_value(c))
            .map_or(n, |p| v + p);
        (v, end)
    };
    let value = std::str::from_utf8(&b[vs..ve]).ok()?;
    (!already_redacted(value) && !marker_at(b, vs)).then_some((vs, ve))
}

/// Known token shapes (module docs), at word starts.
fn shape_ranges(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let n = b.len();
    let run = |from: usize, ok: fn(u8) -> bool| {
        b[from.min(n)..]
            .iter()
            .position(|&c| !ok(c))
            .map_or(n - from.min(n), |p| p)
    };
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    let alnum_dash_underscore = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
    let alnum_underscore = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let alnum_dash = |c: u8| c.is_ascii_alphanumeric() || c == b'-';
    let upper_digit = |c: u8| c.is_ascii_uppercase() || c.is_ascii_digit();
    let bearer_token = |c: u8| c.is_ascii_alphanumeric() || b"._~+/=-".contains(&c);
    let mut i = 0;
    while i < n {
        if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
            i += 1;
            continue;
        }
        let rest = &b[i..];
        let found = match b[i] {
            b'h' if rest.starts_with(b"hf_") => Some((3, run(i + 3, alnum), 20)),
            b's' if rest.starts_with(b"sk-") => Some((3, run(i + 3, alnum_dash_underscore), 20)),
            b'A' if rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA") => {
                let len = run(i + 4, upper_digit);
                let after = b.get(i + 4 + len);
                (len == 16 && !after.is_some_and(|c| c.is_ascii_alphanumeric()))
                    .then_some((4, len, 16))
            }
            b'g' if rest.starts_with(b"github_pat_") => {
                Some((11, run(i + 11, alnum_underscore), 20))
            }
            b'g' if rest.len() > 4
                && rest.starts_with(b"gh")
                && b"pousr".contains(&rest[2])
                && rest[3] == b'_' =>
            {
                Some((4, run(i + 4, alnum), 20))
            }
            b'x' if rest.len() > 5
                && rest.starts_with(b"xox")
                && b"abpr".contains(&rest[3])
                && rest[4] == b'-' =>
            {
                Some((5, run(i + 5, alnum_dash), 10))
            }
            b'B' | b'b' if rest.len() > 7 && rest[..6].eq_ignore_ascii_case(b"bearer") => {
                let spaces = run(i + 6, |c| c == b' ');
                let start = i + 6 + spaces;
                let len = run(start, bearer_token);
                if spaces > 0 && len >= 8 && !marker_at(b, start) {
                    out.push((start, start + len));
                    i = start + len;
                    continue;
                }
                None
            }
            _ => None,
        };
        match found {
            Some((prefix, len, min)) if len >= min => {
                out.push((i, i + prefix + len));
                i += prefix + len;
            }
            _ => i += 1,
        }
    }
}

/// The password of every `scheme://user:password@host` in `b`, in order.
fn url_password_ranges(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let n = b.len();
    let mut from = 0;
    while let Some(p) = memchr::memmem::find(&b[from..], b"://") {
        let authority_start = from + p + 3;
        let authority_end = b[authority_start..]
            .iter()
            .position(|&c| matches!(c, b'/' | b'?' | b'#' | b'"') || c.is_ascii_whitespace())
            .map_or(n, |q| authority_start + q);
        let authority = &b[authority_start..authority_end];
        if let Some(at) = authority.iter().rposition(|&c| c == b'@') {
            let userinfo = &authority[..at];
            if let Some(colon) = userinfo.iter().position(|&c| c == b':') {
                let (ps, pe) = (authority_start + colon + 1, authority_start + at);
                let password = std::str::from_utf8(&b[ps..pe]).unwrap_or("");
                if !already_redacted(password) && !marker_at(b, ps) {
                    out.push((ps, pe));
                }
            }
        }
        from = authority_end.max(authority_start);
    }
}

/// A value the source already blanked out, or one that cannot be a credential (a version).
fn already_redacted(s: &str) -> bool {
    let version = s.starts_with(|c: char| c.is_ascii_digit())
        && s.contains('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-".contains(c));
    version
        || s.is_empty()
        || s.starts_with(MARKER)
        || s.eq_ignore_ascii_case("redacted")
        || s.eq_ignore_ascii_case("<redacted>")
        || s.chars().all(|c| c == '*' || c == 'x' || c == 'X')
}

/// Redacts a name-like text (no key of its own): the text rules only.
/// The text rules over the string table: event names and categories (a `record_function`
/// label built from a URL or a command line). A changed text keeps its id
/// ([`StringTable::replace`]), so every event naming it reads the redacted text.
fn redact_strings(strings: &mut StringTable, names: &mut BTreeSet<String>) {
    let changed: Vec<(StrId, String)> = strings
        .iter()
        .filter(|(_, text)| might_hold_secret(text))
        .filter_map(|(id, text)| redact_text(text).map(|clean| (id, clean)))
        .collect();
    for (id, clean) in changed {
        marker_labels("event name", &clean, None, names);
        strings.replace(id, &clean);
    }
}

fn redact_name(text: &mut Option<String>, label: &str, names: &mut BTreeSet<String>) {
    let Some(t) = text.as_deref() else { return };
    if let Some(clean) = redact_text(t) {
        marker_labels(label, &clean, None, names);
        *text = Some(clean);
    }
}

fn redact_json_text(text: &mut Option<String>, names: &mut BTreeSet<String>) -> bool {
    let Some(t) = text.as_deref() else {
        return false;
    };
    let Ok(mut value) = serde_json::from_str::<Value>(t) else {
        // Not JSON: the text rules still apply.
        if let Some(clean) = redact_text(t) {
            marker_labels("metadata", &clean, None, names);
            *text = Some(clean);
            return true;
        }
        return false;
    };
    if redact_value(&mut value, "") {
        collect_marked(&value, "", names);
        if let Ok(new_text) = serde_json::to_string(&value) {
            *text = Some(new_text);
            return true;
        }
    }
    false
}

/// Redacts `value` (found under `key`) in place; true when something changed.
fn redact_value(value: &mut Value, key: &str) -> bool {
    match value {
        Value::Object(map) => {
            let mut changed = false;
            for (k, v) in map.iter_mut() {
                changed |= redact_value(v, k);
            }
            changed
        }
        Value::Array(items) => {
            let mut changed = false;
            let mut after_flag = false;
            for v in items.iter_mut() {
                let flag = is_secret_flag(v);
                if after_flag && !flag {
                    let secret = match v {
                        Value::String(s) => !s.starts_with('-') && !already_redacted(s),
                        Value::Number(_) => true,
                        _ => false,
                    };
                    if secret {
                        *v = Value::String(MARKER.to_owned());
                        changed = true;
                        after_flag = false;
                        continue;
                    }
                }
                after_flag = flag;
                changed |= redact_value(v, key);
            }
            changed
        }
        Value::String(s) => {
            if is_secret_name(key) && !already_redacted(s) {
                *s = MARKER.to_owned();
                return true;
            }
            match redact_text(s) {
                Some(clean) => {
                    *s = clean;
                    true
                }
                None => false,
            }
        }
        Value::Number(_) if is_numeric_secret_name(key) => {
            *value = Value::String(MARKER.to_owned());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_words() {
        for name in [
            "HF_TOKEN",
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "hfToken",
            "db-password",
            "GITHUB_AUTH",
            "MY_PASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "--hf-token",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "TOKENIZERS_PARALLELISM",
            "num_tokens",
            "KEYBOARD",
            "HOME",
            "PWD",
            "AUTHOR",
            "CUDA_VERSION",
            "SecretStorage",
            "SSH_AUTH_SOCK",
            "monkey",
            "AWS_ACCESS_KEY_ID",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn urls_lose_their_passwords_only() {
        assert_eq!(
            redact_url_passwords("see https://bob:hunter2@example.com/x?y=1 and ftp://a@b/c")
                .as_deref(),
            Some(format!("see https://bob:{MARKER}@example.com/x?y=1 and ftp://a@b/c").as_str())
        );
        assert_eq!(redact_url_passwords("https://example.com/a:b@c"), None);
        assert_eq!(redact_url_passwords("no url"), None);
    }

    /// Each case of the issue, in a text: the secret is gone, what is not secret stays, and
    /// a second pass changes nothing.
    #[test]
    fn texts_lose_every_secret_and_keep_the_rest() {
        let hf = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "env HF_TOKEN=hf_abc123 TOKENIZERS_PARALLELISM=false python train.py",
                &["hf_abc123"],
                &["TOKENIZERS_PARALLELISM=false", "python train.py", "HF_TOKEN="],
            ),
            (
                "HOME=/root\0HF_TOKEN=tok1\0DB_PASSWORD=1234\0PATH=/usr/bin\nGH_TOKEN=tok2 X=1",
                &["tok1", "=1234", "tok2"],
                &["HOME=/root", "PATH=/usr/bin", "X=1"],
            ),
            (
                "[\"python\", \"run.py\", \"--hf-token\", \"secret-val\", \"--lr\", \"1e-3\"]",
                &["secret-val"],
                &["--hf-token", "--lr", "1e-3"],
            ),
            (
                "python run.py --hf-token secret-val --api-key=other-val --max-tokens 8",
                &["secret-val", "other-val"],
                &["--max-tokens 8", "--api-key="],
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
                &["eyJhbGciOiJIUzI1NiJ9"],
                &["Authorization: Bearer "],
            ),
            (
                "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE region=us-east-1",
                &["AKIAIOSFODNN7EXAMPLE"],
                &["region=us-east-1"],
            ),
            (
                "GPU 0 (https://user:p4ss@host.example/x) and https://host/a?token=q1&b=2",
                &["p4ss", "q1"],
                &["host.example", "&b=2"],
            ),
            (
                "worker ghp_0123456789abcdefghijABCDEFGHIJ sk-proj-0123456789abcdefghij xoxb-1234567890-abc",
                &["ghp_0123", "sk-proj", "xoxb-"],
                &["worker "],
            ),
            (
                "pip google-auth==2.40.3 SecretStorage==3.3.1 num_tokens=12 SSH_AUTH_SOCK=/tmp/s",
                &[],
                &["google-auth==2.40.3", "SecretStorage==3.3.1", "num_tokens=12", "SSH_AUTH_SOCK=/tmp/s"],
            ),
            ("export API_KEY=\"a b c\" next", &["a b c"], &["next"]),
            ("PASSWORD=REDACTED KEY=*** HF_TOKEN=", &[], &["REDACTED", "***"]),
        ];
        for (text, gone, kept) in cases {
            let text = text.replace("hf_abc123", hf);
            let clean = redact_text(&text).unwrap_or_else(|| text.clone());
            for secret in gone.iter().map(|s| s.replace("hf_abc123", hf)) {
                assert!(!clean.contains(&secret), "{secret} kept in {clean:?}");
            }
            for k in *kept {
                assert!(clean.contains(k), "{k} lost in {clean:?}");
            }
            assert_eq!(gone.is_empty(), !clean.contains(MARKER), "{clean:?}");
            assert_eq!(redact_text(&clean), None, "not idempotent: {clean:?}");
            if !gone.is_empty() {
                assert!(might_hold_secret(&text), "{text:?}");
            }
        }
    }

    #[test]
    fn shapes_need_their_length_and_a_word_start() {
        for text in [
            "hf_short",
            "hf_hub_download",
            "task-0123456789abcdefghijklmn",
            "AKIAIOSFODNN7EXAMPLEX",
            "xAKIAIOSFODNN7EXAMPLE",
            "Bearer <x>",
            "ghp_short",
        ] {
            assert_eq!(redact_text(text), None, "{text}");
        }
    }

    #[test]
    fn args_blobs_are_redacted_and_others_left_as_they_are() {
        let blobs = [
            "{\"External id\":7,\"Input Dims\":[[2,3]]}",
            "{\"password\":1234,\"MAX_TOKEN\":5,\"cmd\":[\"x\",\"--hf-token\",\"v1\"]}",
            "{\"Call stack\":\"tokenizer.py(3): encode\"}",
            "{\"header\":\"Authorization: Bearer abcdefgh12345\"}",
        ];
        let mut table: ArgsTable = blobs.iter().collect();
        assert_eq!(redact_args(&mut table), 2);
        assert_eq!(table.len(), 4);
        assert_eq!(table.get(0).as_deref(), Some(blobs[0]));
        assert_eq!(table.get(2).as_deref(), Some(blobs[2]));
        let one: Value = serde_json::from_str(&table.get(1).unwrap()).unwrap();
        assert_eq!(one["password"], MARKER);
        assert_eq!(one["MAX_TOKEN"], 5);
        assert_eq!(one["cmd"], serde_json::json!(["x", "--hf-token", MARKER]));
        assert!(!table.get(3).unwrap().contains("abcdefgh12345"));
        assert!(!might_hold_secret(blobs[0]));
        assert_eq!(redact_args(&mut table), 0);
    }

    #[test]
    fn metadata_is_redacted_and_reported() {
        let mut trace = Trace::default();
        trace.ranks.push(strato_trace::Rank {
            rank: Some(0),
            world_size: None,
            source: "x".into(),
            format: SourceFormat::Kineto,
            host: None,
            metadata: SourceMetadata::of_value(serde_json::json!({
                "env": {"HF_TOKEN": "hf_abc", "TOKENIZERS_PARALLELISM": "false",
                        "WANDB_API_KEY": "REDACTED", "MAX_TOKEN": 5,
                        "DB": "postgres://u:pw@db:5432/x", "DB_PASSWORD": 1234},
                "argv": ["python", "GH_TOKEN=ghp_123", "--lr=1", "--hf-token", "hf_x"],
                "cmdline": "env OPENAI_API_KEY=sk-1 python x.py",
                "pip_packages": ["google-auth==2.40.3", "SecretStorage==3.3.1"],
            })),
            notes: Default::default(),
        });
        trace.devices.push(strato_trace::Device {
            name: Some("gpu via https://u:devpw@host/".into()),
            ..Default::default()
        });
        trace.processes.push(strato_trace::Process {
            rank: strato_trace::RankId(0),
            pid: 1,
            name: Some("python HF_TOKEN=procsecret".into()),
            labels: None,
        });
        let redacted = redact_trace(&mut trace);
        assert_eq!(
            redacted.names,
            [
                "--hf-token",
                "DB (URL password)",
                "DB_PASSWORD",
                "GH_TOKEN",
                "HF_TOKEN",
                "OPENAI_API_KEY",
                "device name (URL password)"
            ]
        );
        let text = trace.ranks[0].metadata.to_json().unwrap_or_default();
        for secret in ["hf_abc", "ghp_123", ":pw@", "hf_x", "sk-1", "1234"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        for kept in [
            "\"false\"",
            "REDACTED",
            "\"MAX_TOKEN\":5",
            "--lr=1",
            "google-auth==2.40.3",
        ] {
            assert!(text.contains(kept), "{kept} not in {text}");
        }
        assert!(!trace.devices[0].name.as_deref().unwrap().contains("devpw"));
        assert!(!trace.processes[0]
            .name
            .as_deref()
            .unwrap()
            .contains("procsecret"));
        assert_eq!(redacted_names(&trace), redacted.names);
        assert_eq!(redact_trace(&mut trace), Redacted::default());
    }
}
