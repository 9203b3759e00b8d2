//! `metadata.json`: the marker that makes a directory a profile (written last), the schema
//! version, the writer, the creation time, the trace's [`ClockInfo`] and the row count of every
//! table.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use strato_trace::ClockInfo;

use crate::error::{Result, StoreError, StoreErrorKind};

/// The value of the `format` field.
pub const FORMAT_MARKER: &str = "stratoscope-profile";
/// The schema version this crate writes and the newest it reads.
pub const SCHEMA_VERSION: u64 = 1;
/// The file name.
pub const METADATA_FILE: &str = "metadata.json";
/// Larger `metadata.json` files are rejected rather than read into memory.
const MAX_METADATA_BYTES: u64 = 64 << 20;

/// One table's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    pub file: String,
    pub rows: u64,
}

/// The content of `metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub format: String,
    pub schema_version: u64,
    /// `stratoscope <version>`.
    pub writer: String,
    /// Creation time, RFC 3339 UTC (`2025-01-31T12:00:00.123Z`).
    pub created_utc: String,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_unix_ns: i64,
    pub clock: ClockInfo,
    /// Table name -> file and row count.
    pub tables: BTreeMap<String, TableInfo>,
}

impl Metadata {
    /// Metadata for a profile written now.
    pub(crate) fn new(clock: ClockInfo, tables: BTreeMap<String, TableInfo>) -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Metadata {
            format: FORMAT_MARKER.to_owned(),
            schema_version: SCHEMA_VERSION,
            writer: concat!("stratoscope ", env!("CARGO_PKG_VERSION")).to_owned(),
            created_utc: rfc3339_utc(now),
            created_unix_ns: now,
            clock,
            tables,
        }
    }

    /// Reads and checks `dir/metadata.json`: the marker, then the version (before the rest,
    /// whose shape a newer version may have changed), then the fields.
    pub(crate) fn read(dir: &Path) -> Result<Metadata> {
        let path = dir.join(METADATA_FILE);
        let bad = |message: String| StoreError::new(&path, StoreErrorKind::Metadata(message));
        let size = std::fs::metadata(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    StoreError::new(
                        dir,
                        StoreErrorKind::NotAProfile(format!("no {METADATA_FILE}")),
                    )
                } else {
                    StoreError::new(&path, e)
                }
            })?
            .len();
        if size > MAX_METADATA_BYTES {
            return Err(bad(format!("{size} bytes is too large")));
        }
        let bytes = std::fs::read(&path).map_err(|e| StoreError::new(&path, e))?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_MARKER) {
            return Err(StoreError::new(
                &path,
                StoreErrorKind::NotAProfile(format!("no \"format\": \"{FORMAT_MARKER}\" marker")),
            ));
        }
        let version = value
            .get("schema_version")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| bad("schema_version missing or not a non-negative integer".into()))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::new(
                &path,
                StoreErrorKind::NewerSchema {
                    found: version,
                    supported: SCHEMA_VERSION,
                },
            ));
        }
        if version == 0 {
            return Err(bad("schema_version 0 does not exist".into()));
        }
        serde_json::from_value(value).map_err(|e| bad(e.to_string()))
    }
}

/// True when `dir/metadata.json` exists and carries the profile marker.
pub(crate) fn has_marker(dir: &Path) -> bool {
    let path = dir.join(METADATA_FILE);
    let small =
        std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= MAX_METADATA_BYTES);
    small
        && std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .is_some_and(|v| v.get("format").and_then(|f| f.as_str()) == Some(FORMAT_MARKER))
}

/// Formats nanoseconds since the epoch as RFC 3339 UTC with milliseconds.
fn rfc3339_utc(unix_ns: i64) -> String {
    let ms_total = unix_ns.div_euclid(1_000_000);
    let days = ms_total.div_euclid(86_400_000);
    let ms_of_day = ms_total.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, ms) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_utc(1_709_251_199_999_000_000),
            "2024-02-29T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_utc(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
