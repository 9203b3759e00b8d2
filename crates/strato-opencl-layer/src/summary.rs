//! Summaries of a decoded `*-opencl.strato` recording, for tests, examples and `strato
//! overhead`: per-kernel statistics ranked by total time (Zins table 4.1), copies by direction
//! with bytes and bandwidth, API calls by name, and the layer's end-of-run clock/causality
//! report. Pure: a [`strato_record::Recording`] in, tables out.

use std::collections::HashMap;
use std::path::Path;

use strato_record::{decode, Event, Level, Recording, TrackDef};

/// Why a recording could not be summarised.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Decode {
        path: String,
        source: strato_record::DecodeError,
    },
}

/// Duration statistics of one kernel (Zins table 4.1 columns).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRow {
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
    pub mean_ns: f64,
    pub std_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
}

/// Device copies of one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyRow {
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    /// Sum of device durations.
    pub device_ns: i64,
    /// Sum of the enqueue calls' host durations.
    pub api_ns: i64,
    /// Bytes / device time.
    pub bandwidth_gb_s: f64,
    /// Mean of (device start - enqueue call begin): what each copy waited before it ran.
    pub mean_launch_ns: f64,
}

/// API calls of one name.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRow {
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
}

/// Independent checks of the device timeline against the API calls, from the spans alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checks {
    /// Device spans.
    pub device_spans: u64,
    /// Device spans whose correlation id matches an API span.
    pub matched: u64,
    /// Device spans starting before their enqueue call began.
    pub causality_violations: u64,
    /// Smallest (device start - enqueue call begin).
    pub min_launch_ns: Option<i64>,
    /// On each queue, in enqueue (correlation) order: commands starting before the previous
    /// one ended.
    pub order_violations: u64,
}

/// The summary of one recording.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub kernels: Vec<KernelRow>,
    pub copies: Vec<CopyRow>,
    pub api: Vec<ApiRow>,
    pub checks: Checks,
    /// "memory allocated" counter: (peak, last) per device.
    pub memory: Vec<(i64, f64, f64)>,
    /// The CLOCK record: (offset_ns, drift_ppb, error_ns).
    pub clock: Option<(i64, f64, Option<i64>)>,
    /// The layer's `opencl_clock` metadata (JSON).
    pub clock_report: Option<serde_json::Value>,
    /// Wall time covered by the recording's events.
    pub span_ns: i64,
}

struct Sp<'a> {
    track: u32,
    start: i64,
    end: i64,
    level: u8,
    name: &'a str,
    corr: Option<u64>,
    args: Option<&'a str>,
}

