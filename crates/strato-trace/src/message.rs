//! Error messages that quote their input stay on one line. A parser's message may quote what it
//! read (serde_json names an unknown field exactly as the file spells it, a raw newline
//! included), and a command's error is one line (exit 2, `docs/errors.md`): control characters
//! are written as escapes instead ([`escape_controls`]).

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character escaped as Rust and JSON write it (`\n`, `\r`, `\t`,
/// else `\u{..}`); borrowed when there is none. Printable text, non-ASCII included, is kept.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(escape_controls("plain · ü"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("unknown field `a\nb\r\tc\u{7}d\u{85}é`"),
            "unknown field `a\\nb\\r\\tc\\u{7}d\\u{85}é`"
        );
        assert_eq!(escape_controls("x\ny").lines().count(), 1);
    }
}
