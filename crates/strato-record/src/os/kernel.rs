//! The kernel side of the OS level: the tracepoints' formats read from tracefs, the perf
//! events opened per CPU ([`Sources`]) and why opening fails, and the small `/proc` and
//! `/sys` reads (online CPUs, a process's parent) the CPU sampler shares.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use perf_event::events::{Software, Tracepoint};
use perf_event::{Builder, Clock, Counter, ReadFormat, SampleFlag, Sampler};

use super::OsError;

/// A tracepoint's id and the offsets of its fields in the raw sample.
pub(super) struct Format {
    pub(super) id: u64,
    fields: HashMap<String, (usize, usize)>,
}

impl Format {
    pub(super) fn field(&self, raw: &[u8], name: &str) -> Option<i64> {
        let &(offset, size) = self.fields.get(name)?;
        let bytes = raw.get(offset..offset + size)?;
        Some(match size {
            8 => i64::from_ne_bytes(bytes.try_into().ok()?),
            4 => i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)),
            2 => i64::from(i16::from_ne_bytes(bytes.try_into().ok()?)),
            _ => return None,
        })
    }
}

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

fn tracefs_root() -> Option<&'static str> {
    let found = || {
        TRACEFS
            .into_iter()
            .find(|r| Path::new(r).join("events").is_dir())
    };
    if let Some(r) = found() {
        return Some(r);
    }
    // Not mounted (perf mounts it on demand too): mount it, as root may.
    let target = c"/sys/kernel/tracing";
    let fstype = c"tracefs";
    // SAFETY: plain mount(2) with NUL-terminated constant strings and no data.
    let _ = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    found()
}

fn tracepoint_format(name: &str) -> Result<Format, OsError> {
    let err = |detail: String| OsError::Tracepoint {
        name: name.to_owned(),
        detail,
    };
    let Some(root) = tracefs_root() else {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 && TRACEFS.iter().any(|r| Path::new(r).exists()) {
            // There but not ours to read: a permission matter, not a missing mount.
            return Err(not_permitted(io::Error::from(
                io::ErrorKind::PermissionDenied,
            )));
        }
        return Err(err("no tracefs found".into()));
    };
    let dir = Path::new(root).join("events").join(name);
    let id = std::fs::read_to_string(dir.join("id"))
        .map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => not_permitted(e),
            _ => err(format!("{}: {e}", dir.join("id").display())),
        })?
        .trim()
        .parse()
        .map_err(|e| err(format!("{}: {e}", dir.join("id").display())))?;
    let text = std::fs::read_to_string(dir.join("format"))
        .map_err(|e| err(format!("{}: {e}", dir.join("format").display())))?;
    let mut fields = HashMap::new();
    for line in text.lines() {
        // `field:pid_t prev_pid;	offset:24;	size:4;	signed:1;`
        let mut name = None;
        let (mut offset, mut size) = (None, None);
        for part in line.trim().split(';') {
            let part = part.trim();
            if let Some(decl) = part.strip_prefix("field:") {
                let last = decl.split_whitespace().last().unwrap_or("");
                name = Some(last.split('[').next().unwrap_or(last).to_owned());
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(n), Some(o), Some(s)) = (name, offset, size) {
            fields.insert(n, (o, s));
        }
    }
    Ok(Format { id, fields })
}

/// Builds a sampled event that also keeps the kernel's own count of the records it dropped
/// (PERF_FORMAT_LOST, Linux 6.0+; an older kernel builds it without). A ring buffer's LOST
/// record is written only when the kernel next writes to that buffer, so a drop near the end
/// of a run has none; [`kernel_lost`] reads the count instead. Shared with the CPU sampler.
pub(crate) fn build_counting_lost(b: &mut Builder<'_>) -> io::Result<Counter> {
    b.read_format(ReadFormat::LOST);
    match b.build() {
        Ok(c) => Ok(c),
        Err(_) => {
            b.read_format(ReadFormat::empty());
            b.build()
        }
    }
}

