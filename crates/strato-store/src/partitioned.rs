//! The partitioned profile store (schema version 2): many ranks, of one job or of a fleet of
//! jobs, as a hive-partitioned Parquet dataset that Spark, DuckDB, DataFusion or pandas read
//! as one set of tables, and that every `strato` command reads as one profile.
//!
//! ```text
//! store/
//!   metadata.json                         {"format": "stratoscope-store", "schema_version": 2, ...}
//!   job=<job>/host=<host>/rank=<rank>/    one source rank: a complete schema-version-1 profile
//!     metadata.json  spans.parquet  tracks.parquet  ranks.parquet  ...
//! ```
//!
//! Rules:
//! - each leaf is written by [`crate::write`] (atomic, complete or absent) and holds exactly
//!   one rank; the root's `metadata.json` is written (atomically) before the first leaf;
//! - partition values: `job` as given, `host` the rank's host (`unknown` when the source does
//!   not say), `rank` the rank in the job (the source's, else the rank's position among the
//!   inputs); characters other than `A-Z a-z 0-9 . _ -` are escaped as `%XX` (Hive's escape);
//! - a leaf's own `rank` columns are rank ids inside the leaf (always 0); engines that read
//!   the dataset take `rank` from the path (Spark replaces a data column by the partition
//!   column of the same name), which is the job's rank;
//! - reading ([`read_store`]) appends the leaves in (job, host, rank) order (rank numerically).

use std::path::{Path, PathBuf};

use strato_trace::{CounterSample, Flow, FlowEnd, Instant, Span, StrId, Trace, TrackId};

use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::METADATA_FILE;

/// The `format` of a store's root `metadata.json`.
pub const STORE_MARKER: &str = "stratoscope-store";
/// The schema version of the partitioned layout (version 1 is the single profile directory,
/// which stays readable and is what each leaf is).
pub const STORE_SCHEMA_VERSION: u64 = 2;
/// The partition keys, outermost first.
pub const PARTITION_KEYS: [&str; 3] = ["job", "host", "rank"];

/// One leaf of a store: its partition values and directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub job: String,
    pub host: String,
    pub rank: i64,
    pub dir: PathBuf,
}

/// `value` escaped for a hive partition directory name.
pub fn escape_partition_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        out = out.replace('.', "%2E");
        if out.is_empty() {
            out.push_str("%00");
        }
    }
    out
}

/// Inverse of [`escape_partition_value`] (`None` for a malformed escape).
pub fn unescape_partition_value(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            let b = u8::from_str_radix(hex, 16).ok()?;
            if b != 0 {
                out.push(b);
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// True when `path` is a directory whose `metadata.json` carries the store marker.
pub fn is_store_dir(path: &Path) -> bool {
    root_metadata(path).is_ok()
}

fn root_metadata(store: &Path) -> Result<serde_json::Value> {
    let path = store.join(METADATA_FILE);
    let bytes = std::fs::read(&path).map_err(|e| StoreError::new(&path, e))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::new(&path, StoreErrorKind::Metadata(format!("not JSON: {e}"))))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(STORE_MARKER) {
        return Err(StoreError::new(
            &path,
            StoreErrorKind::NotAProfile(format!("no \"format\": \"{STORE_MARKER}\" marker")),
        ));
    }
    let version = value
        .get("schema_version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| {
            StoreError::new(
                &path,
                StoreErrorKind::Metadata("schema_version missing or not an integer".into()),
            )
        })?;
    if version > STORE_SCHEMA_VERSION {
        return Err(StoreError::new(
            &path,
            StoreErrorKind::NewerSchema {
                found: version,
                supported: STORE_SCHEMA_VERSION,
            },
        ));
    }
    Ok(value)
}

