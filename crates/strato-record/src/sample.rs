//! CPU sampling with native stacks for a live recording (issue 19, item 3): `strato record
//! --sample[=HZ]`, written as `DIR/<pid>-samples.strato` files (one per process of the tree)
//! beside the program's own recording.
//!
//! This module owns the native half of a sample. Like [`crate::os`], it runs in the launcher,
//! not in the recorded program, so a crash of the program loses nothing already flushed.
//!
//! What is opened, per online CPU: the software event `cpu-clock`, sampled at
//! [`SampleOptions::frequency_hz`] (default [`DEFAULT_FREQUENCY_HZ`]), on the root process and
//! inherited by every task it creates; user mode only. Each sample carries the thread, the
//! `CLOCK_MONOTONIC` time (the recorder's own clock: no alignment error) and the user call
//! chain the kernel walks by frame pointers (`PERF_SAMPLE_CALLCHAIN`).
//!
//! Why frame pointers and not DWARF unwinding: CPython 3.11 (`-O3`, no
//! `-fno-omit-frame-pointer`) and the OpenBLAS in numpy's wheel have no frame pointers, so no
//! user-space unwinder gets from a BLAS kernel through the interpreter reliably without copying
//! every sample's stack (tens of KiB a sample at every rate). The Python part of the stack
//! comes from the program's own recorder instead (`python_stack` instants, see
//! `docs/recording.md`), so only the native frames *below* the interpreter matter here: the
//! chain is kept from the sampled instruction up to and including the first frame in the
//! interpreter (a module named `python*` or `libpython*`), and cut where a return address falls
//! outside every executable mapping (a frame-pointer walk through code without frame pointers
//! ends there or earlier). The leaf frame — the function the CPU was in — is always exact.
//!
//! Symbols: addresses map to `(module, file offset)` through `/proc/<pid>/maps` (re-read when an
//! address is not found, at most every [`MAPS_REREAD_NS`]), then to the nearest symbol of the
//! module's ELF symbol table (`.symtab`, else `.dynsym`) through the `object` crate, while the
//! process is alive: files hold names, not addresses, and need nothing at import time.
//!
//! What is written, per process: one instant per sample on the sampled thread's own track
//! (Level `Os`, category [`CPU_SAMPLE_CATEGORY`]) whose *name* is the native stack folded
//! outermost first (`frame;frame;leaf`, each frame `symbol [module]`): names are interned per
//! file, so a repeated stack costs a few bytes. At the end, metadata [`SAMPLE_METADATA_KEY`]
//! (rate, samples, lost records, unresolved frames, and what the kernel throttled: `throttled`,
//! [`crate::Throttling::json`]), and in the root process's file
//! [`SAMPLE_COLLECTOR_METADATA_KEY`]: the collector thread's CPU time (it runs in the
//! launcher, outside the program's threads; calibration reports it).
//!
//! What sampling costs the program: each sample is a timer interrupt in the sampled thread,
//! with the kernel's frame-pointer walk of its user stack and the ring-buffer write, charged
//! to that thread's CPU time (about 12 µs a sample on this VM, where the timer exits to the
//! hypervisor). The sample instants count them exactly, per thread and in time, so
//! `strato record --sample --calibrate` fits and removes that cost
//! (`strato_analysis::recording::overhead`, type `cpu_sample`).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perf_event::data::Record as PerfRecord;
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag, Sampler};
use strato_trace::Level;

use crate::format::tag;
use crate::side_file::{CollectorThread, SideFile};