/// The records the kernel dropped in all of `samplers`, by its own count (0 where it keeps
/// none: [`build_counting_lost`]).
pub(crate) fn kernel_lost<'a>(samplers: impl Iterator<Item = &'a mut Sampler>) -> u64 {
    samplers.filter_map(|s| s.read_full().ok()?.lost()).sum()
}

pub(crate) fn online_cpus() -> Vec<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.split('-').filter_map(|x| x.parse::<usize>().ok());
        if let Some(a) = ends.next() {
            let b = ends.next().unwrap_or(a);
            cpus.extend(a..=b);
        }
    }
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus.extend(0..n);
    }
    cpus
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Switch,
    Wakeup,
    Migrate,
    NewTask,
    SysEnter,
    SysExit,
}

/// Every open event.
pub(super) struct Sources {
    pub(super) samplers: Vec<(Kind, Sampler)>,
    pub(super) formats: HashMap<u8, Format>,
    pub(super) faults: Option<Counter>,
    pub(super) major_faults: Option<Counter>,
}

pub(super) fn kind_code(k: Kind) -> u8 {
    k as u8
}

impl Sources {
    pub(super) fn open(root: i32) -> Result<Sources, OsError> {
        let cpus = online_cpus();
        let mut samplers = Vec::new();
        let mut formats = HashMap::new();
        let system_wide = [
            (Kind::Switch, "sched/sched_switch", 4 << 20),
            (Kind::Wakeup, "sched/sched_wakeup", 1 << 20),
            (Kind::Wakeup, "sched/sched_wakeup_new", 256 << 10),
            (Kind::Migrate, "sched/sched_migrate_task", 512 << 10),
            (Kind::NewTask, "task/task_newtask", 256 << 10),
        ];
        let per_task = [
            (Kind::SysEnter, "raw_syscalls/sys_enter", 4 << 20),
            (Kind::SysExit, "raw_syscalls/sys_exit", 4 << 20),
        ];
        for (tree, list) in [(false, &system_wide[..]), (true, &per_task[..])] {
            for &(kind, name, map_len) in list {
                let format = tracepoint_format(name)?;
                let id = format.id;
                // sched_wakeup and sched_wakeup_new share one layout.
                formats.entry(kind_code(kind)).or_insert(format);
                for &cpu in &cpus {
                    let mut b = Builder::new(Tracepoint::with_id(id));
                    if tree {
                        b.observe_pid(root).inherit(true);
                    } else {
                        b.any_pid();
                    }
                    b.one_cpu(cpu)
                        .include_kernel()
                        .sample_period(1)
                        .sample(
                            SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::RAW,
                        )
                        .clockid(Clock::MONOTONIC)
                        .wakeup_events(1 << 12);
                    let counter = build_counting_lost(&mut b).map_err(|e| open_error(e, name))?;
                    let sampler = counter.sampled(map_len).map_err(|e| open_error(e, name))?;
                    samplers.push((kind, sampler));
                }
            }
        }
        let fault_counter = |event: Software| {
            let mut b = Builder::new(event);
            b.observe_pid(root).any_cpu().inherit(true).include_kernel();
            b.build().ok()
        };
        let faults = fault_counter(Software::PAGE_FAULTS);
        let major_faults = fault_counter(Software::PAGE_FAULTS_MAJ);
        for (_, s) in &mut samplers {
            s.enable().map_err(|e| open_error(e, "enable"))?;
        }
        let mut sources = Sources {
            samplers,
            formats,
            faults,
            major_faults,
        };
        for c in [&mut sources.faults, &mut sources.major_faults]
            .into_iter()
            .flatten()
        {
            let _ = c.enable();
        }
        Ok(sources)
    }
}

fn not_permitted(source: io::Error) -> OsError {
    OsError::NotPermitted {
        paranoid: std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into()),
        source,
    }
}

fn open_error(e: io::Error, what: &str) -> OsError {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => not_permitted(e),
        _ => OsError::Open {
            what: what.to_owned(),
            source: e,
        },
    }
}

pub(crate) fn ppid_of(pid: i32) -> i32 {
    // `/proc/PID/stat`: `pid (comm) state ppid ...`; comm may hold spaces or parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
