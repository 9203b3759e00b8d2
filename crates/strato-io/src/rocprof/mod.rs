//! rocprofv3 (rocprofiler-sdk) JSON importer: `rocprofv3 --output-format json` writes one
//! object `{"rocprofiler-sdk-tool": [ per-process data ]}` (schema:
//! `source/docs/rocprofv3-schema.json` of ROCm/rocprofiler-sdk). It is not a Chrome trace; the
//! format is sniffed from its first key ([`is_rocprof_head`]).
//!
//! This module owns the typed view of that schema (only the fields the mapping reads; unknown
//! fields are skipped, missing optional ones default) and the mapping to the trace model (see
//! `docs/formats/rocprof.md`):
//! - each element of `rocprofiler-sdk-tool` (a profiled process) becomes a [`Rank`] (format
//!   [`SourceFormat::Rocprof`], host = `metadata.node.hostname`);
//! - GPU agents (`type` 2) become [`Device`]s with index `gpu_index` (else `logical_node_id`):
//!   name = `product_name` (the marketing name, e.g. "AMD Instinct MI300X"), CU count,
//!   memory = the agent's frame-buffer memory banks, clock = `max_engine_clk_fcompute`; the
//!   rest (gfx name, XCC count, wavefront size, ...) goes to `Device.extra`. CPU agents are listed
//!   in the rank's metadata;
//! - `kernel_dispatch` records become spans on `DeviceQueue { device, queue: queue_id }`,
//!   named by their kernel symbol (`formatted_kernel_name`, else the demangled or raw name),
//!   category `KERNEL_DISPATCH`, correlation = `correlation_id.internal`, external id =
//!   `correlation_id.external` when non-zero, args `grid`/`block` (Kineto's keys) and the
//!   dispatch fields;
//! - `memory_copy` records become spans on the GPU side's copy queue
//!   (`DeviceQueue { device, queue: COPY_QUEUE }`), named by their operation
//!   (`MEMORY_COPY_HOST_TO_DEVICE`, ...), args `bytes`;
//! - `hip_api`, `hsa_api`, `marker_api`, `rccl_api`, `rocdecode_api`, `rocjpeg_api` records
//!   become spans on `Thread { pid, tid: thread_id }`, named by their operation, with the same
//!   correlation as the dispatches and copies they caused;
//! - levels come from the level map's `rocprof` rules on the record kind's name.
//!
//! Record names are looked up in the file's own `strings.buffer_records` (kind -> name and
//! operations), so a newer SDK's kinds and operations are named without a table here.
//!
//! Streaming: the file is read once through `serde_json` into compact typed records (the
//! JSON text is never held); what is kept is the records the trace keeps.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use strato_trace::metadata::{JsonObject, SourceMetadata};

use serde::Deserialize;
use serde_json::{json, Map, Value};
use strato_trace::{
    Device, Level, Process, Rank, RankId, SourceFormat, Span, StrId, Trace, TrackId,
    TrackIndexHandle, TrackKind,
};

use crate::{input, input::Input, Error, ErrorKind, ImportOptions, Result};

/// The queue number of the track memory copies go to (rocprofv3's JSON gives copies no queue).
pub const COPY_QUEUE: i64 = -1;

/// `rocprofiler_agent_type_t`: a GPU agent.
const AGENT_TYPE_GPU: i64 = 2;

/// `HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC` and `_PRIVATE`: device-local memory banks.
const DEVICE_HEAP_TYPES: [i64; 2] = [1, 2];

/// Whether a JSON head is rocprofv3 output: an object whose first key is
/// `"rocprofiler-sdk-tool"` (as rocprofv3 writes it).
pub fn is_rocprof_head(head: &[u8]) -> bool {
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut rest = text.iter().skip_while(|b| b.is_ascii_whitespace());
    if rest.next() != Some(&b'{') {
        return false;
    }
    let after: Vec<u8> = rest
        .skip_while(|b| b.is_ascii_whitespace())
        .take(22)
        .copied()
        .collect();
    after == b"\"rocprofiler-sdk-tool\""
}

/// The file: `{"rocprofiler-sdk-tool": [process, ...]}`.
#[derive(Deserialize)]
struct Root {
    #[serde(rename = "rocprofiler-sdk-tool")]
    processes: Vec<ProcessData>,
}

