//! The `perf script` text reader: the `--header` block, one event line at a time (header,
//! event name, tracepoint fields or the sample's address), call-stack lines, switch lines, each
//! turned into an [`super::Ev`] for the state machine. A line that is not an event line is an
//! error naming it.

use std::io::{BufRead, BufReader};
use std::path::Path;

use linux_perf_data::linux_perf_event_reader::ClockId;
use strato_record::sample::{frame_label, FRAME_SEPARATOR, UNKNOWN_STACK, UNKNOWN_SYMBOL};
use strato_trace::Trace;

use super::state::{clock_info, Builder};
use super::{is_page_fault, left_from_letters, syscall_name, Ev, Frame, Header};
use crate::error::{Error, ErrorKind, Result};
use crate::input::{classify, Input};
use crate::ImportOptions;

/// The `# ========` block `perf script --header` prints first: every line inside it is skipped
/// (its `# cmdline` may span lines that do not start with `#`, when the recorded command had
/// newlines in an argument).
#[derive(Debug, Default)]
pub(super) struct HeaderBlock {
    pub(super) seen_start: bool,
    pub(super) done: bool,
}

impl HeaderBlock {
    /// Whether `line` belongs to the header block (the delimiters included).
    pub(super) fn skip(&mut self, line: &str) -> bool {
        if self.done {
            return false;
        }
        let delimiter = line.trim_end() == "# ========";
        if !self.seen_start {
            if delimiter {
                self.seen_start = true;
                return true;
            }
            if !line.trim().is_empty() {
                // No header block: the text starts with events or plain comments.
                self.done = true;
            }
            return false;
        }
        if delimiter {
            self.done = true;
        }
        true
    }
}

/// One parsed event line: header, event name, the rest (tracepoint fields or the sample's ip
/// and symbol).
#[derive(Debug, PartialEq)]
pub(super) struct Line<'a> {
    pub(super) comm: &'a str,
    pub(super) header: Header,
    /// Digits after the decimal point of the time (6: µs, 9: ns).
    pub(super) digits: u32,
    pub(super) event: &'a str,
    pub(super) rest: &'a str,
}

/// Parses `COMM PID[/TID] [CPU] SECONDS.FRACTION: [PERIOD] EVENT: REST`.
pub(super) fn parse_line(line: &str) -> Option<Line<'_>> {
    // The time is the first token that is `digits.digits:`.
    let mut offset = 0;
    let mut tokens: Vec<(usize, &str)> = Vec::new();
    for tok in line.split_whitespace() {
        let at = offset + line[offset..].find(tok)?;
        offset = at + tok.len();
        tokens.push((at, tok));
        if tokens.len() > 64 {
            return None;
        }
    }
    let time_i = tokens.iter().position(|(_, t)| {
        t.strip_suffix(':').is_some_and(|t| {
            let mut parts = t.splitn(2, '.');
            let (a, b) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
    })?;
    let mut i = time_i;
    // Optional [cpu].
    if i > 0 && tokens[i - 1].1.starts_with('[') && tokens[i - 1].1.ends_with(']') {
        i -= 1;
    }
    if i == 0 {
        return None;
    }
    let id = tokens[i - 1].1;
    let (pid, tid) = match id.split_once('/') {
        Some((p, t)) => (Some(p.parse::<i32>().ok()?), t.parse::<i32>().ok()?),
        None => (None, id.parse::<i32>().ok()?),
    };
    let comm_end = tokens[i - 1].0;
    let comm = line[..comm_end].trim();
    let time = tokens[time_i].1.trim_end_matches(':');
    let (secs, frac) = time.split_once('.')?;
    let digits = u32::try_from(frac.len()).ok().filter(|d| *d <= 9)?;
    let secs: i64 = secs.parse().ok()?;
    let frac: i64 = frac.parse().ok()?;
    let ts = secs
        .checked_mul(1_000_000_000)?
        .checked_add(frac * 10_i64.pow(9 - digits))?;
    // Then an optional period and the event name (`name:`).
    let mut j = time_i + 1;
    if tokens
        .get(j)
        .is_some_and(|(_, t)| t.bytes().all(|c| c.is_ascii_digit()))
    {
        j += 1;
    }
    let (at, ev) = *tokens.get(j)?;
    // Side-band records printed with `--show-switch-events` / `--show-task-events` carry no
    // colon (`PERF_RECORD_SWITCH OUT preempt`).
    let event = match ev.strip_suffix(':') {
        Some(e) => e,
        None if ev.starts_with("PERF_RECORD_") => {
            let end = ev
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(ev.len());
            &ev[..end]
        }
        None => return None,
    };
    if event.is_empty() {
        return None;
    }
    let rest = line[at + event.len()..]
        .trim()
        .trim_start_matches(':')
        .trim();
    Some(Line {
        comm,
        header: Header { ts, pid, tid },
        digits,
        event,
        rest,
    })
}

/// The value of `key=` in tracepoint fields (up to the next space).
pub(super) fn field<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(at) = rest[from..].find(key) {
        let at = from + at;
        let before_ok = at == 0 || rest.as_bytes()[at - 1] == b' ';
        let after = at + key.len();
        if before_ok && rest[after..].starts_with('=') {
            let v = &rest[after + 1..];
            return Some(v.split_whitespace().next().unwrap_or(""));
        }
        from = after;
    }
    None
}

