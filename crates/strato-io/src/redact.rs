//! Secrets in imported metadata: torch.profiler (and other tools) can record the process
//! environment in a trace's metadata, and real traces carry `HF_TOKEN`-style values there.
//! Profiles and exports are what people attach to bug reports, so the metadata stratoscope
//! keeps is redacted before anything is written (docs/profile-format.md, "Secrets").
//!
//! This module owns the rules:
//! - a value is secret when its key (a JSON object key, or `NAME` in a `NAME=value` string)
//!   ends in a secret word ([`SECRET_WORDS`]: TOKEN, KEY, SECRET, PASSWORD, PASSWD,
//!   CREDENTIAL(S), AUTH, ...) — whole words, so `TOKENIZERS_PARALLELISM`, `num_tokens`,
//!   `SSH_AUTH_SOCK` and `SecretStorage` are not secrets. Only text values are redacted
//!   (numbers and flags are configuration, not credentials), and not version numbers
//!   (`google-auth==2.40.3` in a package list is a pin, not a credential);
//! - a password in a URL (`scheme://user:PASSWORD@host`) is secret wherever it appears;
//! - a redacted value becomes [`MARKER`]; values already redacted by the source (`REDACTED`,
//!   `***`) are left as they are.
//!
//! What is covered: each source's metadata (`Rank::metadata_json`) and each device's extra
//! properties (`Device::extra_json`). Event attributes (`args`) are not scanned.

use std::collections::BTreeSet;

use serde_json::Value;
#[cfg(test)]
use strato_trace::SourceFormat;
use strato_trace::Trace;

/// What a redacted value is replaced with.
pub const MARKER: &str = "<redacted by stratoscope>";

/// Words that make a variable or key name secret (compared upper-case, whole words).
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

/// True when `name` ends in a secret word: split at non-alphanumerics and at lower-to-upper
/// case changes (`hfToken`, `HF_TOKEN`, `api-key`).
pub fn is_secret_name(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_uppercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
        .last()
        .is_some_and(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// Redacts the secrets in every source's metadata and device's properties of `trace` (see the
/// module docs). Returns the names whose values it redacted now (sorted, no values).
pub fn redact_trace(trace: &mut Trace) -> Vec<String> {
    let mut names = BTreeSet::new();
    for rank in &mut trace.ranks {
        redact_json_text(&mut rank.metadata_json, &mut names);
    }
    for device in &mut trace.devices {
        redact_json_text(&mut device.extra_json, &mut names);
    }
    names.into_iter().collect()
}

/// The names whose values carry [`MARKER`] in `trace` (redacted when it was imported, or
/// now): what `strato info` reports.
pub fn redacted_names(trace: &Trace) -> Vec<String> {
    let mut names = BTreeSet::new();
    let texts = trace
        .ranks
        .iter()
        .filter_map(|r| r.metadata_json.as_deref())
        .chain(trace.devices.iter().filter_map(|d| d.extra_json.as_deref()));
    for text in texts.filter(|t| t.contains(MARKER)) {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            collect_marked(&value, "", &mut names);
        }
    }
    names.into_iter().collect()
}

fn collect_marked(value: &Value, key: &str, names: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| collect_marked(v, k, names)),
        Value::Array(items) => items.iter().for_each(|v| collect_marked(v, key, names)),
        Value::String(s) if s.contains(MARKER) => {
            let name = match s.split_once('=') {
                Some((n, v)) if v == MARKER && is_secret_name(n) => n.to_owned(),
                _ if s == MARKER => key.to_owned(),
                _ => format!("{key} (URL password)"),
            };
            names.insert(name);
        }
        _ => {}
    }
}

fn redact_json_text(text: &mut Option<String>, names: &mut BTreeSet<String>) {
    let Some(t) = text.as_deref() else { return };
    let Ok(mut value) = serde_json::from_str::<Value>(t) else {
        return;
    };
    let mut changed = false;
    redact_value(&mut value, "", names, &mut changed);
    if changed {
        if let Ok(new_text) = serde_json::to_string(&value) {
            *text = Some(new_text);
        }
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
        || s == MARKER
        || s.eq_ignore_ascii_case("redacted")
        || s.eq_ignore_ascii_case("<redacted>")
        || s.chars().all(|c| c == '*' || c == 'x' || c == 'X')
}

fn redact_value(value: &mut Value, key: &str, names: &mut BTreeSet<String>, changed: &mut bool) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                redact_value(v, k, names, changed);
            }
        }
        Value::Array(items) => {
            for v in items {
                redact_value(v, key, names, changed);
            }
        }
        Value::String(s) => {
            if is_secret_name(key) && !already_redacted(s) {
                *s = MARKER.to_owned();
                names.insert(key.to_owned());
                *changed = true;
                return;
            }
            if let Some((name, v)) = s.split_once('=') {
                if !name.is_empty()
                    && !v.starts_with('=')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                    && is_secret_name(name)
                    && !already_redacted(v)
                {
                    let name = name.to_owned();
                    *s = format!("{name}={MARKER}");
                    names.insert(name);
                    *changed = true;
                    return;
                }
            }
            if let Some(clean) = redact_url_passwords(s) {
                *s = clean;
                names.insert(format!("{key} (URL password)"));
                *changed = true;
            }
        }
        _ => {}
    }
}

/// `text` with the password of every `scheme://user:password@` replaced by [`MARKER`], or
/// `None` when it holds none.
pub fn redact_url_passwords(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut found = false;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at_sign) => {
                let userinfo = &authority[..at_sign];
                match userinfo.split_once(':') {
                    Some((user, password)) if !already_redacted(password) => {
                        out.push_str(user);
                        out.push(':');
                        out.push_str(MARKER);
                        found = true;
                    }
                    _ => out.push_str(userinfo),
                }
                out.push_str(&authority[at_sign..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    found.then_some(out)
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

    #[test]
    fn metadata_is_redacted_and_reported() {
        let mut trace = Trace::default();
        trace.ranks.push(strato_trace::Rank {
            rank: Some(0),
            world_size: None,
            source: "x".into(),
            format: SourceFormat::Kineto,
            host: None,
            metadata_json: Some(
                serde_json::json!({
                    "env": {"HF_TOKEN": "hf_abc", "TOKENIZERS_PARALLELISM": "false",
                            "WANDB_API_KEY": "REDACTED", "MAX_TOKEN": 5,
                            "DB": "postgres://u:pw@db:5432/x"},
                    "argv": ["python", "GH_TOKEN=ghp_123", "--lr=1"],
                    "pip_packages": ["google-auth==2.40.3", "SecretStorage==3.3.1"],
                })
                .to_string(),
            ),
            notes: Default::default(),
        });
        let names = redact_trace(&mut trace);
        assert_eq!(names, ["DB (URL password)", "GH_TOKEN", "HF_TOKEN"]);
        let text = trace.ranks[0].metadata_json.clone().unwrap_or_default();
        for secret in ["hf_abc", "ghp_123", ":pw@"] {
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
        assert_eq!(redacted_names(&trace), names);
        assert!(redact_trace(&mut trace).is_empty());
    }
}
