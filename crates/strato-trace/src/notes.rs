//! Import notes: what an importer dropped, clamped, guessed or lost while reading one source,
//! kept with the source's [`crate::Rank`] so no number is silently different from the file.
//!
//! One general mechanism for every importer:
//! - **named counts** ([`ImportNotes::count`]): events or rows affected, under a stable
//!   snake_case name that says what happened (`"clamped_negative_durations"`,
//!   `"dropped_rows_null_start"`, `"strings_truncated"`). Add a count by calling `count` with a
//!   new name; nothing else needs to change (the store persists the whole map, `info` lists
//!   it).
//! - **free-text notes** ([`ImportNotes::note`]): one line each, for what is not a count
//!   (`"salvaged: 1234 bytes lost at the end"`, `"process ended without flushing"`).
//! - **`events_read`**: how many events (rows, records) the importer read from the source, the
//!   denominator of [`ImportNotes::warnings`].
//!
//! Rule for a warning (printed by the CLI on stderr, shown by `info`): a count above
//! [`WARN_FRACTION`] of `events_read` (or any count when `events_read` is 0), every count of
//! events that look like device work but were left unclassified
//! ([`UNCLASSIFIED_DEVICE_PREFIX`]: whatever their share, they make a device look idler than it
//! was), and every note.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A count warns when it exceeds this fraction of the events read: 0.1 %.
pub const WARN_FRACTION: f64 = 0.001;

/// Prefix of the counts of events that look like device work (a device/stream in their args,
/// or placed on a device queue) under a category no level rule names, one count per category:
/// `unclassified_device_like_events:<category>`. Analyses of device time leave such events
/// out, and say so ([`ImportNotes::unclassified_device_like`]).
pub const UNCLASSIFIED_DEVICE_PREFIX: &str = "unclassified_device_like_events:";

/// Longest category kept in an [`UNCLASSIFIED_DEVICE_PREFIX`] count name (bytes, cut at a
/// character boundary): a hostile file cannot make the notes large.
const MAX_CATEGORY_IN_NAME: usize = 64;

/// The count name for an unclassified device-like event of `category`
/// ([`UNCLASSIFIED_DEVICE_PREFIX`] + the category, cut to 64 bytes).
pub fn unclassified_device_count_name(category: &str) -> String {
    let mut cut = category.len().min(MAX_CATEGORY_IN_NAME);
    while !category.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{UNCLASSIFIED_DEVICE_PREFIX}{}", &category[..cut])
}

/// What an importer dropped, clamped, guessed or lost for one source. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportNotes {
    /// Events (rows, records) read from the source: the denominator of the warning rule.
    #[serde(default)]
    pub events_read: u64,
    /// Named counts of affected events, by a stable snake_case name.
    #[serde(default)]
    pub counts: BTreeMap<String, u64>,
    /// Free-text notes, one line each.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl ImportNotes {
    /// Adds `n` to the count `name` (a count of 0 is not recorded).
    pub fn count(&mut self, name: &str, n: u64) {
        if n == 0 {
            return;
        }
        let slot = self.counts.entry(name.to_owned()).or_insert(0);
        *slot = slot.saturating_add(n);
    }

    /// The count `name`, 0 when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.counts.get(name).copied().unwrap_or(0)
    }

    /// Adds a free-text note (one line).
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into().replace('\n', " "));
    }

    /// The events that looked like device work but were left unclassified, per category
    /// (see [`UNCLASSIFIED_DEVICE_PREFIX`]), in category order.
    pub fn unclassified_device_like(&self) -> Vec<(&str, u64)> {
        self.counts
            .iter()
            .filter_map(|(name, &n)| Some((name.strip_prefix(UNCLASSIFIED_DEVICE_PREFIX)?, n)))
            .collect()
    }

    /// True when nothing was counted or noted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.notes.is_empty()
    }

    /// Adds another set of notes for the same source.
    pub fn merge(&mut self, other: ImportNotes) {
        self.events_read = self.events_read.saturating_add(other.events_read);
        for (name, n) in other.counts {
            self.count(&name, n);
        }
        self.notes.extend(other.notes);
    }

    /// The lines that deserve a warning (see the module docs): `"name: n of m events"` for a
    /// count above [`WARN_FRACTION`] of the events read, and every note.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .counts
            .iter()
            .filter(|(name, &n)| {
                self.events_read == 0
                    || n as f64 > WARN_FRACTION * self.events_read as f64
                    || name.starts_with(UNCLASSIFIED_DEVICE_PREFIX)
            })
            .map(|(name, n)| {
                if self.events_read == 0 {
                    format!("{name}: {n}")
                } else {
                    format!("{name}: {n} of {} events", self.events_read)
                }
            })
            .collect();
        out.extend(self.notes.iter().cloned());
        out
    }

    /// The notes as one JSON object text (what the profile store keeps).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Parses [`ImportNotes::to_json`]'s text.
    pub fn from_json(text: &str) -> Result<ImportNotes, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_merge_and_warn_above_the_fraction() {
        let mut a = ImportNotes {
            events_read: 10_000,
            ..ImportNotes::default()
        };
        a.count("dropped_rows_null_start", 5);
        a.count("clamped_negative_durations", 0);
        assert_eq!(a.counts.len(), 1);
        assert!(a.warnings().is_empty(), "5 of 10000 is below 0.1 %");
        a.count("dropped_rows_null_start", 20);
        assert_eq!(a.get("dropped_rows_null_start"), 25);
        assert_eq!(
            a.warnings(),
            vec!["dropped_rows_null_start: 25 of 10000 events".to_owned()]
        );
        let mut b = ImportNotes::default();
        b.note("salvaged: 10 bytes\nlost");
        a.merge(b);
        assert_eq!(a.warnings().len(), 2);
        assert_eq!(a.notes, vec!["salvaged: 10 bytes lost".to_owned()]);
        let back = ImportNotes::from_json(&a.to_json()).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn unclassified_device_like_events_always_warn_and_list_by_category() {
        let mut n = ImportNotes {
            events_read: 1_000_000,
            ..ImportNotes::default()
        };
        n.count(&unclassified_device_count_name("mtia_insight"), 3);
        n.count("clamped_negative_durations", 3);
        assert_eq!(n.unclassified_device_like(), vec![("mtia_insight", 3)]);
        // 3 of a million is far below 0.1 %, yet a device looking idle deserves the warning.
        assert_eq!(
            n.warnings(),
            vec!["unclassified_device_like_events:mtia_insight: 3 of 1000000 events".to_owned()]
        );
        let long = "é".repeat(100);
        let name = unclassified_device_count_name(&long);
        assert_eq!(name.len(), UNCLASSIFIED_DEVICE_PREFIX.len() + 64);
    }
}