/// One profiled process.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ProcessData {
    metadata: Metadata,
    agents: Vec<Agent>,
    strings: Strings,
    kernel_symbols: Vec<KernelSymbol>,
    buffer_records: BufferRecords,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    pid: i64,
    init_time: Option<i64>,
    fini_time: Option<i64>,
    node: Option<Node>,
    command: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Node {
    hostname: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(default)]
struct Handle {
    handle: u64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Agent {
    id: Handle,
    #[serde(rename = "type")]
    agent_type: i64,
    name: String,
    product_name: String,
    model_name: String,
    vendor_name: String,
    cu_count: i64,
    simd_count: i64,
    num_xcc: i64,
    wave_front_size: i64,
    max_engine_clk_fcompute: i64,
    gfx_target_version: i64,
    device_id: i64,
    node_id: i64,
    logical_node_id: i64,
    gpu_index: Option<i64>,
    cpu_cores_count: i64,
    mem_banks: Vec<MemBank>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MemBank {
    heap_type: i64,
    width: i64,
    mem_clk_max: i64,
    size_in_bytes: i64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Strings {
    buffer_records: Vec<KindNames>,
}

/// `strings.buffer_records[kind]`: a record kind's name and its operations' names.
#[derive(Deserialize, Default)]
#[serde(default)]
struct KindNames {
    kind: String,
    operations: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct KernelSymbol {
    kernel_id: u64,
    kernel_name: String,
    formatted_kernel_name: String,
    demangled_kernel_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct BufferRecords {
    kernel_dispatch: Vec<Dispatch>,
    memory_copy: Vec<MemoryCopy>,
    hip_api: Vec<ApiCall>,
    hsa_api: Vec<ApiCall>,
    marker_api: Vec<ApiCall>,
    rccl_api: Vec<ApiCall>,
    rocdecode_api: Vec<ApiCall>,
    rocjpeg_api: Vec<ApiCall>,
    memory_allocation: Vec<serde::de::IgnoredAny>,
    scratch_memory: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct Correlation {
    internal: u64,
    external: u64,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct Dim3 {
    x: i64,
    y: i64,
    z: i64,
}

#[derive(Deserialize)]
struct Dispatch {
    #[serde(default)]
    kind: i64,
    #[serde(default)]
    thread_id: i64,
    #[serde(default)]
    correlation_id: Correlation,
    start_timestamp: i64,
    end_timestamp: i64,
    dispatch_info: DispatchInfo,
    #[serde(default)]
    stream_id: Option<Handle>,
}

#[derive(Deserialize)]
struct DispatchInfo {
    agent_id: Handle,
    queue_id: Handle,
    kernel_id: u64,
    #[serde(default)]
    dispatch_id: u64,
    #[serde(default)]
    private_segment_size: i64,
    #[serde(default)]
    group_segment_size: i64,
    #[serde(default)]
    workgroup_size: Dim3,
    #[serde(default)]
    grid_size: Dim3,
}

#[derive(Deserialize)]
struct MemoryCopy {
    #[serde(default)]
    kind: i64,
    #[serde(default)]
    operation: i64,
    #[serde(default)]
    thread_id: i64,
    #[serde(default)]
    correlation_id: Correlation,
    start_timestamp: i64,
    end_timestamp: i64,
    dst_agent_id: Handle,
    src_agent_id: Handle,
    #[serde(default)]
    bytes: u64,
}

#[derive(Deserialize)]
struct ApiCall {
    #[serde(default)]
    kind: i64,
    #[serde(default)]
    operation: i64,
    #[serde(default)]
    thread_id: i64,
    #[serde(default)]
    correlation_id: Correlation,
    start_timestamp: i64,
    end_timestamp: i64,
}

/// Counts the bytes read, for error offsets.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Imports a rocprofv3 JSON file: see the module docs.
pub fn import(path: &Path, input: Input, options: &ImportOptions) -> Result<Trace> {
    let mut reader = Counting {
        inner: input.reader,
        read: 0,
    };
    let root: Root = {
        let mut de = serde_json::Deserializer::from_reader(&mut reader);
        let parsed = Root::deserialize(&mut de).and_then(|root| de.end().map(|()| root));
        match parsed {
            Ok(root) => root,
            Err(e) if e.is_io() => {
                return Err(input::classify(path, std::io::Error::from(e)));
            }
            Err(e) => {
                return Err(Error::new(
                    path,
                    ErrorKind::Json {
                        offset: reader.read,
                        message: format!("rocprofv3 JSON: {e}"),
                    },
                ))
            }
        }
    };
    if root.processes.is_empty() {
        return Err(Error::new(
            path,
            ErrorKind::NotATrace(
                "rocprofv3 JSON holds no process (`rocprofiler-sdk-tool` is empty)".into(),
            ),
        ));
    }
    let mut trace = Trace::default();
    let mut memory = strato_trace::MemoryTracker::new(options.memory_budget_bytes);
    for process in root.processes {
        let mut builder = Builder {
            options,
            index: TrackIndexHandle::default(),
            categories: HashMap::new(),
            names: HashMap::new(),
        };
        builder
            .process(&mut trace, path, process, &mut memory)
            .map_err(|kind| Error::new(path, kind))?;
    }
    Ok(trace)
}

/// State of one process's mapping.
struct Builder<'a> {
    options: &'a ImportOptions,
    index: TrackIndexHandle,
    /// (section, record kind) -> (category string, level).
    categories: HashMap<(Section, i64), (StrId, Level)>,
    /// (kind, operation) or kernel id -> name string.
    names: HashMap<(i64, i64), StrId>,
}

/// The name of record kind `kind` as the file spells it (`KERNEL_DISPATCH`), else the name of
/// the section the record came from (`KERNEL_DISPATCH`, `HIP_API`, ...: a file without
/// `strings` still maps to the right levels).
fn kind_name(strings: &Strings, kind: i64, section: Section) -> String {
    usize::try_from(kind)
        .ok()
        .and_then(|k| strings.buffer_records.get(k))
        .map(|k| k.kind.clone())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| section.kind_name().to_owned())
}

/// The `buffer_records` section a record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Section {
    KernelDispatch,
    MemoryCopy,
    HipApi,
    HsaApi,
    MarkerApi,
    RcclApi,
    RocdecodeApi,
    RocjpegApi,
}

impl Section {
    /// The section's key in `buffer_records`.
    fn key(self) -> &'static str {
        match self {
            Section::KernelDispatch => "kernel_dispatch",
            Section::MemoryCopy => "memory_copy",
            Section::HipApi => "hip_api",
            Section::HsaApi => "hsa_api",
            Section::MarkerApi => "marker_api",
            Section::RcclApi => "rccl_api",
            Section::RocdecodeApi => "rocdecode_api",
            Section::RocjpegApi => "rocjpeg_api",
        }
    }

    /// The kind name used when the file's `strings` do not name a record's kind.
    fn kind_name(self) -> &'static str {
        match self {
            Section::KernelDispatch => "KERNEL_DISPATCH",
            Section::MemoryCopy => "MEMORY_COPY",
            Section::HipApi => "HIP_API",
            Section::HsaApi => "HSA_API",
            Section::MarkerApi => "MARKER_API",
            Section::RcclApi => "RCCL_API",
            Section::RocdecodeApi => "ROCDECODE_API",
            Section::RocjpegApi => "ROCJPEG_API",
        }
    }
}

/// The level of a record kind: the level map's `rocprof` rule, else by the kind's family.
fn kind_level(options: &ImportOptions, kind: &str) -> Level {
    options
        .level_map
        .level("rocprof", kind)
        .unwrap_or(if kind.ends_with("_API") {
            Level::AcceleratorApi
        } else {
            Level::Other
        })
}

/// A record's times, checked: both in the valid range and `end >= start`.
fn times(what: &str, index: usize, start: i64, end: i64) -> Result<(i64, i64), ErrorKind> {
    let check = |t: i64| strato_trace::checked_time(i128::from(t)).ok();
    match (check(start), check(end)) {
        (Some(s), Some(e)) if e >= s => Ok((s, e)),
        _ => Err(ErrorKind::Invalid(format!(
            "{what} record {index}: start_timestamp {start}, end_timestamp {end} (out of range, \
             or end before start)"
        ))),
    }
}

impl Builder<'_> {
    fn category(
        &mut self,
        trace: &mut Trace,
        strings: &Strings,
        kind: i64,
        section: Section,
    ) -> (StrId, Level) {
        let options = self.options;
        *self.categories.entry((section, kind)).or_insert_with(|| {
            let name = kind_name(strings, kind, section);
            (trace.intern(&name), kind_level(options, &name))
        })
    }

    fn operation_name(
        &mut self,
        trace: &mut Trace,
        strings: &Strings,
        kind: i64,
        operation: i64,
        section: Section,
    ) -> StrId {
        *self.names.entry((kind, operation)).or_insert_with(|| {
            let name = usize::try_from(kind)
                .ok()
                .and_then(|k| strings.buffer_records.get(k))
                .and_then(|k| {
                    usize::try_from(operation)
                        .ok()
                        .and_then(|o| k.operations.get(o))
                })
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or_else(|| {
                    format!(
                        "{} operation {operation}",
                        kind_name(strings, kind, section)
                    )
                });
            trace.intern(&name)
        })
    }

    fn args(&self, trace: &mut Trace, value: Value) -> Option<strato_trace::ArgsId> {
        self.options
            .keep_args
            .then(|| trace.add_args(&value.to_string()))
    }

    fn process(
        &mut self,
        trace: &mut Trace,
        path: &Path,
        data: ProcessData,
        memory: &mut strato_trace::MemoryTracker,
    ) -> Result<(), ErrorKind> {
        let ProcessData {
            metadata,
            agents,
            strings,
            kernel_symbols,
            buffer_records: records,
        } = data;
        let cpu_agents: Vec<Value> = agents
            .iter()
            .filter(|a| a.agent_type != AGENT_TYPE_GPU)
            .map(|a| {
                json!({
                    "agent": a.id.handle,
                    "name": a.product_name,
                    "node_id": a.node_id,
                    "cores": a.cpu_cores_count,
                })
            })
            .collect();
        let meta = json!({
            "pid": metadata.pid,
            "init_time": metadata.init_time,
            "fini_time": metadata.fini_time,
            "command": metadata.command,
            "cpu_agents": cpu_agents,
            "memory_allocation_records": records.memory_allocation.len(),
            "scratch_memory_records": records.scratch_memory.len(),
        });
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: SourceFormat::Rocprof,
            host: metadata.node.as_ref().and_then(|n| n.hostname.clone()),
            metadata: SourceMetadata::of_value(meta),
            notes: Default::default(),
        });
        // Agents: GPU agents are devices, numbered by their GPU index.
        let mut device_of: HashMap<u64, i64> = HashMap::new();
        for agent in agents.iter().filter(|a| a.agent_type == AGENT_TYPE_GPU) {
            let index = agent
                .gpu_index
                .filter(|&i| i >= 0)
                .unwrap_or(agent.logical_node_id);
            device_of.insert(agent.id.handle, index);
            trace.devices.push(device(rank, index, agent));
        }
        let pid = metadata.pid;
        trace.processes.push(Process {
            rank,
            pid,
            name: metadata.command.first().cloned(),
            labels: None,
        });
        let kernel_names: HashMap<u64, &KernelSymbol> =
            kernel_symbols.iter().map(|k| (k.kernel_id, k)).collect();
        let mut kernel_name_ids: HashMap<u64, StrId> = HashMap::new();
        let note_count = |trace: &mut Trace, name: &str, n: u64| {
            trace.ranks[rank.0 as usize].notes.count(name, n);
        };
        let mut unknown_agents = 0u64;
        let mut unknown_kernels = 0u64;

