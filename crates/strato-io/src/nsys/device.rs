//! The CUPTI device-op tables: kernels, memcpys, memsets and synchronizations, each placed on
//! its device queue and linked to the runtime call that launched it by correlation id (the
//! launch flow), with the columns every device-op table shares ([`DeviceCols`]) and the
//! memcpy / memory-kind names read through their `ENUM_*` tables.

use rusqlite::Row;
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_trace::{Flow, FlowEnd, Level, StrId};

use super::schema::{
    for_each_row, int, nonempty, process_key, put_dim3, put_int, put_ints, put_text,
    split_global_tid, Enum, Select,
};
use super::{Importer, KERNEL, MEMCPY, MEMSET, SYNC};

impl Importer<'_> {
    /// A device op: span on its stream, correlation, flow from its runtime call.
    pub(super) fn device_op(
        &mut self,
        row: &Row,
        c: &DeviceCols,
        name: StrId,
        category: StrId,
        level: Level,
        args: Option<Map<String, Value>>,
    ) {
        let Some(times) = self.times(row, c.start, c.end) else {
            return;
        };
        let device = int(row, c.device).unwrap_or_else(|| {
            self.notes().count("device_ops_without_device", 1);
            -1
        });
        let stream = int(row, c.stream).unwrap_or_else(|| {
            self.notes().count("device_ops_without_stream", 1);
            -1
        });
        let track = self.queue_track(device, stream);
        let correlation = int(row, c.correlation);
        let global_pid = int(row, c.global_pid);
        if let Some(g) = global_pid {
            self.pids.insert(split_global_tid(g).0);
        }
        let args = args.map(|mut a| {
            put_int(&mut a, "contextId", row, c.context);
            a
        });
        let id = self.span(track, times, name, category, level, correlation, args);
        if let Some(g) = global_pid {
            if let Some(node) = int(row, c.graph_node) {
                self.graph_ops.push((id, process_key(g), node));
            }
        }
        let (Some(corr), Some(g)) = (correlation, global_pid) else {
            return;
        };
        self.ran.insert((process_key(g), corr));
        let Some(&launch) = self.launches.get(&(process_key(g), corr)) else {
            return;
        };
        let Some(from) = self.trace.spans.get(launch.0 as usize) else {
            return;
        };
        let from = FlowEnd {
            track: from.track,
            ts: from.start,
            span: Some(launch),
        };
        self.trace.flows.push(Flow {
            id: u64::try_from(corr).unwrap_or_default(),
            category: self.flow_category,
            from: Some(from),
            to: Some(FlowEnd {
                track,
                ts: times.0,
                span: Some(id),
            }),
        });
    }

    pub(super) fn kernels(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(KERNEL) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let demangled = q.string("demangledName");
        let short = q.string("shortName");
        let mangled = if keep { q.string("mangledName") } else { 0 };
        let grid = ["gridX", "gridY", "gridZ"].map(|n| q.col(n));
        let block = ["blockX", "blockY", "blockZ"].map(|n| q.col(n));
        let cluster = ["clusterX", "clusterY", "clusterZ"].map(|n| q.col(n));
        const SCALARS: [&str; 15] = [
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
            "localMemoryPerThread",
            "localMemoryTotal",
            "sharedMemoryExecuted",
            "sharedMemoryLimitConfig",
            "launchType",
            "cacheConfig",
            "gridId",
            "graphId",
            "graphNodeId",
            "greenContextId",
            "clusterSchedulingPolicy",
            "maxPotentialClusterSize",
        ];
        let scalars = SCALARS.map(|n| q.col(n));
        let sql = q.sql();
        let (level, category) = self.level_and_category(KERNEL, Level::DeviceKernel);
        for_each_row(self.conn, &sql, |row| {
            let name = match nonempty(row, demangled).or_else(|| nonempty(row, short)) {
                Some(n) => self.trace.intern(&n),
                None => self.trace.intern("kernel"),
            };
            let args = keep.then(|| {
                let mut a = Map::new();
                put_dim3(&mut a, "grid", row, grid);
                put_dim3(&mut a, "block", row, block);
                put_dim3(&mut a, "cluster", row, cluster);
                put_ints(&mut a, &SCALARS, row, &scalars);
                put_text(&mut a, "shortName", row, short);
                put_text(&mut a, "mangledName", row, mangled);
                a
            });
            self.device_op(row, &c, name, category, level, args);
        })
    }

    pub(super) fn memcpys(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(MEMCPY) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let bytes = q.col("bytes");
        let kind = q.col("copyKind");
        let src = q.col("srcKind");
        let dst = q.col("dstKind");
        const SCALARS: [&str; 6] = [
            "srcDeviceId",
            "srcContextId",
            "dstDeviceId",
            "dstContextId",
            "migrationCause",
            "graphNodeId",
        ];
        let scalars = SCALARS.map(|n| q.col(n));
        let sql = q.sql();
        let (level, category) = self.level_and_category(MEMCPY, Level::DeviceCopy);
        // Names are few: intern each copy kind once.
        let mut names: FxHashMap<Option<i64>, StrId> = FxHashMap::default();
        for_each_row(self.conn, &sql, |row| {
            let copy_kind = int(row, kind);
            let name = *names.entry(copy_kind).or_insert_with(|| {
                self.trace
                    .intern(&memcpy_name(copy_kind, &self.memcpy_kinds))
            });
            let args = keep.then(|| {
                let mut a = Map::new();
                put_int(&mut a, "bytes", row, bytes);
                if let Some(k) = copy_kind {
                    a.insert("copyKind".into(), self.memcpy_kinds.label_value(k));
                }
                put_mem_kind(&mut a, "srcKind", row, src, &self.mem_kinds);
                put_mem_kind(&mut a, "dstKind", row, dst, &self.mem_kinds);
                put_ints(&mut a, &SCALARS, row, &scalars);
                a
            });
            self.device_op(row, &c, name, category, level, args);
        })
    }

    pub(super) fn memsets(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(MEMSET) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let bytes = q.col("bytes");
        let value = q.col("value");
        let kind = q.col("memKind");
        let node = q.col("graphNodeId");
        let sql = q.sql();
        let (level, category) = self.level_and_category(MEMSET, Level::DeviceSet);
        let name = self.trace.intern("Memset");
        for_each_row(self.conn, &sql, |row| {
            let args = keep.then(|| {
                let mut a = Map::new();
                put_int(&mut a, "bytes", row, bytes);
                put_int(&mut a, "value", row, value);
                put_mem_kind(&mut a, "memKind", row, kind, &self.mem_kinds);
                put_int(&mut a, "graphNodeId", row, node);
                a
            });
            self.device_op(row, &c, name, category, level, args);
        })
    }

    /// CUDA synchronizations: host-side waits. The table names no thread, so a sync goes on the
    /// thread of the runtime call with its correlation id (the `cuda*Synchronize` call it
    /// happened in), else on the main thread (`tid == pid`) of its process.
    pub(super) fn syncs(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(SYNC) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let gtid = q.col("globalTid");
        let sync_type = q.col("syncType");
        let event = q.col("eventId");
        let sql = q.sql();
        let (level, category) = self.level_and_category(SYNC, Level::AcceleratorApi);
        let mut names: FxHashMap<Option<i64>, StrId> = FxHashMap::default();
        for_each_row(self.conn, &sql, |row| {
            let Some(times) = self.times(row, c.start, c.end) else {
                return;
            };
            let correlation = int(row, c.correlation);
            let global_pid = int(row, c.global_pid);
            let launch = match (global_pid, correlation) {
                (Some(g), Some(corr)) => self.launches.get(&(process_key(g), corr)).copied(),
                _ => None,
            };
            let track = if let Some(g) = int(row, gtid) {
                self.thread_track(g)
            } else if let Some(span) = launch.and_then(|l| self.trace.spans.get(l.0 as usize)) {
                span.track
            } else if let Some(g) = global_pid {
                let (pid, _) = split_global_tid(g);
                self.pids.insert(pid);
                self.main_thread_track(pid)
            } else {
                return;
            };
            let kind = int(row, sync_type);
            let name = *names.entry(kind).or_insert_with(|| {
                let text = match kind {
                    Some(k) => self
                        .sync_types
                        .label(k)
                        .map_or_else(|| format!("Sync (type {k})"), str::to_owned),
                    None => "Sync".to_owned(),
                };
                self.trace.intern(&text)
            });
            let args = keep.then(|| {
                let mut a = Map::new();
                if let Some(k) = kind {
                    let v = self
                        .sync_types
                        .name(k)
                        .map_or(Value::from(k), |n| Value::String(n.to_owned()));
                    a.insert("syncType".into(), v);
                }
                put_int(&mut a, "deviceId", row, c.device);
                put_int(&mut a, "streamId", row, c.stream);
                put_int(&mut a, "contextId", row, c.context);
                put_int(&mut a, "eventId", row, event);
                a
            });
            self.span(track, times, name, category, level, correlation, args);
        })
    }
}

