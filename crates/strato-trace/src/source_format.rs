//! The format a [`crate::Rank`] was imported from, as a closed set of known names plus
//! whatever else an old or foreign profile says.
//!
//! It owns the one spelling of each format name: the same string is stored in a profile's
//! `ranks.format` column, shown by `info`, written by the Chrome exporter, and matched by the
//! level rules of a `--level-map` file. Format-specific behaviour (overhead correction of
//! recordings, merging Nsight Compute metrics) matches on the variant, never on the text.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a rank's events came from.
///
/// Rules: [`SourceFormat::as_str`] and [`SourceFormat::from_name`] are inverse for every
/// value (`from_name(f.as_str()) == f`), so a profile's format column round-trips unchanged.
/// A name no importer writes becomes [`SourceFormat::Other`] and is kept as it was read: an
/// unknown format in a profile is not an error, it only means no format-specific rule applies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum SourceFormat {
    /// PyTorch profiler (Kineto) JSON: `"kineto"`.
    Kineto,
    /// Any other Chrome trace-event JSON: `"chrome"`.
    Chrome,
    /// TensorBoard's trace viewer JSON of a TensorFlow profile: `"tf-trace-viewer"`.
    TfTraceViewer,
    /// An XSpace protobuf (`*.xplane.pb`) of TensorFlow or JAX: `"xplane"`.
    Xplane,
    /// An Nsight Systems SQLite export: `"nsys"`.
    Nsys,
    /// An Nsight Compute CSV: `"ncu"`.
    Ncu,
    /// A recording of stratoscope's own recorder: `"strato"`.
    Strato,
    /// A rocprofv3 (rocprofiler-sdk) JSON output: `"rocprof"`.
    Rocprof,
    /// A Perfetto protobuf trace (`*.pftrace`), read through its TrackEvent packets:
    /// `"perfetto"`.
    Perfetto,
    /// Linux `perf`: a `perf.data` file or `perf script` text output: `"perf"`.
    Perf,
    /// A name no importer of this version writes (a newer or foreign profile), kept verbatim.
    Other(String),
}

impl SourceFormat {
    /// The format's name as stored and shown.
    pub fn as_str(&self) -> &str {
        match self {
            SourceFormat::Kineto => "kineto",
            SourceFormat::Chrome => "chrome",
            SourceFormat::TfTraceViewer => "tf-trace-viewer",
            SourceFormat::Xplane => "xplane",
            SourceFormat::Nsys => "nsys",
            SourceFormat::Ncu => "ncu",
            SourceFormat::Strato => "strato",
            SourceFormat::Rocprof => "rocprof",
            SourceFormat::Perfetto => "perfetto",
            SourceFormat::Perf => "perf",
            SourceFormat::Other(name) => name,
        }
    }

    /// The format of a stored name; never fails (see [`SourceFormat::Other`]).
    pub fn from_name(name: &str) -> SourceFormat {
        match name {
            "kineto" => SourceFormat::Kineto,
            "chrome" => SourceFormat::Chrome,
            "tf-trace-viewer" => SourceFormat::TfTraceViewer,
            "xplane" => SourceFormat::Xplane,
            "nsys" => SourceFormat::Nsys,
            "ncu" => SourceFormat::Ncu,
            "strato" => SourceFormat::Strato,
            "rocprof" => SourceFormat::Rocprof,
            "perfetto" => SourceFormat::Perfetto,
            "perf" => SourceFormat::Perf,
            other => SourceFormat::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for SourceFormat {
    fn from(name: String) -> Self {
        match SourceFormat::from_name(&name) {
            SourceFormat::Other(_) => SourceFormat::Other(name),
            known => known,
        }
    }
}

impl From<&str> for SourceFormat {
    fn from(name: &str) -> Self {
        SourceFormat::from_name(name)
    }
}

impl From<SourceFormat> for String {
    fn from(format: SourceFormat) -> Self {
        match format {
            SourceFormat::Other(name) => name,
            known => known.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [SourceFormat; 10] = [
        SourceFormat::Kineto,
        SourceFormat::Chrome,
        SourceFormat::TfTraceViewer,
        SourceFormat::Xplane,
        SourceFormat::Nsys,
        SourceFormat::Ncu,
        SourceFormat::Strato,
        SourceFormat::Rocprof,
        SourceFormat::Perfetto,
        SourceFormat::Perf,
    ];

    #[test]
    fn names_round_trip_and_are_distinct() {
        let mut names: Vec<&str> = KNOWN.iter().map(SourceFormat::as_str).collect();
        for format in &KNOWN {
            assert_eq!(SourceFormat::from_name(format.as_str()), *format);
            assert_eq!(String::from(format.clone()), format.as_str());
            assert_eq!(format.to_string(), format.as_str());
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOWN.len());
    }

    #[test]
    fn unknown_names_are_kept_verbatim() {
        for name in ["", "rocprofv2", "Kineto", "tf_trace_viewer", "ncu "] {
            let format = SourceFormat::from_name(name);
            assert_eq!(format, SourceFormat::Other(name.to_owned()));
            assert_eq!(format.as_str(), name);
            assert_eq!(SourceFormat::from(name.to_owned()), format);
        }
    }

    #[test]
    fn serde_writes_the_plain_name() {
        let json = serde_json::to_string(&SourceFormat::TfTraceViewer).unwrap_or_default();
        assert_eq!(json, "\"tf-trace-viewer\"");
        let back: Result<SourceFormat, _> = serde_json::from_str("\"somewhere-else\"");
        assert_eq!(
            back.ok(),
            Some(SourceFormat::Other("somewhere-else".to_owned()))
        );
    }
}