        for (i, d) in records.kernel_dispatch.iter().enumerate() {
            trace.ranks[rank.0 as usize].notes.events_read += 1;
            if i % 4096 == 0 {
                memory.check(trace).map_err(|e| ErrorKind::MemoryBudget {
                    limit_bytes: e.limit_bytes,
                })?;
            }
            let (start, end) = times("kernel_dispatch", i, d.start_timestamp, d.end_timestamp)?;
            let info = &d.dispatch_info;
            let device = match device_of.get(&info.agent_id.handle) {
                Some(&index) => index,
                None => {
                    unknown_agents += 1;
                    agent_fallback_index(info.agent_id.handle)
                }
            };
            let track = self.queue_track(trace, rank, device, queue_number(info.queue_id.handle));
            let name = *kernel_name_ids
                .entry(info.kernel_id)
                .or_insert_with(|| match kernel_names.get(&info.kernel_id) {
                    Some(symbol) => trace.intern(kernel_display_name(symbol)),
                    None => {
                        unknown_kernels += 1;
                        trace.intern(&format!("kernel {}", info.kernel_id))
                    }
                });
            let (category, level) = self.category(trace, &strings, d.kind, Section::KernelDispatch);
            let args = self.args(
                trace,
                json!({
                    "grid": [info.grid_size.x, info.grid_size.y, info.grid_size.z],
                    "block": [info.workgroup_size.x, info.workgroup_size.y, info.workgroup_size.z],
                    "kernel_id": info.kernel_id,
                    "dispatch_id": info.dispatch_id,
                    "private_segment_size": info.private_segment_size,
                    "group_segment_size": info.group_segment_size,
                    "agent": info.agent_id.handle,
                    "queue": info.queue_id.handle,
                    "stream": d.stream_id.map(|s| s.handle),
                    "thread_id": d.thread_id,
                }),
            );
            trace.spans.push(Span {
                track,
                start,
                end,
                name,
                category,
                level,
                correlation: nonzero(d.correlation_id.internal).into(),
                external_id: nonzero(d.correlation_id.external).into(),
                args,
            });
        }

