//! A writable copy of the real CloverLeaf nsys export (`nsys/pipit_cloverleaf_cuda.sqlite`)
//! for tests that insert rows whose answer they know by construction (graph launches, a
//! second GPU, NVTX ranges): where the copy is, and the facts about the real rows that new
//! rows are placed after (a real thread, the end of the real activity, free ids).

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::data;

/// The copy, open for writing.
pub struct CloverLeafCopy {
    pub path: PathBuf,
    pub db: Connection,
    /// The `globalTid` of the real thread that made the last runtime call.
    pub tid: i64,
    /// The end of the last runtime call or kernel: inserted activity starts after it.
    pub activity_end: i64,
    /// A correlation id above every real one (by 1000), free for inserted launches.
    pub free_correlation: i64,
    /// The next free `StringIds.id`.
    pub next_string: i64,
}

impl CloverLeafCopy {
    /// Copies the real export to `dir/name` and reads its facts.
    pub fn new(dir: &Path, name: &str) -> CloverLeafCopy {
        let path = dir.join(name);
        std::fs::copy(data("nsys/pipit_cloverleaf_cuda.sqlite"), &path).unwrap();
        let db = Connection::open(&path).unwrap();
        let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
        let (tid, last_api_end): (i64, i64) = db
            .query_row(
                "SELECT globalTid, MAX(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let last_kernel_end = one("SELECT MAX(end) FROM CUPTI_ACTIVITY_KIND_KERNEL");
        let free_correlation =
            one("SELECT MAX(correlationId) + 1000 FROM CUPTI_ACTIVITY_KIND_RUNTIME");
        let next_string = one("SELECT MAX(id) + 1 FROM StringIds");
        CloverLeafCopy {
            path,
            db,
            tid,
            activity_end: last_api_end.max(last_kernel_end),
            free_correlation,
            next_string,
        }
    }

    /// Inserts `value` into `StringIds`; returns its id.
    pub fn string(&mut self, value: &str) -> i64 {
        let id = self.next_string;
        self.db
            .execute(
                "INSERT INTO StringIds (id, value) VALUES (?1, ?2)",
                rusqlite::params![id, value],
            )
            .unwrap();
        self.next_string += 1;
        id
    }
}

/// `NVTX_EVENTS` as nsys creates it (CloverLeaf has none; newer exports leave out empty
/// tables).
pub const NVTX_EVENTS: &str = "CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
    textId INTEGER, domainId INTEGER);";