/// `Memcpy HtoD` from a `copyKind`, through `ENUM_CUDA_MEMCPY_OPER` when present.
pub(super) fn memcpy_name(kind: Option<i64>, kinds: &Enum) -> String {
    let Some(kind) = kind else {
        return "Memcpy".into();
    };
    if let Some(name) = kinds.name(kind) {
        let short = name.strip_prefix("CUDA_MEMCPY_KIND_").unwrap_or(name);
        let b = short.as_bytes();
        if b.len() == 4 && &short[1..3] == "TO" {
            return format!("Memcpy {}to{}", &short[..1], &short[3..]);
        }
        if let Some(label) = kinds.label(kind) {
            return format!("Memcpy {label}");
        }
    }
    let builtin = match kind {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => return format!("Memcpy (kind {kind})"),
    };
    format!("Memcpy {builtin}")
}

/// Memory kind label through `ENUM_CUDA_MEM_KIND`, or the CUPTI numbering.
pub(super) fn mem_kind(kind: i64, kinds: &Enum) -> Value {
    if let Some(label) = kinds.label(kind) {
        return Value::String(label.to_owned());
    }
    let builtin = match kind {
        0 => "Pageable",
        1 => "Pinned",
        2 => "Device",
        3 => "Array",
        4 => "Managed",
        5 => "Device Static",
        6 => "Managed Static",
        _ => return Value::from(kind),
    };
    Value::String(builtin.into())
}

/// Puts a memory kind cell (labelled by [`mem_kind`]) under `key` when it is not NULL.
pub(super) fn put_mem_kind(
    args: &mut Map<String, Value>,
    key: &str,
    row: &Row,
    i: usize,
    kinds: &Enum,
) {
    if let Some(k) = int(row, i) {
        args.insert(key.to_owned(), mem_kind(k, kinds));
    }
}

/// Columns every device-op table shares.
pub(super) struct DeviceCols {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) device: usize,
    pub(super) stream: usize,
    pub(super) correlation: usize,
    pub(super) global_pid: usize,
    pub(super) context: usize,
    /// `graphNodeId`: set on ops replayed from a CUDA graph node.
    pub(super) graph_node: usize,
}

impl DeviceCols {
    pub(super) fn select(q: &mut Select) -> DeviceCols {
        DeviceCols {
            start: q.col("start"),
            end: q.col("end"),
            device: q.col("deviceId"),
            stream: q.col("streamId"),
            correlation: q.col("correlationId"),
            global_pid: q.col("globalPid"),
            context: q.col("contextId"),
            graph_node: q.col("graphNodeId"),
        }
    }
}
