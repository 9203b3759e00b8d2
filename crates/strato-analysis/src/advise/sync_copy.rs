//! Rule `sync-copy`: pageable or synchronous memcpy, and synchronous memset (Nsight Systems'
//! `cuda_memcpy_async`/`cuda_memcpy_sync`/`cuda_memset_sync` rules, on any source).
//!
//! - *Pageable*: a device copy from or to pageable host memory — Kineto names it
//!   (`Memcpy HtoD (Pageable -> Device)`, `Memcpy DtoH (Device -> Pageable)`), nsys gives
//!   `srcKind`/`dstKind` `Pageable` (kept as attributes: the rule needs the import's args).
//!   The driver stages it through a pinned buffer, so it cannot overlap with compute and an
//!   "async" call returns only when the copy is done.
//! - *Synchronous*: a copy or set launched by a blocking API call (a `memcpy`/`memset` call
//!   whose name has no `Async`: `cudaMemcpy`, `cudaMemset`, `cuMemcpyHtoD`, `hipMemcpy`, ...).
//!
//! Time at stake: the union of the flagged device ops' intervals and of their launching calls
//! (the host is blocked there too: a synchronous call returns when its copy is done, and so
//! does an "async" one when a side is pageable).

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Span, Trace};

use super::{api_name, human, span_evidence, Draft, Facts};
use crate::analyzed::Analyzed;

/// The rule id.
pub const ID: &str = "sync-copy";

/// Switches of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// Flag pageable copies.
    pub pageable: bool,
    /// Flag copies and sets launched by blocking calls.
    pub synchronous: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            pageable: true,
            synchronous: true,
        }
    }
}

/// `Some(true)` when copy `span` reads pageable host memory, `Some(false)` when it writes
/// pageable host memory, `None` when no side is pageable (or the source does not say).
pub fn pageable_side(trace: &Trace, span: &Span) -> Option<bool> {
    if span.level != Level::DeviceCopy {
        return None;
    }
    let name = trace.str(span.name);
    if let Some(i) = name.find("Pageable") {
        // `(Pageable -> Device)`: the source; `(Device -> Pageable)`: the destination.
        return Some(!name[..i].contains("->"));
    }
    let text = trace.args_text(span.args)?;
    if !text.contains("Pageable") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let is = |k: &str| value.get(k).and_then(|v| v.as_str()) == Some("Pageable");
    if is("srcKind") {
        Some(true)
    } else if is("dstKind") {
        Some(false)
    } else {
        None
    }
}

/// True when an API call of this name blocks until its copy or set is done.
pub fn is_blocking_call(name: &str) -> bool {
    let name = api_name(name);
    let lower = name.to_ascii_lowercase();
    (lower.contains("memcpy") || lower.contains("memset")) && !lower.contains("async")
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let mut intervals = Vec::new();
    // (what, op name, launch name) -> (count, device time, sample span)
    let mut groups: std::collections::BTreeMap<(String, String, String), (usize, i64, u32)> =
        Default::default();
    let mut flagged: Vec<u32> = Vec::new();
    for ops in facts.device_work.values() {
        for &i in ops {
            let s = &trace.spans[i as usize];
            if !matches!(s.level, Level::DeviceCopy | Level::DeviceSet) {
                continue;
            }
            let launch = facts.launch_of.get(&i).copied();
            let launch_name = launch.map(|l| api_name(trace.str(trace.spans[l as usize].name)));
            let pageable = config.pageable && pageable_side(trace, s).is_some();
            let blocking = config.synchronous && launch_name.is_some_and(is_blocking_call);
            if !pageable && !blocking {
                continue;
            }
            let what = match (pageable, blocking, s.level) {
                (true, true, _) => "pageable, synchronous copy",
                (true, false, _) => "pageable copy",
                (false, _, Level::DeviceSet) => "synchronous memset",
                _ => "synchronous copy",
            };
            intervals.push(facts.clock.span(trace, s));
            // The host waits in the launching call too: a synchronous call returns when its
            // copy is done, and so does an "async" one when a side is pageable.
            if blocking || pageable {
                if let Some(l) = launch {
                    intervals.push(facts.clock.span(trace, &trace.spans[l as usize]));
                }
            }
            let key = (
                what.to_owned(),
                trace.str(s.name).to_owned(),
                launch_name.unwrap_or("(no launch found)").to_owned(),
            );
            let g = groups.entry(key).or_insert((0, 0, i));
            g.0 += 1;
            g.1 = g.1.saturating_add(s.duration());
            flagged.push(i);
        }
    }
    if flagged.is_empty() {
        return Vec::new();
    }
    let mut rows: Vec<_> = groups.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
    let summary: Vec<String> = rows
        .iter()
        .map(|((what, name, launch), (n, t, _))| {
            format!("{n} x {what} `{name}` by {launch} ({})", human(*t))
        })
        .collect();
    flagged.sort_by_key(|&i| {
        (
            std::cmp::Reverse(trace.spans[i as usize].duration()),
            super::time_key(trace, i),
        )
    });
    let evidence = flagged
        .iter()
        .take(super::MAX_EVIDENCE)
        .map(|&i| {
            let s = &trace.spans[i as usize];
            span_evidence(trace, "copy", i, trace.str(s.name).to_owned())
        })
        .collect();
    vec![Draft {
        intervals,
        evidence,
        message: format!(
            "{} device copies/sets are pageable or synchronous: {}.",
            flagged.len(),
            summary.join("; ")
        ),
        advice: "Copy from and to pinned (page-locked) host memory (DataLoader(pin_memory=True), \
                 tensor.pin_memory(), cudaHostAlloc) with asynchronous calls \
                 (non_blocking=True, cudaMemcpyAsync/cudaMemsetAsync on a stream) so copies \
                 overlap with compute and the host does not block."
            .into(),
    }]
}