        for (i, c) in records.memory_copy.iter().enumerate() {
            trace.ranks[rank.0 as usize].notes.events_read += 1;
            if i % 4096 == 0 {
                memory.check(trace).map_err(|e| ErrorKind::MemoryBudget {
                    limit_bytes: e.limit_bytes,
                })?;
            }
            let (start, end) = times("memory_copy", i, c.start_timestamp, c.end_timestamp)?;
            // The GPU side of the copy: the destination when it is a GPU, else the source.
            let device = device_of
                .get(&c.dst_agent_id.handle)
                .or_else(|| device_of.get(&c.src_agent_id.handle))
                .copied()
                .unwrap_or_else(|| {
                    unknown_agents += 1;
                    agent_fallback_index(c.dst_agent_id.handle)
                });
            let track = self.queue_track(trace, rank, device, COPY_QUEUE);
            let name =
                self.operation_name(trace, &strings, c.kind, c.operation, Section::MemoryCopy);
            let (category, level) = self.category(trace, &strings, c.kind, Section::MemoryCopy);
            let args = self.args(
                trace,
                json!({
                    "bytes": c.bytes,
                    "src_agent": c.src_agent_id.handle,
                    "dst_agent": c.dst_agent_id.handle,
                    "thread_id": c.thread_id,
                }),
            );
            trace.spans.push(Span {
                track,
                start,
                end,
                name,
                category,
                level,
                correlation: nonzero(c.correlation_id.internal).into(),
                external_id: nonzero(c.correlation_id.external).into(),
                args,
            });
        }