/// Creates the store at `store` (its root `metadata.json`) unless it is one already. Refuses a
/// profile directory, a file, and a non-empty directory that is not a store.
pub fn create_store(store: &Path) -> Result<()> {
    if store.join(METADATA_FILE).exists() {
        return root_metadata(store).map(|_| ());
    }
    if store.exists() {
        let empty = store
            .read_dir()
            .map_err(|e| StoreError::new(store, e))?
            .next()
            .is_none();
        if !empty {
            return Err(StoreError::new(
                store,
                StoreErrorKind::Refused("not empty and not a stratoscope store".into()),
            ));
        }
    }
    std::fs::create_dir_all(store).map_err(|e| StoreError::new(store, e))?;
    let meta = serde_json::json!({
        "format": STORE_MARKER,
        "schema_version": STORE_SCHEMA_VERSION,
        "writer": concat!("stratoscope ", env!("CARGO_PKG_VERSION")),
        "layout": "hive",
        "partitions": PARTITION_KEYS,
        "leaf_schema_version": crate::SCHEMA_VERSION,
    });
    let path = store.join(METADATA_FILE);
    let tmp = store.join(format!(".{METADATA_FILE}.tmp-{}", std::process::id()));
    let text = serde_json::to_string_pretty(&meta)
        .map_err(|e| StoreError::new(&path, StoreErrorKind::Metadata(e.to_string())))?;
    std::fs::write(&tmp, text + "\n")
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| StoreError::new(&path, e))
}

/// Writes the one-rank `trace` as the leaf `job`/its host/`rank` of the store at `store`
/// (created if needed; an existing leaf is replaced as [`crate::write`] replaces a profile).
/// Returns the leaf's directory.
pub fn write_partition(store: &Path, job: &str, rank: i64, trace: &Trace) -> Result<PathBuf> {
    if trace.ranks.len() != 1 {
        return Err(StoreError::new(
            store,
            StoreErrorKind::InvalidTrace(format!(
                "a store partition holds one rank, this trace has {}",
                trace.ranks.len()
            )),
        ));
    }
    create_store(store)?;
    let host = trace.ranks[0].host.as_deref().unwrap_or("unknown");
    let dir = store
        .join(format!("job={}", escape_partition_value(job)))
        .join(format!("host={}", escape_partition_value(host)))
        .join(format!("rank={rank}"));
    crate::write(trace, &dir)?;
    Ok(dir)
}