/// The metadata key of each process's sampling summary (`SAMPLE_METADATA_KEY`) and of the
/// collector's own cost, `{"cpu_ns":N,"samples":N}` (`SAMPLE_COLLECTOR_METADATA_KEY`, root
/// file only), defined by the model crate.
pub use strato_trace::metadata::{SAMPLE_COLLECTOR_METADATA_KEY, SAMPLE_METADATA_KEY};
pub use strato_trace::names::CPU_SAMPLE_CATEGORY;
/// The category of the Python-stack instants the program's recorder writes (`stratoscope`'s
/// stack sampler), joined with the native samples at analysis time.
pub use strato_trace::names::PYTHON_STACK_CATEGORY;
/// The default sampling rate: 99 Hz, prime against the kernel's tick so samples do not lock
/// step with periodic work, and cheap enough to leave on (docs/levels.md has the cost).
pub const DEFAULT_FREQUENCY_HZ: u64 = 99;
/// How often at most a process's `/proc/<pid>/maps` is re-read after an address was not found.
pub const MAPS_REREAD_NS: i64 = 50_000_000;
/// The symbol of an address no symbol of its module covers (a static function of a stripped
/// library).
pub const UNKNOWN_SYMBOL: &str = "??";
/// The frame separator in folded stacks.
pub const FRAME_SEPARATOR: char = ';';
/// The stack of a sample that has no frame at all (no call chain, nothing resolved).
pub const UNKNOWN_STACK: &str = "[unknown]";

/// One frame of a folded stack: `symbol [module]`, the module by its file name (no directory;
/// a pseudo-module already in brackets, like perf's `[kernel.kallsyms]`, keeps its name).
/// Every producer of `cpu_sample` instants (this recorder, the nsys and perf importers) labels
/// frames through this function, so one function reads the same in every profile.
pub fn frame_label(symbol: &str, module: &str) -> String {
    let bare = module.strip_prefix('[').and_then(|m| m.strip_suffix(']'));
    let symbol = symbol.replace(FRAME_SEPARATOR, ":");
    let name = bare.unwrap_or_else(|| {
        Path::new(module)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(module)
    });
    format!("{symbol} [{name}]")
}

/// The name of a `cpu_sample` instant: its frames folded outermost first, joined by
/// [`FRAME_SEPARATOR`], from frames given leaf first (the order call chains come in); a sample
/// without frames is [`UNKNOWN_STACK`].
pub fn fold_leaf_first<S: AsRef<str>>(leaf_first: &[S]) -> String {
    if leaf_first.is_empty() {
        return UNKNOWN_STACK.to_owned();
    }
    let mut out = String::new();
    for (i, frame) in leaf_first.iter().rev().enumerate() {
        if i > 0 {
            out.push(FRAME_SEPARATOR);
        }
        out.push_str(frame.as_ref());
    }
    out
}

/// How to sample.
#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// The profile directory.
    pub dir: PathBuf,
    /// The recorded program's pid (the root of the tree).
    pub root_pid: i32,
    /// Samples per second of CPU time per thread.
    pub frequency_hz: u64,
    /// A chunk per process file at least this often.
    pub flush_interval: Duration,
    /// The collection level written in each file's START record.
    pub level: u64,
}

impl SampleOptions {
    /// Defaults: [`DEFAULT_FREQUENCY_HZ`], a chunk every 100 ms, level 4.
    pub fn new(dir: PathBuf, root_pid: i32) -> SampleOptions {
        SampleOptions {
            dir,
            root_pid,
            frequency_hz: DEFAULT_FREQUENCY_HZ,
            flush_interval: Duration::from_millis(100),
            level: 4,
        }
    }
}

/// Why sampling cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error(
        "perf events are not permitted here ({source}); kernel.perf_event_paranoid is {paranoid}: sampling another process needs root, CAP_PERFMON, or `sysctl kernel.perf_event_paranoid=1` or lower (in a container, the runtime must allow perf_event_open too)"
    )]
    NotPermitted { paranoid: String, source: io::Error },
    #[error("sampling rate {0} Hz is above this kernel's limit (kernel.perf_event_max_sample_rate = {1})")]
    RateTooHigh(u64, String),
    #[error("perf_event_open for cpu-clock sampling failed: {0}")]
    Open(io::Error),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Counts of what a sampling run saw (for the launcher's one-line summary).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleSummary {
    pub processes: usize,
    pub threads: usize,
    pub samples: u64,
    /// Samples the kernel dropped because a ring buffer was full.
    pub lost: u64,
    /// Leaf addresses in no known mapping (JIT code, a process gone before its maps were read).
    pub unresolved: u64,
    /// Times the kernel throttled the sampling event, and the summed throttled time (no
    /// samples were taken then).
    pub throttled: u64,
    pub throttled_ns: i64,
    /// CPU time of the collecting thread (reading ring buffers, symbolising, writing).
    pub collector_cpu_ns: i64,
    pub files: Vec<PathBuf>,
}

