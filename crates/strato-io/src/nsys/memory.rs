//! CUDA memory allocations and frees (`CUDA_GPU_MEMORY_USAGE_EVENTS`): read in full, put in
//! time order, and turned into `[memory]` instants and the per-(process, device) "memory
//! allocated" counter, the names the Kineto importer uses.

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_trace::{CounterSample, Level, TrackKind};

use super::device::mem_kind;
use super::schema::{for_each_row, int, nonempty, process_key, split_global_tid, Enum, Select};
use super::{Importer, MEMORY_COUNTER, MEMORY_INSTANT, MEM_USAGE};

impl Importer<'_> {
    /// CUDA memory allocations and frees (`CUDA_GPU_MEMORY_USAGE_EVENTS`): one `[memory]`
    /// instant per event, with Kineto's attribute names (`Bytes`, negative for a free; `Addr`;
    /// `Device Id`; `Total Allocated`), and a running `memory allocated` counter per (pid,
    /// device), as the Kineto importer derives from Kineto's `[memory]` events.
    ///
    /// Columns: from the nsys export schema (`sqlite3 <export> .schema`, the commented
    /// `CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS` of 2024-era exports; the fields of CUPTI's
    /// `CUPTI_ACTIVITY_KIND_MEMORY2` record, docs.nvidia.com/cupti/api/
    /// structCUpti__ActivityMemory2.html) and the enum rows of a real export
    /// (`0|CUDA_DEV_MEM_EVENT_OPR_ALLOCATION|Allocation`,
    /// `1|CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION|Deallocation`): `start`, `globalPid`,
    /// `deviceId`, `contextId`, `address`, `pc`, `bytes`, `memKind` (-> `ENUM_CUDA_MEM_KIND`),
    /// `memoryOperationType` (-> `ENUM_CUDA_DEV_MEM_EVENT_OPER`: 0 Allocation, 1 Deallocation),
    /// `name` (variable name, TEXT), `correlationId` (-> runtime call), then the
    /// `localMemoryPool*` / `importedMemoryPool*` columns (not read). Some exports also have
    /// `streamId`. Rows without `start`, `globalPid` or a known operation are skipped.
    pub(super) fn memory_events(&mut self) -> rusqlite::Result<()> {
        if !self.schema.has_col(MEM_USAGE, "start")
            || !self.schema.has_col(MEM_USAGE, "memoryOperationType")
        {
            return Ok(());
        }
        let keep = self.options.keep_args;
        let mut q = Select::new(&self.schema, MEM_USAGE);
        let start = q.col("start");
        let gpid = q.col("globalPid");
        let device = q.col("deviceId");
        let context = q.col("contextId");
        let address = q.col("address");
        let pc = q.col("pc");
        let bytes = q.col("bytes");
        let kind = q.col("memKind");
        let op = q.col("memoryOperationType");
        let var = q.col("name");
        let corr = q.col("correlationId");
        let stream = q.col("streamId");
        let sql = q.sql();
        let mut events = Vec::new();
        for_each_row(self.conn, &sql, |row| {
            if !self.row_read() {
                return;
            }
            let Some(ts) = self.instant_time(int(row, start)) else {
                return;
            };
            let (Some(global_pid), Some(op)) = (int(row, gpid), int(row, op)) else {
                return;
            };
            events.push(MemEvent {
                ts,
                global_pid,
                device: int(row, device),
                context: int(row, context),
                address: int(row, address),
                pc: int(row, pc),
                bytes: int(row, bytes),
                kind: int(row, kind),
                op,
                name: if keep {
                    nonempty(row, var).map(Cow::into_owned)
                } else {
                    None
                },
                correlation: int(row, corr),
                stream: int(row, stream),
            });
        })?;
        // The running total needs time order; a stable sort keeps the file's order on ties.
        events.sort_by_key(|e| e.ts);
        let (level, category) = self.level_and_category(MEM_USAGE, Level::AcceleratorApi);
        let name = self.trace.intern(MEMORY_INSTANT);
        // (process key, address) -> (bytes, device) of the live allocation.
        let mut live: FxHashMap<(i64, i64), (i64, i64)> = FxHashMap::default();
        // (pid, device) -> bytes in use.
        let mut totals: FxHashMap<(i64, i64), i64> = FxHashMap::default();
        for ev in events {
            let Some(free) = mem_oper_is_free(ev.op, &self.mem_opers) else {
                continue;
            };
            let key = process_key(ev.global_pid);
            let (pid, _) = split_global_tid(ev.global_pid);
            let row_device = if ev
                .kind
                .is_some_and(|k| is_host_mem_kind(k, &self.mem_kinds))
            {
                -1
            } else {
                ev.device.unwrap_or(-1)
            };
            let row_bytes = ev.bytes.filter(|&b| b > 0);
            let (size, dev) = if free {
                // A free is counted where its allocation was, with the allocation's size when
                // the free row gives none.
                let alloc = ev.address.and_then(|a| live.remove(&(key, a)));
                (
                    row_bytes.or(alloc.map(|a| a.0)),
                    alloc.map_or(row_device, |a| a.1),
                )
            } else {
                if let (Some(a), Some(b)) = (ev.address, row_bytes) {
                    live.insert((key, a), (b, row_device));
                }
                (row_bytes, row_device)
            };
            let delta = size.map(|b| if free { -b } else { b });
            let total = totals.entry((pid, dev)).or_insert(0);
            *total = total.saturating_add(delta.unwrap_or(0));
            let total = *total;
            self.pids.insert(pid);
            let counter = self.track(
                TrackKind::Counter {
                    pid: Some(pid),
                    device: Some(dev),
                    name: MEMORY_COUNTER.into(),
                    unit: "bytes".into(),
                },
                None,
            );
            self.trace.counters.push(CounterSample {
                track: counter,
                ts: ev.ts,
                value: total as f64,
            });
            // On the thread of the runtime call (cudaMalloc, cudaFree, ...) with the same
            // correlation id, else on the process's main thread.
            let launch = ev
                .correlation
                .and_then(|c| self.launches.get(&(key, c)))
                .and_then(|l| self.trace.spans.get(l.0 as usize));
            let track = match launch {
                Some(span) => span.track,
                None => self.main_thread_track(pid),
            };
            let args = keep.then(|| {
                let mut a = Map::new();
                if let Some(d) = delta {
                    a.insert("Bytes".into(), Value::from(d));
                }
                if let Some(addr) = ev.address {
                    a.insert("Addr".into(), Value::from(addr));
                }
                a.insert("Device Id".into(), Value::from(dev));
                a.insert("Total Allocated".into(), Value::from(total));
                let oper = self
                    .mem_opers
                    .label(ev.op)
                    .filter(|l| !l.is_empty())
                    .map_or(Value::from(ev.op), |l| Value::String(l.to_owned()));
                a.insert("memoryOperationType".into(), oper);
                if let Some(k) = ev.kind {
                    a.insert("memKind".into(), mem_kind(k, &self.mem_kinds));
                }
                for (k, v) in [
                    ("deviceId", ev.device),
                    ("contextId", ev.context),
                    ("streamId", ev.stream),
                    ("correlationId", ev.correlation),
                    ("pc", ev.pc),
                ] {
                    if let Some(v) = v {
                        a.insert(k.into(), Value::from(v));
                    }
                }
                if let Some(n) = ev.name {
                    a.insert("name".into(), Value::String(n));
                }
                a
            });
            self.instant(track, ev.ts, name, category, level, args);
        }
        Ok(())
    }
}