        let api_lists: [(Section, &Vec<ApiCall>); 6] = [
            (Section::HipApi, &records.hip_api),
            (Section::HsaApi, &records.hsa_api),
            (Section::MarkerApi, &records.marker_api),
            (Section::RcclApi, &records.rccl_api),
            (Section::RocdecodeApi, &records.rocdecode_api),
            (Section::RocjpegApi, &records.rocjpeg_api),
        ];
        let mut threads: HashMap<i64, TrackId> = HashMap::new();
        for (section, list) in api_lists {
            let what = section.key();
            for (i, call) in list.iter().enumerate() {
                trace.ranks[rank.0 as usize].notes.events_read += 1;
                if i % 4096 == 0 {
                    memory.check(trace).map_err(|e| ErrorKind::MemoryBudget {
                        limit_bytes: e.limit_bytes,
                    })?;
                }
                let (start, end) = times(what, i, call.start_timestamp, call.end_timestamp)?;
                let track = *threads.entry(call.thread_id).or_insert_with(|| {
                    trace.track_for(
                        &mut self.index,
                        rank,
                        TrackKind::Thread {
                            pid,
                            tid: call.thread_id,
                        },
                    )
                });
                let name = self.operation_name(trace, &strings, call.kind, call.operation, section);
                let (category, level) = self.category(trace, &strings, call.kind, section);
                trace.spans.push(Span {
                    track,
                    start,
                    end,
                    name,
                    category,
                    level,
                    correlation: nonzero(call.correlation_id.internal).into(),
                    external_id: nonzero(call.correlation_id.external).into(),
                    args: None,
                });
            }
        }
        if unknown_agents > 0 {
            note_count(trace, "records_on_unknown_agents", unknown_agents);
        }
        if unknown_kernels > 0 {
            note_count(trace, "dispatches_of_unknown_kernels", unknown_kernels);
        }
        let skipped = (records.memory_allocation.len() + records.scratch_memory.len()) as u64;
        if skipped > 0 {
            note_count(
                trace,
                "memory_allocation_and_scratch_records_skipped",
                skipped,
            );
        }
        memory.check(trace).map_err(|e| ErrorKind::MemoryBudget {
            limit_bytes: e.limit_bytes,
        })?;
        Ok(())
    }

    /// The track of a device queue, named as rocprofv3 names them.
    fn queue_track(&mut self, trace: &mut Trace, rank: RankId, device: i64, queue: i64) -> TrackId {
        let track = trace.track_for(
            &mut self.index,
            rank,
            TrackKind::DeviceQueue { device, queue },
        );
        if let Some(t) = trace.tracks.get_mut(track.0 as usize) {
            if t.name.is_none() {
                t.name = Some(if queue == COPY_QUEUE {
                    "memory copies".to_owned()
                } else {
                    format!("queue {queue}")
                });
            }
        }
        track
    }
}