/// A running sampler; [`SampleRecorder::stop`] ends it.
#[derive(Debug)]
pub struct SampleRecorder {
    collector: CollectorThread<SampleSummary>,
}

impl SampleRecorder {
    /// Opens the events (errors come back here, before anything is written) and starts the
    /// collecting thread.
    pub fn start(options: SampleOptions) -> Result<SampleRecorder, SampleError> {
        let samplers = open_samplers(options.root_pid, options.frequency_hz)?;
        std::fs::create_dir_all(&options.dir).map_err(|source| SampleError::Io {
            path: options.dir.clone(),
            source,
        })?;
        let mut collector = Collector::new(options, samplers);
        let collector = CollectorThread::spawn("strato-sample", move |stop| collector.run(stop))
            .map_err(|source| SampleError::Io {
                path: PathBuf::from("(thread)"),
                source,
            })?;
        Ok(SampleRecorder { collector })
    }

    /// Stops sampling, writes what is left and the STOP records; returns the counts.
    pub fn stop(self) -> SampleSummary {
        self.collector.stop()
    }
}

fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

fn open_samplers(root: i32, hz: u64) -> Result<Vec<Sampler>, SampleError> {
    let max_rate = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    if hz == 0 || max_rate.parse::<u64>().is_ok_and(|m| hz > m) {
        return Err(SampleError::RateTooHigh(hz, max_rate));
    }
    let mut samplers = Vec::new();
    for cpu in crate::os::online_cpus() {
        let mut b = Builder::new(Software::CPU_CLOCK);
        b.observe_pid(root)
            .inherit(true)
            .one_cpu(cpu)
            .sample_frequency(hz)
            .sample(SampleFlag::IP | SampleFlag::TID | SampleFlag::TIME | SampleFlag::CALLCHAIN)
            .exclude_callchain_kernel(true)
            .clockid(Clock::MONOTONIC)
            .wakeup_events(64);
        let err = |e: io::Error| match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => SampleError::NotPermitted {
                paranoid: paranoid(),
                source: e,
            },
            _ => SampleError::Open(e),
        };
        let counter = crate::os::build_counting_lost(&mut b).map_err(err)?;
        let sampler = counter.sampled(1 << 20).map_err(err)?;
        samplers.push(sampler);
    }
    for s in &mut samplers {
        s.enable().map_err(SampleError::Open)?;
    }
    Ok(samplers)
}

/// One executable mapping of a process.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    module: u32,
}

#[derive(Debug, Default)]
struct Maps {
    mappings: Vec<Mapping>,
    read_at: i64,
}

/// One ELF file's symbols (by virtual address) and its loadable segments: how a code address,
/// as a file offset in its module, becomes a symbol. Shared with the `perf.data` importer
/// (`strato_io::perf`), which symbolizes call chains the same way.
#[derive(Debug)]
pub struct Module {
    /// The file name (no directory), shown in frames.
    name: String,
    interpreter: bool,
    /// `(address, size, name)` sorted by address; empty when the file could not be read.
    symbols: Vec<(u64, u64, String)>,
    /// `(file offset, file size, virtual address)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl Module {
    /// Reads `path`'s function symbols (`.symtab`, else `.dynsym`; those of its separate debug
    /// file by build id when that has more); a file that cannot be read or parsed gives a
    /// module without symbols (every offset is [`UNKNOWN_SYMBOL`]).
    pub fn load(path: &str) -> Module {
        let name = Path::new(path)
            .file_name()
            .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
        let interpreter = name.starts_with("python") || name.starts_with("libpython");
        let mut module = Module {
            name,
            interpreter,
            symbols: Vec::new(),
            segments: Vec::new(),
        };
        let Ok(bytes) = std::fs::read(path) else {
            return module;
        };
        use object::{Object, ObjectSegment};
        let Ok(file) = object::File::parse(&*bytes) else {
            return module;
        };
        for seg in file.segments() {
            let (offset, size) = seg.file_range();
            module.segments.push((offset, size, seg.address()));
        }
        module.symbols = code_symbols(&file);
        // Separate debug info (`/usr/lib/debug/.build-id/..`, Debian's `-dbg`/`-dbgsym`
        // packages) names the static functions a stripped library leaves out.
        if let Some(debug) = debug_file(&file) {
            if let Ok(bytes) = std::fs::read(&debug) {
                if let Ok(debug) = object::File::parse(&*bytes) {
                    let symbols = code_symbols(&debug);
                    if symbols.len() > module.symbols.len() {
                        module.symbols = symbols;
                    }
                }
            }
        }
        module
    }