pub(super) fn int_field(rest: &str, key: &str) -> Option<i64> {
    field(rest, key).and_then(|v| v.parse().ok())
}

/// The event of a text line (`None`: a known event whose fields do not parse).
pub(super) fn text_event(line: &Line<'_>, stack: Vec<Frame>) -> Option<Ev> {
    let e = line.event;
    let r = line.rest;
    Some(if e.starts_with("PERF_RECORD_SWITCH") {
        match r.split_whitespace().next() {
            Some("OUT") => Ev::SwitchOut {
                preempted: r.contains("preempt"),
            },
            Some("IN") => Ev::SwitchIn,
            _ => return None,
        }
    } else if e == "PERF_RECORD_EXIT" {
        Ev::Exit
    } else if e == "PERF_RECORD_FORK" {
        // `(PID:TID):(PPID:PTID)`: the new task and its process.
        let (pid, tid) = r.strip_prefix('(')?.split_once(')')?.0.split_once(':')?;
        Ev::Fork {
            pid: pid.parse().ok()?,
            tid: tid.parse().ok()?,
        }
    } else if e.starts_with("PERF_RECORD_") {
        Ev::SideBand
    } else if e.ends_with("sched_switch") {
        // Only `==>` separates the two tasks; the fields are looked up by name.
        let (before, after) = r.split_once("==>")?;
        Ev::Switch {
            prev: i32::try_from(int_field(before, "prev_pid")?).ok()?,
            left: left_from_letters(field(before, "prev_state")?),
            next: i32::try_from(int_field(after, "next_pid")?).ok()?,
        }
    } else if e.ends_with("sched_wakeup") || e.ends_with("sched_wakeup_new") {
        Ev::Wakeup {
            woken: i32::try_from(int_field(r, "pid")?).ok()?,
        }
    } else if e.ends_with("sched_migrate_task") {
        Ev::Migrate {
            task: i32::try_from(int_field(r, "pid")?).ok()?,
            from: int_field(r, "orig_cpu")?,
            to: int_field(r, "dest_cpu")?,
        }
    } else if e == "raw_syscalls:sys_enter" {
        let nr = r
            .strip_prefix("NR ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Ev::SysEnter {
            name: syscall_name(nr),
        }
    } else if e == "raw_syscalls:sys_exit" {
        let nr = r
            .strip_prefix("NR ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Ev::SysExit {
            name: Some(syscall_name(nr)),
        }
    } else if let Some(name) = e.strip_prefix("syscalls:sys_enter_") {
        Ev::SysEnter {
            name: name.to_owned(),
        }
    } else if let Some(name) = e.strip_prefix("syscalls:sys_exit_") {
        Ev::SysExit {
            name: Some(name.to_owned()),
        }
    } else if is_page_fault(e.split(':').next().unwrap_or(e)) || is_page_fault(e) {
        Ev::PageFault {
            event: e.to_owned(),
        }
    } else if e
        .split_once(':')
        .is_some_and(|(_, m)| !m.chars().all(|c| "ukhGHpPSDIeW".contains(c)))
    {
        // A tracepoint this importer does not use (`cpu-clock:ppp` is a sampled event with
        // modifiers; `sched:sched_stat_runtime` a tracepoint).
        Ev::Other
    } else {
        // A sampled hardware or software event (`cycles`, `cpu-clock:ppp`, ...): its leaf
        // is the symbol on the line itself when no call stack follows.
        let mut frames = stack;
        if frames.is_empty() {
            if let Some(frame) = sample_frame(r) {
                frames.push(frame);
            }
        }
        Ev::Sample {
            event: e.to_owned(),
            frames,
        }
    })
}

/// The frame of a sample line or a call-stack line: `ADDR SYMBOL+0xOFF (DSO)` -> symbol
/// `SYMBOL`, label `SYMBOL [DSO file name]` (perf's `[unknown]` symbol is
/// [`UNKNOWN_SYMBOL`] in the label, as a live recording names it; no DSO, the symbol alone).
pub(super) fn sample_frame(text: &str) -> Option<Frame> {
    let symbol = sample_symbol(text)?;
    let t = text.trim_end();
    let dso = t
        .strip_suffix(')')
        .and_then(|t| t.rfind(" (").map(|i| &t[i + 2..]))
        .filter(|d| !d.is_empty());
    let shown = if symbol == "[unknown]" {
        UNKNOWN_SYMBOL
    } else {
        symbol.as_str()
    };
    let label = match dso {
        // Outside every mapping, as a live recording names it.
        Some("[unknown]") => UNKNOWN_STACK.to_owned(),
        Some(dso) => frame_label(shown, dso),
        None => shown.replace(FRAME_SEPARATOR, ":"),
    };
    Some(Frame { symbol, label })
}

