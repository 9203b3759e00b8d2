//! NVTX ranges and marks (`NVTX_EVENTS`): push/pop and start/end ranges as spans, marks as
//! instants, domains named from their create events.

use rusqlite::types::ValueRef;
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_trace::Level;

use super::schema::{for_each_row, int, json_cell, nonempty, put_int, quote, text, Select};
use super::{Importer, NVTX};

impl Importer<'_> {
    /// NVTX push/pop and start/end ranges (spans) and marks (instants).
    pub(super) fn nvtx(&mut self) -> rusqlite::Result<()> {
        if !self.schema.has(NVTX) || !self.schema.has_col(NVTX, "eventType") {
            return Ok(());
        }
        let keep = self.options.keep_args;
        let mut domains: FxHashMap<i64, String> = FxHashMap::default();
        if keep && self.schema.has_col(NVTX, "domainId") && self.schema.has_col(NVTX, "text") {
            let sql = format!(
                "SELECT domainId, text FROM {} WHERE eventType = {NVTX_DOMAIN_CREATE}",
                quote(NVTX)
            );
            for_each_row(self.conn, &sql, |row| {
                if let (Some(id), Some(name)) = (int(row, 0), text(row, 1)) {
                    domains.insert(id, name.into_owned());
                }
            })?;
        }
        let mut q = Select::new(&self.schema, NVTX);
        let (s, e) = (q.col("start"), q.col("end"));
        let event_type = q.col("eventType");
        let inline = q.col("text");
        let text_id = q.string("textId");
        let gtid = q.col("globalTid");
        let domain = q.col("domainId");
        let nvtx_category = q.col("category");
        let color = q.col("color");
        let range = q.col("rangeId");
        const PAYLOADS: [&str; 6] = [
            "uint64Value",
            "int64Value",
            "doubleValue",
            "uint32Value",
            "int32Value",
            "floatValue",
        ];
        let payloads = PAYLOADS.map(|n| q.col(n));
        q.tail = format!(" WHERE t.eventType IN ({NVTX_MARK}, {NVTX_PUSH_POP}, {NVTX_START_END})");
        let sql = q.sql();
        let (level, category) = self.level_and_category(NVTX, Level::Operation);
        for_each_row(self.conn, &sql, |row| {
            let (Some(kind), Some(start), Some(g)) =
                (int(row, event_type), int(row, s), int(row, gtid))
            else {
                return;
            };
            if start < 0 {
                return;
            }
            let name = match nonempty(row, inline).or_else(|| nonempty(row, text_id)) {
                Some(n) => self.trace.intern(&n),
                None => self.trace.intern("NVTX"),
            };
            let args = keep.then(|| {
                let mut a = Map::new();
                if let Some(d) = int(row, domain) {
                    a.insert("domainId".into(), Value::from(d));
                    if let Some(n) = domains.get(&d) {
                        a.insert("domain".into(), Value::String(n.clone()));
                    }
                }
                put_int(&mut a, "category", row, nvtx_category);
                put_int(&mut a, "color", row, color);
                put_int(&mut a, "rangeId", row, range);
                let payload = payloads
                    .iter()
                    .filter_map(|&i| row.get_ref(i).ok())
                    .find(|v| !matches!(v, ValueRef::Null));
                if let Some(v) = payload {
                    a.insert("payload".into(), json_cell(v));
                }
                a
            });
            let track = self.thread_track(g);
            if kind == NVTX_MARK {
                if !self.row_read() {
                    return;
                }
                if let Some(ts) = self.instant_time(Some(start)) {
                    self.instant(track, ts, name, category, level, args);
                }
            } else if let Some(times) = self.times(row, s, e) {
                self.span(track, times, name, category, level, None, args);
            }
        })
    }
}

/// NVTX event types (`ENUM_NSYS_EVENT_TYPE`).
pub(super) const NVTX_MARK: i64 = 34;
pub(super) const NVTX_PUSH_POP: i64 = 59;
pub(super) const NVTX_START_END: i64 = 60;
pub(super) const NVTX_DOMAIN_CREATE: i64 = 75;