/// Whether a `memoryOperationType` is a free (`Some(true)`) or an allocation (`Some(false)`),
/// through `ENUM_CUDA_DEV_MEM_EVENT_OPER` (`0 CUDA_DEV_MEM_EVENT_OPR_ALLOCATION Allocation`,
/// `1 CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION Deallocation`) when present, else that numbering.
/// `None`: an operation this importer does not know.
pub(super) fn mem_oper_is_free(op: i64, opers: &Enum) -> Option<bool> {
    if let Some((name, label)) = opers.values.get(&op) {
        let text = format!("{name} {label}").to_ascii_uppercase();
        if text.contains("DEALLOC") || text.contains("FREE") {
            return Some(true);
        }
        if text.contains("ALLOC") {
            return Some(false);
        }
    }
    match op {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Host memory kinds (`Pageable`, `Pinned`): counted on device -1, as Kineto counts host memory.
pub(super) fn is_host_mem_kind(kind: i64, kinds: &Enum) -> bool {
    matches!(mem_kind(kind, kinds), Value::String(s) if s == "Pageable" || s == "Pinned")
}

/// One `CUDA_GPU_MEMORY_USAGE_EVENTS` row (read in full, then put in time order).
pub(super) struct MemEvent {
    pub(super) ts: i64,
    pub(super) global_pid: i64,
    pub(super) device: Option<i64>,
    pub(super) context: Option<i64>,
    pub(super) address: Option<i64>,
    pub(super) pc: Option<i64>,
    pub(super) bytes: Option<i64>,
    pub(super) kind: Option<i64>,
    pub(super) op: i64,
    pub(super) name: Option<String>,
    pub(super) correlation: Option<i64>,
    pub(super) stream: Option<i64>,
}
