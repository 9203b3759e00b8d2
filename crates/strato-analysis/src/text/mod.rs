//! How results are written for a terminal and as CSV: aligned tables with CSV's quoting and
//! formula neutralisation ([`table`]), units and name widths ([`units`]). Shared by every
//! analysis's text rendering ([`crate::registry::Analysis::render_text`]) and by the command
//! line's own output, so a table looks and parses the same wherever it is written. Writes to
//! a caller's writer or string; opens nothing.

pub mod table;
pub mod terminal;
pub mod units;

/// The text a writer of a result writes, as a string (a writer into memory cannot fail; a
/// text is UTF-8 by construction).
pub fn written(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write(&mut out);
    String::from_utf8(out).unwrap_or_default()
}