    /// The symbol at file offset `offset`, or [`UNKNOWN_SYMBOL`] (one frame per module, so
    /// that the stacks of a stripped library do not split by address).
    pub fn symbol(&self, offset: u64) -> String {
        let vaddr = self
            .segments
            .iter()
            .find(|&&(o, s, _)| offset >= o && offset < o + s)
            .map(|&(o, _, v)| offset - o + v);
        let found = vaddr.and_then(|a| {
            let i = self.symbols.partition_point(|s| s.0 <= a);
            let s = self.symbols.get(i.checked_sub(1)?)?;
            (s.1 == 0 || a - s.0 < s.1).then_some(s.2.as_str())
        });
        match found {
            Some(name) => demangle(name),
            None => UNKNOWN_SYMBOL.to_owned(),
        }
    }
}

/// The function symbols of `file` (`.symtab`, else `.dynsym`) as `(address, size, name)` by
/// address, one per address. Where several names share an address (aliases such as `execve`
/// and `__GI___execve`), the one `perf` itself shows is kept, by perf's own preference: a sized
/// symbol, then a non-weak one, then a global one, then the fewest leading underscores, then
/// the longest name; so frames read the same here and in `perf report`/`perf script`.
fn code_symbols(file: &object::File<'_>) -> Vec<(u64, u64, String)> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let symbols = if file.symbols().next().is_some() {
        file.symbols()
    } else {
        file.dynamic_symbols()
    };
    let mut ranked: Vec<_> = symbols
        .filter(|s| s.is_definition() && s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            let underscores = name.bytes().take_while(|&b| b == b'_').count();
            let preference = (
                s.size() == 0,
                s.is_weak(),
                !s.is_global(),
                underscores,
                std::cmp::Reverse(name.len()),
            );
            Some((s.address(), preference, s.size(), name.to_owned()))
        })
        .collect();
    ranked.sort_by_key(|a| (a.0, a.1));
    ranked.dedup_by_key(|s| s.0);
    ranked
        .into_iter()
        .map(|(address, _, size, name)| (address, size, name))
        .collect()
}

/// The separate debug file of `file` by its GNU build id, where one is installed.
fn debug_file(file: &object::File<'_>) -> Option<PathBuf> {
    use object::Object;
    let id = file.build_id().ok()??;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    if hex.len() < 3 {
        return None;
    }
    let path = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    path.exists().then_some(path)
}

fn demangle(name: &str) -> String {
    let mut text = format!("{:#}", rustc_demangle::demangle(name));
    if text.contains(FRAME_SEPARATOR) {
        text = text.replace(FRAME_SEPARATOR, ":");
    }
    text
}

fn read_maps(pid: i32, modules: &mut ModuleTable) -> Option<Vec<Mapping>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mut out = Vec::new();
    for line in text.lines() {
        // `start-end perms offset dev inode path`
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = parts.nth(2).unwrap_or("");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            offset,
            module: modules.id(path),
        });
    }
    out.sort_by_key(|m| m.start);
    Some(out)
}

#[derive(Debug, Default)]
struct ModuleTable {
    paths: HashMap<String, u32>,
    modules: Vec<Option<Module>>,
    paths_by_id: Vec<String>,
}

