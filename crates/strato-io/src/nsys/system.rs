//! The system tables: GPUs (`TARGET_INFO_GPU`), thread names and processes, named on the
//! tracks and processes the event tables created.

use std::borrow::Cow;
use strato_trace::metadata::JsonObject;

use rusqlite::types::ValueRef;
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_trace::{Device, Process, TrackId, TrackKind};

use super::schema::{for_each_row, int, json_cell, nonempty, quote, split_global_tid};
use super::{Importer, GPUS, PROCESSES, THREAD_NAMES};

impl Importer<'_> {
    /// `TARGET_INFO_GPU` rows -> devices; every column not mapped to a field goes to
    /// `Device::extra`.
    pub(super) fn devices(&mut self) -> rusqlite::Result<()> {
        if !self.schema.has(GPUS) {
            return Ok(());
        }
        let conn = self.conn;
        let mut stmt = conn.prepare(&format!("SELECT * FROM {}", quote(GPUS)))?;
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let mut extra = Map::new();
            let mut device = Device {
                rank: Some(self.rank),
                ..Device::default()
            };
            let mut has_index = false;
            for (i, column) in names.iter().enumerate() {
                let v = int(row, i);
                match column.as_str() {
                    "id" => {
                        has_index = v.is_some();
                        device.index = v.unwrap_or(-1);
                    }
                    "name" => device.name = nonempty(row, i).map(Cow::into_owned),
                    "smCount" => device.sm_count = v,
                    "totalMemory" => device.total_memory_bytes = v,
                    "computeMajor" | "computeCapabilityMajor" if device.compute_major.is_none() => {
                        device.compute_major = v
                    }
                    "computeMinor" | "computeCapabilityMinor" if device.compute_minor.is_none() => {
                        device.compute_minor = v
                    }
                    // nsys writes Hz; values below 10 MHz can only be kHz already.
                    "clockRate" => {
                        device.clock_rate_khz =
                            v.map(|hz| if hz >= 10_000_000 { hz / 1000 } else { hz })
                    }
                    "memoryBandwidth" => {
                        device.memory_bandwidth_bytes_per_s = match row.get_ref(i) {
                            Ok(ValueRef::Real(f)) => Some(f),
                            _ => v.map(|b| b as f64),
                        }
                    }
                    _ => {
                        let value = row.get_ref(i).map_or(Value::Null, json_cell);
                        if !value.is_null() {
                            extra.insert(column.clone(), value);
                        }
                    }
                }
            }
            if !has_index {
                continue;
            }
            device.extra = JsonObject::from_map(extra);
            self.trace.devices.push(device);
        }
        Ok(())
    }

    /// Names thread tracks from `ThreadNames` (the highest `priority` name wins).
    pub(super) fn thread_names(&mut self) -> rusqlite::Result<()> {
        let Some(mut q) = self.schema.select(THREAD_NAMES) else {
            return Ok(());
        };
        let gtid = q.col("globalTid");
        let name = q.string("nameId");
        let priority = q.col("priority");
        let sql = q.sql();
        let mut best: FxHashMap<TrackId, i64> = FxHashMap::default();
        for_each_row(self.conn, &sql, |row| {
            let (Some(g), Some(text)) = (int(row, gtid), nonempty(row, name)) else {
                return;
            };
            let (pid, tid) = split_global_tid(g);
            let Some(&track) = self.tracks.get(&TrackKind::Thread { pid, tid }) else {
                return;
            };
            let p = int(row, priority).unwrap_or(0);
            if best.get(&track).is_some_and(|&b| b > p) {
                return;
            }
            best.insert(track, p);
            if let Some(t) = self.trace.tracks.get_mut(track.0 as usize) {
                t.name = Some(text.into_owned());
            }
        })
    }

    /// One [`Process`] per pid that owns a track or a device op, named from `PROCESSES`.
    pub(super) fn processes(&mut self) -> rusqlite::Result<()> {
        let mut names: FxHashMap<i64, Option<String>> = FxHashMap::default();
        if let Some(mut q) = self.schema.select(PROCESSES) {
            let gpid = q.col("globalPid");
            let pid = q.col("pid");
            let name = q.col("name");
            let pids = &self.pids;
            for_each_row(self.conn, &q.sql(), |row| {
                let p = match int(row, gpid) {
                    Some(g) => split_global_tid(g).0,
                    None => match int(row, pid) {
                        Some(p) => p,
                        None => return,
                    },
                };
                if pids.contains(&p) && !names.contains_key(&p) {
                    names.insert(p, nonempty(row, name).map(Cow::into_owned));
                }
            })?;
        }
        for &pid in &self.pids {
            self.trace.processes.push(Process {
                rank: self.rank,
                pid,
                name: names.remove(&pid).flatten(),
                labels: None,
            });
        }
        Ok(())
    }
}