/// The symbol of a sample line or a call-stack line: `ADDR SYMBOL+0xOFF (DSO)` -> `SYMBOL`
/// (`[unknown]` kept; an address alone is `None`).
pub(super) fn sample_symbol(text: &str) -> Option<String> {
    let mut it = text.split_whitespace();
    let first = it.next()?;
    let rest: Vec<&str> = it.collect();
    let body = if first.bytes().all(|c| c.is_ascii_hexdigit()) {
        rest.join(" ")
    } else {
        text.to_owned()
    };
    let body = match body.rfind(" (") {
        Some(i) if body.ends_with(')') => body[..i].to_owned(),
        _ => body,
    };
    let sym = match body.rfind("+0x") {
        Some(i) => &body[..i],
        None => body.as_str(),
    };
    let sym = sym.trim();
    (!sym.is_empty()).then(|| sym.to_owned())
}

/// Imports `perf script` text output (see the module docs); `input` is the opened file.
pub fn import_script(path: &Path, input: Input, options: &ImportOptions) -> Result<Trace> {
    let mut reader = BufReader::new(input.reader);
    let mut builder = Builder::new(path, options);
    let mut clockid: Option<ClockId> = None;
    let mut meta = serde_json::Map::new();
    let mut digits = 9;
    let mut line = String::new();
    let mut number = 0u64;
    let mut header_block = HeaderBlock::default();
    // The event line waiting for its call stack (the indented lines after it).
    let mut held: Option<(String, u64)> = None;
    let mut stack: Vec<Frame> = Vec::new();
    let mut chain_ended = false;
    let bad = |n: u64, what: &str| {
        Error::new(
            path,
            ErrorKind::Perf(format!("line {n}: {what} (expected `perf script` output)")),
        )
    };
    let flush = |builder: &mut Builder<'_>,
                 held: &mut Option<(String, u64)>,
                 stack: &mut Vec<Frame>,
                 digits: &mut u32|
     -> Result<()> {
        if let Some((text, n)) = held.take() {
            let parsed = parse_line(&text).ok_or_else(|| bad(n, "not an event line"))?;
            *digits = (*digits).min(parsed.digits);
            let ev = text_event(&parsed, std::mem::take(stack))
                .ok_or_else(|| bad(n, &format!("the fields of {} do not parse", parsed.event)))?;
            let comm = parsed.comm.to_owned();
            let h = parsed.header;
            if h.tid != 0 {
                let t = builder.thread(h.tid);
                if t.comm.is_none() && !comm.is_empty() {
                    t.comm = Some(comm);
                }
            }
            builder.handle(h, ev);
        }
        stack.clear();
        Ok(())
    };
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| classify(path, e))?;
        if n == 0 {
            break;
        }
        number += 1;
        let text = line.trim_end_matches(['\n', '\r']);
        let in_header = header_block.skip(text);
        if in_header && !text.starts_with('#') {
            continue;
        }
        if text.trim().is_empty() {
            flush(&mut builder, &mut held, &mut stack, &mut digits)?;
            continue;
        }
        if let Some(comment) = text.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(v) = comment.strip_prefix("clockid:") {
                clockid = match v.split_whitespace().next() {
                    Some("monotonic") => Some(ClockId::Monotonic),
                    Some("monotonic_raw") => Some(ClockId::MonotonicRaw),
                    Some("realtime") => Some(ClockId::Realtime),
                    Some("boottime") => Some(ClockId::Boottime),
                    _ => None,
                };
            } else if let Some((k, v)) = comment.split_once(" : ") {
                let k = k.trim();
                if ["hostname", "os release", "perf version", "arch", "cmdline"].contains(&k) {
                    meta.insert(k.replace(' ', "_"), v.trim().into());
                }
            }
            continue;
        }
        if text.starts_with('\t')
            || (text.starts_with(' ') && held.is_some() && parse_line(text).is_none())
        {
            if held.is_none() {
                return Err(bad(number, "a call-stack line without its event line"));
            }
            // As in a live recording, the chain ends at the first return address outside
            // every mapping (perf prints the frame-pointer walk's garbage beyond it).
            if let Some(frame) = sample_frame(text).filter(|_| !chain_ended) {
                if !stack.is_empty() && frame.label == UNKNOWN_STACK {
                    chain_ended = true;
                } else {
                    stack.push(frame);
                }
            }
            continue;
        }
        flush(&mut builder, &mut held, &mut stack, &mut digits)?;
        if parse_line(text).is_none() {
            return Err(bad(number, "not an event line"));
        }
        held = Some((text.to_owned(), number));
        chain_ended = false;
    }
    flush(&mut builder, &mut held, &mut stack, &mut digits)?;
    if builder.trace.ranks[0].notes.events_read == 0 {
        return Err(Error::new(
            path,
            ErrorKind::Perf("no events (expected `perf script` output)".into()),
        ));
    }
    if let Some(host) = meta.get("hostname").and_then(|v| v.as_str()) {
        builder.trace.ranks[0].host = Some(host.to_owned());
    }
    let resolution = 10_i64.pow(9 - digits.min(9));
    let clock = clock_info(clockid, resolution, "`perf script` text");
    builder.finish(path, clock, meta)
}