impl ModuleTable {
    fn id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.paths.get(path) {
            return id;
        }
        let id = self.modules.len() as u32;
        self.modules.push(None);
        self.paths_by_id.push(path.to_owned());
        self.paths.insert(path.to_owned(), id);
        id
    }

    /// The module, loaded on first use (symbols of files never sampled are never read).
    fn get(&mut self, id: u32) -> &Module {
        let slot = &mut self.modules[id as usize];
        slot.get_or_insert_with(|| Module::load(&self.paths_by_id[id as usize]))
    }
}

/// One `<pid>-samples.strato` file: the side file and the samples not yet written.
#[derive(Debug)]
struct SampleFile {
    side: SideFile,
    /// `(track, ts, name)` not yet written.
    events: Vec<(u32, i64, u32)>,
    category: u32,
    samples: u64,
    unresolved: u64,
}

impl SampleFile {
    fn open(dir: &Path, pid: i32, start_ts: i64, level: u64) -> io::Result<SampleFile> {
        let path = SideFile::path_in(dir, pid, "samples");
        let ppid = crate::os::ppid_of(pid);
        let mut side = SideFile::create(path, pid, ppid, "samples", start_ts, level)?;
        let category = side.string(CPU_SAMPLE_CATEGORY);
        Ok(SampleFile {
            side,
            events: Vec::new(),
            category,
            samples: 0,
            unresolved: 0,
        })
    }

    /// Appends one chunk with everything new (`stop`: also the metadata, `(key, JSON)`, and
    /// the STOP record).
    fn flush(&mut self, stop: Option<(i64, &[(&str, String)])>) -> io::Result<()> {
        let mut events = std::mem::take(&mut self.events);
        events.sort_by_key(|e| e.1);
        let meta: Vec<(u32, String)> = stop
            .map(|(_, meta)| meta)
            .into_iter()
            .flatten()
            .map(|(key, json)| (self.side.string(key), json.clone()))
            .collect();
        let mut enc = self.side.begin_chunk();
        for (track, ts, name) in events {
            enc.u8(tag::INSTANT);
            enc.uv(u64::from(track));
            enc.ts(ts);
            enc.u8(Level::Os.code());
            enc.uv(u64::from(self.category));
            enc.uv(u64::from(name));
            enc.u8(0);
        }
        self.side.end_chunk(enc, &meta, stop.map(|(ts, _)| ts))
    }
}

/// One sample as read: pid, tid, time, instruction pointer, call chain.
type RawSample = (i32, i32, i64, Option<u64>, Option<Vec<u64>>);

/// `PERF_CONTEXT_MAX` as u64: call-chain entries at or above it are context markers.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

struct Collector {
    options: SampleOptions,
    samplers: Vec<Sampler>,
    modules: ModuleTable,
    maps: HashMap<i32, Maps>,
    files: HashMap<i32, SampleFile>,
    threads: HashMap<i32, ()>,
    /// `(module, offset)` -> frame label.
    labels: HashMap<(u32, u64), String>,
    summary: SampleSummary,
    throttling: crate::Throttling,
    start_ts: i64,
    failed: Vec<PathBuf>,
}

impl Collector {
    fn new(options: SampleOptions, samplers: Vec<Sampler>) -> Collector {
        Collector {
            options,
            samplers,
            modules: ModuleTable::default(),
            maps: HashMap::new(),
            files: HashMap::new(),
            threads: HashMap::new(),
            labels: HashMap::new(),
            summary: SampleSummary::default(),
            throttling: crate::Throttling::default(),
            start_ts: crate::now_ns(),
            failed: Vec::new(),
        }
    }