/// Queue handles are small numbers in practice; a handle beyond `i64` keeps its bits.
fn queue_number(handle: u64) -> i64 {
    handle as i64
}

/// The device index given to records whose agent the file does not list (kept apart from the
/// listed GPUs, counted in the notes).
fn agent_fallback_index(handle: u64) -> i64 {
    -1 - (handle % (1 << 20)) as i64
}

fn nonzero(id: u64) -> Option<u64> {
    (id != 0).then_some(id)
}

/// A kernel's name as shown: the formatted (demangled, no `.kd`) name, else the demangled,
/// else the raw symbol.
fn kernel_display_name(symbol: &KernelSymbol) -> &str {
    [
        &symbol.formatted_kernel_name,
        &symbol.demangled_kernel_name,
        &symbol.kernel_name,
    ]
    .into_iter()
    .find(|n| !n.is_empty())
    .map(String::as_str)
    .unwrap_or("<unnamed kernel>")
}

/// A GPU agent as a device.
fn device(rank: RankId, index: i64, agent: &Agent) -> Device {
    let device_banks: Vec<&MemBank> = agent
        .mem_banks
        .iter()
        .filter(|b| DEVICE_HEAP_TYPES.contains(&b.heap_type))
        .collect();
    let memory: i64 = device_banks.iter().map(|b| b.size_in_bytes.max(0)).sum();
    let name = [&agent.product_name, &agent.model_name, &agent.name]
        .into_iter()
        .find(|n| !n.trim().is_empty())
        .map(|n| n.trim().to_owned());
    let mut extra = Map::new();
    extra.insert("vendor".into(), Value::from(agent.vendor_name.clone()));
    extra.insert("gfx".into(), Value::from(agent.name.clone()));
    extra.insert("model_name".into(), Value::from(agent.model_name.clone()));
    extra.insert("agent".into(), Value::from(agent.id.handle));
    extra.insert("node_id".into(), Value::from(agent.node_id));
    extra.insert("logical_node_id".into(), Value::from(agent.logical_node_id));
    extra.insert("simd_count".into(), Value::from(agent.simd_count));
    extra.insert("num_xcc".into(), Value::from(agent.num_xcc));
    extra.insert("wave_front_size".into(), Value::from(agent.wave_front_size));
    extra.insert(
        "gfx_target_version".into(),
        Value::from(agent.gfx_target_version),
    );
    extra.insert("pci_device_id".into(), Value::from(agent.device_id));
    if let Some(bank) = device_banks.first() {
        extra.insert("memory_clock_max_mhz".into(), Value::from(bank.mem_clk_max));
        extra.insert("memory_bus_width_bits".into(), Value::from(bank.width));
    }
    Device {
        rank: Some(rank),
        index,
        name,
        sm_count: (agent.cu_count > 0).then_some(agent.cu_count),
        total_memory_bytes: (memory > 0).then_some(memory),
        compute_major: None,
        compute_minor: None,
        clock_rate_khz: (agent.max_engine_clk_fcompute > 0)
            .then(|| agent.max_engine_clk_fcompute.saturating_mul(1000)),
        memory_bandwidth_bytes_per_s: None,
        extra: JsonObject::from_map(extra),
    }
}

#[cfg(test)]
mod tests;
