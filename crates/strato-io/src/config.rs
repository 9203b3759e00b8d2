//! Reading the small configuration files users hand to commands (`--rules`, `--device-spec`,
//! `--level-map`): one bounded read for all of them, so a path that names a device, a FIFO
//! fed forever or a huge file costs at most [`MAX_CONFIG_BYTES`] of memory and time instead of
//! reading until memory runs out (`--rules /dev/zero` read 3 GB before this).
//!
//! The rules (docs/import-checks.md, "Configuration files"):
//! - a configuration file is read up to [`MAX_CONFIG_BYTES`] (1 MiB); a longer one is refused
//!   with an error naming the file and the limit (a device or FIFO is read only up to the
//!   limit, never to its end);
//! - a directory is refused;
//! - the text must be UTF-8.
//!
//! Parsing is the caller's (each format has its own parser and checks).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// The largest configuration file read: 1 MiB. Real ones are a few KiB (the default rules
/// file is 2 KiB, a device spec a few hundred bytes).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of the configuration file at `path` (`what` names it in errors, e.g. "the rules
/// file"), read under the rules of the module docs. Errors name the file.
pub fn read_config_text(path: &Path, what: &str) -> Result<String> {
    read_config_text_limited(path, what, MAX_CONFIG_BYTES)
}

/// [`read_config_text`] with a chosen limit (tests).
pub fn read_config_text_limited(path: &Path, what: &str, limit: u64) -> Result<String> {
    let refuse = |message: String| Error::new(path, ErrorKind::Config(message));
    let file = std::fs::File::open(path)
        .map_err(|e| refuse(format!("cannot read {what}: {}", io_message(&e))))?;
    let info = file
        .metadata()
        .map_err(|e| refuse(format!("cannot read {what}: {}", io_message(&e))))?;
    if info.is_dir() {
        return Err(refuse(format!("is a directory, not {what}")));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read {what}: {}", io_message(&e))))?;
    if bytes.len() as u64 > limit {
        return Err(refuse(format!(
            "{what} is larger than the limit of {} for configuration files",
            byte_size(limit)
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        refuse(format!(
            "{what} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// An I/O error's message without the ` (os error N)` suffix.
fn io_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// `1 MiB`, `4 KiB`, or bytes.
fn byte_size(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_small_files_and_refuses_what_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("rules.toml");
        std::fs::write(&ok, "floor_pct = 2\n").unwrap();
        assert_eq!(
            read_config_text(&ok, "the rules file").unwrap(),
            "floor_pct = 2\n"
        );

        // Exactly at the limit is read; one byte more is refused, naming file and limit.
        let at = dir.path().join("at");
        std::fs::write(&at, vec![b'x'; 4096]).unwrap();
        assert_eq!(
            read_config_text_limited(&at, "x", 4096).unwrap().len(),
            4096
        );
        let over = read_config_text_limited(&at, "the device spec", 4095).unwrap_err();
        assert_eq!(
            over.to_string(),
            format!(
                "{}: the device spec is larger than the limit of 4095 bytes for configuration files",
                at.display()
            )
        );

        let e = read_config_text(dir.path(), "the level map").unwrap_err();
        assert!(
            e.to_string()
                .ends_with(": is a directory, not the level map"),
            "{e}"
        );
        let e = read_config_text(&dir.path().join("missing"), "the rules file").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("cannot read the rules file: No such file or directory"),
            "{e}"
        );
        let bad = dir.path().join("bad");
        std::fs::write(&bad, b"ab\xffcd").unwrap();
        let e = read_config_text(&bad, "the rules file").unwrap_err();
        assert!(
            e.to_string()
                .contains("not UTF-8 text (invalid byte at offset 2)"),
            "{e}"
        );
    }

    #[test]
    fn an_endless_device_is_read_only_up_to_the_limit() {
        let started = std::time::Instant::now();
        let e = read_config_text(Path::new("/dev/zero"), "the rules file").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: the rules file is larger than the limit of 1 MiB for configuration files"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