    fn run(&mut self, stop: &AtomicBool) -> SampleSummary {
        // The root's maps now, before it can exit.
        let root = self.options.root_pid;
        self.refresh_maps(root, i64::MIN);
        let mut last_flush = crate::now_ns();
        loop {
            let stopping = stop.load(Ordering::Acquire);
            self.drain();
            let now = crate::now_ns();
            if stopping {
                self.finish(now);
                break;
            }
            if now - last_flush >= self.options.flush_interval.as_nanos() as i64 {
                for f in self.files.values_mut() {
                    if f.flush(None).is_err() {
                        self.failed.push(f.side.path.clone());
                    }
                }
                last_flush = now;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut summary = std::mem::take(&mut self.summary);
        summary.processes = self.files.len();
        summary.threads = self.threads.len();
        summary.files = SideFile::sorted_paths(self.files.values().map(|f| &f.side));
        summary.collector_cpu_ns = crate::read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
        summary.throttled = self.throttling.count;
        summary.throttled_ns = self.throttling.throttled_ns;
        summary
    }

    fn finish(&mut self, now: i64) {
        let hz = self.options.frequency_hz;
        // A drop near the end has no LOST record: the kernel's own count, where it keeps one.
        self.summary.lost = self
            .summary
            .lost
            .max(crate::os::kernel_lost(self.samplers.iter_mut()));
        let lost = self.summary.lost;
        self.throttling.finish(now);
        let throttled: serde_json::Value =
            serde_json::from_str(&self.throttling.json()).unwrap_or_default();
        // The collector's own cost so far (what is left to write is a small part of it).
        let collector = serde_json::json!({
            "cpu_ns": crate::read_clock(libc::CLOCK_THREAD_CPUTIME_ID),
            "samples": self.summary.samples,
        })
        .to_string();
        let root = self.options.root_pid;
        for f in self.files.values_mut() {
            let json = serde_json::json!({
                "frequency_hz": hz,
                "samples": f.samples,
                "unresolved_leaf": f.unresolved,
                "lost_all_processes": lost,
                "throttled_all_processes": throttled,
                "unwinding": "frame pointers (kernel callchain), cut at the interpreter",
            })
            .to_string();
            let mut meta = vec![(SAMPLE_METADATA_KEY, json)];
            if f.side.pid == root {
                meta.push((SAMPLE_COLLECTOR_METADATA_KEY, collector.clone()));
            }
            if f.flush(Some((now, &meta))).is_err() {
                self.failed.push(f.side.path.clone());
            }
        }
    }

    fn refresh_maps(&mut self, pid: i32, now: i64) -> bool {
        let entry = self.maps.entry(pid).or_default();
        if now != i64::MIN && now - entry.read_at < MAPS_REREAD_NS {
            return false;
        }
        entry.read_at = if now == i64::MIN {
            crate::now_ns()
        } else {
            now
        };
        match read_maps(pid, &mut self.modules) {
            Some(m) => {
                if let Some(e) = self.maps.get_mut(&pid) {
                    e.mappings = m;
                }
                true
            }
            None => false,
        }
    }

    fn lookup(&self, pid: i32, addr: u64) -> Option<(u32, u64)> {
        let maps = &self.maps.get(&pid)?.mappings;
        let i = maps.partition_point(|m| m.start <= addr);
        let m = maps.get(i.checked_sub(1)?)?;
        (addr < m.end).then(|| (m.module, addr - m.start + m.offset))
    }

    fn resolve(&mut self, pid: i32, addr: u64) -> Option<(u32, u64)> {
        if let Some(hit) = self.lookup(pid, addr) {
            return Some(hit);
        }
        // A library loaded after the last read (numpy's extension modules, BLAS).
        if self.refresh_maps(pid, crate::now_ns()) {
            return self.lookup(pid, addr);
        }
        None
    }

    fn label(&mut self, module: u32, offset: u64) -> (&str, bool) {
        let interpreter = self.modules.get(module).interpreter;
        if !self.labels.contains_key(&(module, offset)) {
            let m = self.modules.get(module);
            let text = frame_label(&m.symbol(offset), &m.name);
            self.labels.insert((module, offset), text);
        }
        (&self.labels[&(module, offset)], interpreter)
    }

    /// The folded native stack of one sample (outermost first), or None when nothing resolves.
    fn fold(&mut self, pid: i32, ip: Option<u64>, chain: Option<&[u64]>) -> (String, bool) {
        let user: Vec<u64> = match chain {
            Some(c) => c
                .iter()
                .copied()
                .filter(|&a| a < PERF_CONTEXT_MAX)
                .collect(),
            None => ip.into_iter().collect(),
        };
        let mut frames: Vec<String> = Vec::new();
        let mut leaf_resolved = true;
        for (i, &addr) in user.iter().enumerate() {
            // A return address points after the call: look up the call itself.
            let at = if i == 0 { addr } else { addr.saturating_sub(1) };
            let Some((module, offset)) = self.resolve(pid, at) else {
                if i == 0 {
                    frames.push(UNKNOWN_STACK.to_owned());
                    leaf_resolved = false;
                }
                break;
            };
            let (label, interpreter) = self.label(module, offset);
            frames.push(label.to_owned());
            if interpreter {
                break;
            }
        }
        if frames.is_empty() {
            frames.push(UNKNOWN_STACK.to_owned());
            leaf_resolved = false;
        }
        frames.reverse();
        (frames.join(";"), leaf_resolved)
    }

    fn drain(&mut self) {
        let mut raw: Vec<RawSample> = Vec::new();
        for sampler in &mut self.samplers {
            while let Some(record) = sampler.next_record() {
                let Ok(parsed) = record.parse_record() else {
                    continue;
                };
                match parsed {
                    PerfRecord::Sample(s) => {
                        let (Some(ts), Some(tid), Some(pid)) = (s.time(), s.tid(), s.pid()) else {
                            continue;
                        };
                        raw.push((
                            pid as i32,
                            tid as i32,
                            ts as i64,
                            s.ip(),
                            s.callchain().map(<[u64]>::to_vec),
                        ));
                    }
                    PerfRecord::Lost(l) => self.summary.lost += l.lost,
                    PerfRecord::Throttle(t) => self.throttling.throttle(t.id, t.time as i64),
                    PerfRecord::Unthrottle(t) => self.throttling.unthrottle(t.id, t.time as i64),
                    _ => {}
                }
            }
        }
        for (pid, tid, ts, ip, chain) in raw {
            if !self.files.contains_key(&pid) {
                match SampleFile::open(&self.options.dir, pid, self.start_ts, self.options.level) {
                    Ok(f) => {
                        self.files.insert(pid, f);
                    }
                    Err(_) => {
                        self.failed
                            .push(self.options.dir.join(format!("{pid}-samples.strato")));
                        continue;
                    }
                }
                if !self.maps.contains_key(&pid) {
                    self.refresh_maps(pid, i64::MIN);
                }
            }
            let (stack, resolved) = self.fold(pid, ip, chain.as_deref());
            self.threads.insert(tid, ());
            self.summary.samples += 1;
            let Some(f) = self.files.get_mut(&pid) else {
                continue;
            };
            let name = f.side.string(&stack);
            let track = f.side.track(tid);
            f.events.push((track, ts, name));
            f.samples += 1;
            if !resolved {
                f.unresolved += 1;
                self.summary.unresolved += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_symbols_resolve_through_maps() {
        // This test binary's own function: its address maps to its own name.
        let mut modules = ModuleTable::default();
        let maps = read_maps(std::process::id() as i32, &mut modules).unwrap();
        let addr = own_symbols_resolve_through_maps as *const () as usize as u64;
        let m = maps
            .iter()
            .find(|m| m.start <= addr && addr < m.end)
            .expect("the test's own code is mapped");
        let module = modules.get(m.module);
        let name = module.symbol(addr - m.start + m.offset);
        assert!(
            name.contains("own_symbols_resolve_through_maps"),
            "resolved to {name}"
        );
        assert!(!module.interpreter);
    }

    #[test]
    fn interpreter_modules_by_name() {
        assert!(Module::load("/nonexistent/python3.11").interpreter);
        assert!(Module::load("/nonexistent/libpython3.11.so.1.0").interpreter);
        assert!(!Module::load("/nonexistent/libopenblas.so").interpreter);
        // An unreadable file still names its frames by offset.
        assert_eq!(
            Module::load("/nonexistent/x.so").symbol(0x10),
            UNKNOWN_SYMBOL
        );
    }
}