/// The leaves of the store at `store`, in (job, host, rank) order. Directories that are not
/// `key=value` of the expected key, and leaves without a profile, are errors naming them.
pub fn partitions(store: &Path) -> Result<Vec<Partition>> {
    root_metadata(store)?;
    let mut out = Vec::new();
    for job_dir in keyed_dirs(store, "job")? {
        for host_dir in keyed_dirs(&job_dir.0, "host")? {
            for rank_dir in keyed_dirs(&host_dir.0, "rank")? {
                let rank: i64 = rank_dir.1.parse().map_err(|_| {
                    StoreError::new(
                        &rank_dir.0,
                        StoreErrorKind::NotAProfile("rank= is not an integer".into()),
                    )
                })?;
                if !crate::is_profile_dir(&rank_dir.0) {
                    return Err(StoreError::new(
                        &rank_dir.0,
                        StoreErrorKind::NotAProfile(format!(
                            "a store leaf without a profile (no valid {METADATA_FILE})"
                        )),
                    ));
                }
                out.push(Partition {
                    job: job_dir.1.clone(),
                    host: host_dir.1.clone(),
                    rank,
                    dir: rank_dir.0,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.job, &a.host, a.rank).cmp(&(&b.job, &b.host, b.rank)));
    Ok(out)
}

/// The `key=value` subdirectories of `dir` (hidden entries and files are skipped: temp files
/// of writers, `_SUCCESS` markers of Spark).
fn keyed_dirs(dir: &Path, key: &str) -> Result<Vec<(PathBuf, String)>> {
    let mut out = Vec::new();
    for entry in dir.read_dir().map_err(|e| StoreError::new(dir, e))? {
        let entry = entry.map_err(|e| StoreError::new(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.starts_with('_') || !path.is_dir() {
            continue;
        }
        if name.contains(".tmp-") || name.contains(".old-") {
            continue;
        }
        let value = name
            .strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .and_then(unescape_partition_value)
            .ok_or_else(|| {
                StoreError::new(
                    &path,
                    StoreErrorKind::NotAProfile(format!("expected a {key}=VALUE directory")),
                )
            })?;
        out.push((path, value));
    }
    Ok(out)
}

/// Reads every leaf of the store at `store` into one trace (leaves appended in
/// [`partitions`] order), the parts `options` asks for.
pub fn read_store(store: &Path, options: &crate::ReadOptions) -> Result<Trace> {
    let leaves = partitions(store)?;
    if leaves.is_empty() {
        return Err(StoreError::new(
            store,
            StoreErrorKind::NotAProfile("a store without partitions".into()),
        ));
    }
    let mut trace = Trace::default();
    for leaf in leaves {
        trace.append(crate::read_with(&leaf.dir, options)?);
    }
    Ok(trace)
}

/// Streams every leaf of the store at `store` as [`crate::stream_with`] streams one profile,
/// as [`read_store`] combines them: `sink` sees the tables of the leaves read so far (appended
/// in [`partitions`] order, with the ids [`read_store`] gives them) and one batch of one leaf's
/// events, renumbered to those ids. Returns the tables of every leaf, without events.
pub fn stream_store(
    store: &Path,
    options: &crate::ReadOptions,
    sink: &mut dyn FnMut(&mut Trace),
) -> Result<Trace> {
    let leaves = partitions(store)?;
    if leaves.is_empty() {
        return Err(StoreError::new(
            store,
            StoreErrorKind::NotAProfile("a store without partitions".into()),
        ));
    }
    let mut combined = Trace::default();
    for leaf in leaves {
        let tables = crate::read::read_tables(&leaf.dir)?;
        // Interned before the append, which interns them again in the same order: the ids
        // `Trace::append` gives the leaf's strings.
        let strings: Vec<StrId> = tables
            .trace
            .strings
            .iter()
            .map(|(_, text)| combined.strings.intern(text))
            .collect();
        let track_base = combined.tracks.len() as u32;
        combined.append(tables.trace.clone());
        let ids = LeafIds {
            strings,
            track_base,
        };
        tables.stream_events(options, &mut |batch| {
            ids.move_events(batch, &mut combined);
            sink(&mut combined);
            combined.spans.clear();
            combined.instants.clear();
            combined.counters.clear();
            combined.flows.clear();
            combined.args = strato_trace::ArgsTable::uncompressed();
        })?;
    }
    Ok(combined)
}

/// How one leaf's ids map to the combined trace's (as [`Trace::append`] maps them).
struct LeafIds {
    strings: Vec<StrId>,
    track_base: u32,
}

impl LeafIds {
    fn string(&self, id: StrId) -> StrId {
        // The batch was checked: its string ids are the leaf's.
        self.strings.get(id.0 as usize).copied().unwrap_or(id)
    }

    fn track(&self, id: TrackId) -> TrackId {
        TrackId(id.0 + self.track_base)
    }

    /// Moves the events (and their args blobs) of `batch` into `to`, renumbered.
    fn move_events(&self, batch: &mut Trace, to: &mut Trace) {
        to.spans.extend(batch.spans.drain(..).map(|s| Span {
            track: self.track(s.track),
            name: self.string(s.name),
            category: self.string(s.category),
            ..s
        }));
        to.instants
            .extend(batch.instants.drain(..).map(|e| Instant {
                track: self.track(e.track),
                name: self.string(e.name),
                category: self.string(e.category),
                ..e
            }));
        to.counters
            .extend(batch.counters.drain(..).map(|c| CounterSample {
                track: self.track(c.track),
                ..c
            }));
        let end = |e: Option<FlowEnd>| {
            e.map(|e| FlowEnd {
                track: self.track(e.track),
                ..e
            })
        };
        to.flows.extend(batch.flows.drain(..).map(|f| Flow {
            category: self.string(f.category),
            from: end(f.from),
            to: end(f.to),
            ..f
        }));
        to.args = std::mem::take(&mut batch.args);
    }
}