fn arg_str(args: Option<&str>, key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(args?).ok()?;
    v.get(key).map(|x| match x {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn arg_u64(args: Option<&str>, key: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(args?).ok()?;
    v.get(key)?.as_u64()
}

/// Reads and summarises a `*.strato` file.
pub fn summarize_file(path: &Path) -> Result<Summary, SummaryError> {
    let bytes = std::fs::read(path).map_err(|source| SummaryError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let rec = decode(&bytes).map_err(|source| SummaryError::Decode {
        path: path.display().to_string(),
        source,
    })?;
    Ok(summarize(&rec))
}

/// Summarises a decoded recording.
pub fn summarize(rec: &Recording) -> Summary {
    let spans: Vec<Sp<'_>> = rec
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Span {
                track,
                start,
                end,
                level,
                name,
                correlation,
                args,
                ..
            } => Some(Sp {
                track: *track,
                start: *start,
                end: *end,
                level: *level,
                name: rec.str(*name),
                corr: *correlation,
                args: args.as_deref(),
            }),
            _ => None,
        })
        .collect();
    let api_code = Level::AcceleratorApi.code();
    let is_device = |l: u8| Level::from_code(l).is_some_and(Level::is_device_op);
    let api_by_corr: HashMap<u64, (i64, i64)> = spans
        .iter()
        .filter(|s| s.level == api_code)
        .filter_map(|s| s.corr.map(|c| (c, (s.start, s.end))))
        .collect();
    let mut s = Summary::default();
    // Kernels.
    let mut kernels: HashMap<&str, Vec<i64>> = HashMap::new();
    let mut copies: HashMap<String, CopyRow> = HashMap::new();
    let mut queues: HashMap<u32, Vec<(u64, i64, i64)>> = HashMap::new();
    for sp in spans.iter().filter(|sp| is_device(sp.level)) {
        s.checks.device_spans += 1;
        let api = sp.corr.and_then(|c| api_by_corr.get(&c));
        if let Some(&(b, _)) = api {
            s.checks.matched += 1;
            if sp.start < b {
                s.checks.causality_violations += 1;
            }
            let d = sp.start - b;
            s.checks.min_launch_ns = Some(s.checks.min_launch_ns.map_or(d, |m| m.min(d)));
        }
        if let Some(c) = sp.corr {
            queues
                .entry(sp.track)
                .or_default()
                .push((c, sp.start, sp.end));
        }
        if sp.level == Level::DeviceKernel.code() {
            kernels.entry(sp.name).or_default().push(sp.end - sp.start);
        } else if sp.level == Level::DeviceCopy.code() {
            let dir = arg_str(sp.args, "direction").unwrap_or_else(|| "?".into());
            let row = copies.entry(dir.clone()).or_insert_with(|| CopyRow {
                direction: dir,
                count: 0,
                bytes: 0,
                device_ns: 0,
                api_ns: 0,
                bandwidth_gb_s: 0.0,
                mean_launch_ns: 0.0,
            });
            row.count += 1;
            row.bytes += arg_u64(sp.args, "bytes").unwrap_or(0);
            row.device_ns += sp.end - sp.start;
            if let Some(&(b, e)) = api {
                row.api_ns += e - b;
                row.mean_launch_ns += (sp.start - b) as f64;
            }
        }
    }
    for q in queues.values_mut() {
        q.sort_unstable();
        for w in q.windows(2) {
            if w[1].1 < w[0].2 {
                s.checks.order_violations += 1;
            }
        }
    }
    s.kernels = kernels
        .into_iter()
        .map(|(name, d)| {
            let n = d.len() as f64;
            let total: i64 = d.iter().sum();
            let mean = total as f64 / n;
            let var = d.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
            KernelRow {
                name: name.to_owned(),
                count: d.len() as u64,
                total_ns: total,
                mean_ns: mean,
                std_ns: var.sqrt(),
                min_ns: d.iter().copied().min().unwrap_or(0),
                max_ns: d.iter().copied().max().unwrap_or(0),
            }
        })
        .collect();
    s.kernels
        .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    s.copies = copies
        .into_values()
        .map(|mut r| {
            if r.device_ns > 0 {
                r.bandwidth_gb_s = r.bytes as f64 / r.device_ns as f64;
            }
            if r.count > 0 {
                r.mean_launch_ns /= r.count as f64;
            }
            r
        })
        .collect();
    s.copies.sort_by(|a, b| a.direction.cmp(&b.direction));
    let mut api: HashMap<&str, ApiRow> = HashMap::new();
    for sp in spans.iter().filter(|sp| sp.level == api_code) {
        let row = api.entry(sp.name).or_insert_with(|| ApiRow {
            name: sp.name.to_owned(),
            count: 0,
            total_ns: 0,
        });
        row.count += 1;
        row.total_ns += sp.end - sp.start;
    }
    s.api = api.into_values().collect();
    s.api
        .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    // Memory counters.
    let mut mem: HashMap<u32, (i64, f64, f64)> = HashMap::new();
    for e in &rec.events {
        if let Event::Counter { track, value, .. } = e {
            if let Some(Some(TrackDef::Counter { name, device, .. })) =
                rec.tracks.get(*track as usize)
            {
                if rec.str(*name) == "memory allocated" {
                    let m = mem.entry(*track).or_insert((*device, f64::MIN, 0.0));
                    m.1 = m.1.max(*value);
                    m.2 = *value;
                }
            }
        }
    }
    s.memory = mem.into_values().collect();
    s.memory.sort_by_key(|m| m.0);
    s.clock = rec
        .clocks
        .last()
        .map(|c| (c.offset_ns, c.drift_ppb, c.error_ns));
    s.clock_report = rec
        .metadata
        .iter()
        .rev()
        .find(|(k, _)| rec.str(*k) == "opencl_clock")
        .and_then(|(_, v)| serde_json::from_str(v).ok());
    let lo = spans.iter().map(|s| s.start).min().unwrap_or(0);
    let hi = spans.iter().map(|s| s.end).max().unwrap_or(0);
    s.span_ns = hi - lo;
    s
}

impl Summary {
    /// The API row of `name`.
    pub fn api_count(&self, name: &str) -> u64 {
        self.api
            .iter()
            .find(|r| r.name == name)
            .map_or(0, |r| r.count)
    }

    /// A plain-text report.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(o, "kernels (ranked by total device time):");
        let _ = writeln!(
            o,
            "  {:>4}  {:<28} {:>7} {:>12} {:>12} {:>12}",
            "rank", "kernel", "count", "total ms", "mean us", "std us"
        );
        for (i, k) in self.kernels.iter().enumerate() {
            let _ = writeln!(
                o,
                "  {:>4}  {:<28} {:>7} {:>12.3} {:>12.2} {:>12.2}",
                i + 1,
                k.name,
                k.count,
                k.total_ns as f64 / 1e6,
                k.mean_ns / 1e3,
                k.std_ns / 1e3
            );
        }
        let _ = writeln!(o, "copies:");
        for c in &self.copies {
            let _ = writeln!(
                o,
                "  {:<5} count {:>6}  bytes {:>12}  device {:>9.3} ms  enqueue calls {:>9.3} ms  {:>7.2} GB/s  mean launch {:>8.1} us",
                c.direction,
                c.count,
                c.bytes,
                c.device_ns as f64 / 1e6,
                c.api_ns as f64 / 1e6,
                c.bandwidth_gb_s,
                c.mean_launch_ns / 1e3
            );
        }
        let c = &self.checks;
        let _ = writeln!(
            o,
            "checks: {} device spans, {} matched to their enqueue, {} start before the enqueue began, {} out of order, min launch {} ns",
            c.device_spans,
            c.matched,
            c.causality_violations,
            c.order_violations,
            c.min_launch_ns.map_or("-".into(), |v| v.to_string())
        );
        if let Some((off, drift, err)) = self.clock {
            let _ = writeln!(
                o,
                "clock: device (CLOCK_MONOTONIC_RAW) -> CLOCK_MONOTONIC offset {off} ns, drift {drift:.1} ppb, error bound {} ns",
                err.map_or("?".into(), |e| e.to_string())
            );
        }
        o
    }
}

/// Device work attributed to one operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpRow {
    pub op: String,
    /// Device commands attributed.
    pub commands: u64,
    pub kernel_ns: i64,
    pub copy_ns: i64,
    pub other_device_ns: i64,
    pub htod_copies: u64,
    pub htod_bytes: u64,
    /// Host time in the enqueue calls of those HtoD copies.
    pub htod_api_ns: i64,
    /// Device timeline covered by the HtoD copies (first start to last end, summed over the
    /// operation's instances): copy time plus the gaps between copies.
    pub htod_phase_ns: i64,
    /// Host time in the enqueue calls of those commands.
    pub enqueue_api_ns: i64,
}

/// Operation spans (BEGIN/END at level Operation) per thread id: `(tid, start, end, name)`.
pub fn operations(rec: &Recording) -> Vec<(i64, i64, i64, String)> {
    let op = Level::Operation.code();
    let mut stacks: HashMap<u32, Vec<(i64, Option<String>)>> = HashMap::new();
    let mut out = Vec::new();
    let tid = |track: u32| match rec.tracks.get(track as usize) {
        Some(Some(TrackDef::Thread { tid, .. })) => Some(*tid),
        _ => None,
    };
    for e in &rec.events {
        match e {
            Event::Begin {
                track,
                ts,
                level,
                name,
                ..
            } => stacks
                .entry(*track)
                .or_default()
                .push((*ts, (*level == op).then(|| rec.str(*name).to_owned()))),
            Event::End { track, ts } => {
                if let Some((start, Some(name))) = stacks.entry(*track).or_default().pop() {
                    if let Some(t) = tid(*track) {
                        out.push((t, start, *ts, name));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Zins's algorithm 2, generalised to any number of queues: a device command is attributed to
/// its enqueue call through the correlation id both carry (not through queue order), and the
/// call to the innermost operation open on the calling thread when the call began.
/// `ops` come from [`operations`] of the recordings of the same process.
pub fn attribute(opencl: &Recording, ops: &[(i64, i64, i64, String)]) -> Vec<OpRow> {
    let api_code = Level::AcceleratorApi.code();
    let tid = |track: u32| match opencl.tracks.get(track as usize) {
        Some(Some(TrackDef::Thread { tid, .. })) => Some(*tid),
        _ => None,
    };
    // corr -> (tid, begin, end) of the enqueue call.
    let mut calls: HashMap<u64, (i64, i64, i64)> = HashMap::new();
    for e in &opencl.events {
        if let Event::Span {
            track,
            start,
            end,
            level,
            correlation: Some(c),
            ..
        } = e
        {
            if *level == api_code {
                if let Some(t) = tid(*track) {
                    calls.insert(*c, (t, *start, *end));
                }
            }
        }
    }
    let innermost = |t: i64, ts: i64| -> Option<usize> {
        ops.iter()
            .enumerate()
            .filter(|(_, o)| o.0 == t && o.1 <= ts && ts < o.2)
            .max_by_key(|(_, o)| o.1)
            .map(|(i, _)| i)
    };
    let mut rows: HashMap<String, OpRow> = HashMap::new();
    // (op instance) -> (first HtoD start, last HtoD end)
    let mut phases: HashMap<Option<usize>, (i64, i64)> = HashMap::new();
    for e in &opencl.events {
        let Event::Span {
            start,
            end,
            level,
            correlation: Some(c),
            args,
            ..
        } = e
        else {
            continue;
        };
        if *level == api_code {
            continue;
        }
        let Some(&(t, b, ae)) = calls.get(c) else {
            continue;
        };
        let inst = innermost(t, b);
        let name = inst
            .map_or("(no operation)", |i| ops[i].3.as_str())
            .to_owned();
        let row = rows.entry(name.clone()).or_insert_with(|| OpRow {
            op: name,
            ..OpRow::default()
        });
        row.commands += 1;
        row.enqueue_api_ns += ae - b;
        let d = end - start;
        match Level::from_code(*level) {
            Some(Level::DeviceKernel) => row.kernel_ns += d,
            Some(Level::DeviceCopy) => {
                row.copy_ns += d;
                if arg_str(args.as_deref(), "direction").as_deref() == Some("HtoD") {
                    row.htod_copies += 1;
                    row.htod_api_ns += ae - b;
                    let p = phases.entry(inst).or_insert((*start, *end));
                    p.0 = p.0.min(*start);
                    p.1 = p.1.max(*end);
                    row.htod_bytes += arg_u64(args.as_deref(), "bytes").unwrap_or(0);
                }
            }
            _ => row.other_device_ns += d,
        }
    }
    for (inst, (lo, hi)) in phases {
        let name = inst.map_or("(no operation)", |i| ops[i].3.as_str());
        if let Some(row) = rows.get_mut(name) {
            row.htod_phase_ns += hi - lo;
        }
    }
    let mut out: Vec<OpRow> = rows.into_values().collect();
    out.sort_by(|a, b| a.op.cmp(&b.op));
    out
}
