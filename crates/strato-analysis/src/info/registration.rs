//! `info` as a registered analysis ([`crate::registry`]): its tables, JSON and text. The
//! counting is the parent module's; the engine counts a file's events as they stream, or a
//! job's rank file by rank file, without holding them (`strato_engine`'s opening of `info`).
//! Besides the counts, the report names what redaction marked
//! ([`strato_trace::secrets::redacted_names`]) and the ranks several sources claim
//! ([`shared_rank_claims`]).

use std::fmt::Write as _;

use serde::Serialize;
use strato_trace::{SourceFormat, Trace};

use super::{info, TraceInfo};
use crate::analyzed::Analyzed;
use crate::registry::{
    Analysis, AnalysisError, Events, InReport, NoOptions, OptionSpec, Reads, TableSpec,
};
use crate::text::units::ms;

/// What a trace holds.
#[derive(Debug)]
pub struct Info;

/// `info`'s result: the counts, what was redacted, and the ranks several sources claim.
#[derive(Debug, Clone, PartialEq)]
pub struct InfoReport {
    pub info: TraceInfo,
    /// The names of what carries the redaction marker (metadata keys, flags, names).
    pub redacted: Vec<String>,
    /// Each rank number that several sources claim, with those sources (kept apart).
    pub shared_rank_claims: Vec<(i64, Vec<String>)>,
}

impl InfoReport {
    /// The report of `trace`, whose events `info` counted (the trace may no longer hold them:
    /// its tables are what the rest reads).
    pub fn of(trace: &Trace, info: TraceInfo) -> InfoReport {
        InfoReport {
            info,
            redacted: strato_trace::secrets::redacted_names(trace),
            shared_rank_claims: shared_rank_claims(trace),
        }
    }
}

/// The JSON: the counts' fields, `redacted` and `shared_rank_claims` (`[{rank, sources}]`),
/// keys in alphabetical order.
impl Serialize for InfoReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(&self.info).map_err(serde::ser::Error::custom)?;
        value["redacted"] = serde_json::json!(self.redacted);
        value["shared_rank_claims"] = serde_json::json!(self
            .shared_rank_claims
            .iter()
            .map(|(rank, sources)| serde_json::json!({"rank": rank, "sources": sources}))
            .collect::<Vec<_>>());
        value.serialize(serializer)
    }
}

/// Each rank number that several sources claim (Nsight Compute reports, which describe
/// kernels of another source's run, left out), with those sources in input order.
pub fn shared_rank_claims(trace: &Trace) -> Vec<(i64, Vec<String>)> {
    let mut by_rank: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for r in trace.ranks.iter().filter(|r| r.format != SourceFormat::Ncu) {
        if let Some(n) = r.rank {
            by_rank.entry(n).or_default().push(r.source.clone());
        }
    }
    by_rank.into_iter().filter(|(_, s)| s.len() > 1).collect()
}

impl Analysis for Info {
    const NAME: &'static str = "info";
    const SUMMARY: &'static str = "Summarise a trace: formats, time span, events by level and \
category, processes, devices, the import notes, ranks claimed twice and what was redacted";
    const WINDOW: &'static str = "the whole trace: earliest to latest event time; every event \
counted once (the per-level span counts add up to the spans)";
    const DOC: &'static str = "docs/analyses/info.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato info trace.json.gz",
        "strato info trace.json.gz --json",
        "strato info ranks_dir/ --csv --table info_sources",
    ];
    const OPTIONS: &'static [OptionSpec] = &[];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "info",
            about: "one row: time span, event counts, spans by level (spans_by_level.<level>) \
and events by source category (events_by_category.<category>)",
            path: &[],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "info_sources",
            about: "one row per source: format, rank, world size, host, import notes",
            path: &["sources"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "info_processes",
            about: "one row per process: name, threads, spans, OS counts, CPU samples",
            path: &["processes"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "info_devices",
            about: "one row per device: name, device ops",
            path: &["devices"],
            inherit: &[],
            options: &[],
        },
    ];
    /// Every event, counted; no attributes.
    const READS: Reads = Reads {
        events: Events::All,
        args: None,
    };
    /// The report's overview.
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = NoOptions;
    type Output = InfoReport;

    fn run(analyzed: &Analyzed<'_>, _: &NoOptions) -> Result<InfoReport, AnalysisError> {
        let trace = analyzed.trace();
        Ok(InfoReport::of(trace, info(trace)))
    }

    fn render_text(report: &InfoReport, _: &NoOptions) -> String {
        let mut out = String::new();
        text(&mut out, &report.info);
        for (rank, sources) in &report.shared_rank_claims {
            let _ = writeln!(
                out,
                "note     {} sources claim rank {rank} ({}): kept apart as separate sources",
                sources.len(),
                sources.join(", ")
            );
        }
        if !report.redacted.is_empty() {
            let _ = writeln!(
                out,
                "redacted {} (secret-looking values in the sources' metadata and names; \
                 --keep-secrets keeps them)",
                report.redacted.join(", ")
            );
        }
        out
    }
}

/// The counts as text.
fn text(out: &mut String, info: &TraceInfo) {
    for s in &info.sources {
        let rank = s.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        let world = s.world_size.map(|w| format!("/{w}")).unwrap_or_default();
        let _ = writeln!(out, "source   {} ({}{}{})", s.source, s.format, rank, world);
    }
    // What the importers dropped, clamped, guessed or lost, per source.
    for s in info.sources.iter().filter(|s| !s.import_notes.is_empty()) {
        let n = &s.import_notes;
        let _ = writeln!(
            out,
            "import notes for {} ({} events read):",
            s.source, n.events_read
        );
        for (name, count) in &n.counts {
            let warn = if s
                .warnings
                .iter()
                .any(|w| w.starts_with(&format!("{name}:")))
            {
                "  [warning]"
            } else {
                ""
            };
            let _ = writeln!(out, "  {name:<40} {count:>10}{warn}");
        }
        for note in &n.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    let _ = writeln!(
        out,
        "span     {} .. {} ({})",
        info.start_ns.map_or("-".into(), |v| v.to_string()),
        info.end_ns.map_or("-".into(), |v| v.to_string()),
        ms(info.duration_ns)
    );
    let _ = writeln!(
        out,
        "events   {} spans, {} instants, {} counter samples, {} flows ({} with both ends), {} tracks",
        info.spans, info.instants, info.counter_samples, info.flows, info.flows_complete, info.tracks
    );
    out.push_str("\nspans by level\n");
    for (level, count) in &info.spans_by_level {
        let _ = writeln!(out, "  {level:<16} {count:>10}");
    }
    out.push_str("\nevents by source category\n");
    let mut cats: Vec<_> = info.events_by_category.iter().collect();
    cats.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (cat, count) in cats {
        let cat = if cat.is_empty() { "(none)" } else { cat };
        let _ = writeln!(out, "  {cat:<24} {count:>10}");
    }
    out.push_str("\nprocesses\n");
    for p in &info.processes {
        let _ = writeln!(
            out,
            "  pid {:<10} {:<32} {:>4} threads {:>10} spans",
            p.pid,
            p.name.as_deref().unwrap_or("-"),
            p.threads,
            p.spans
        );
        if let Some(os) = &p.os {
            let _ = writeln!(
                out,
                "    OS: {} switches, {} wakeups, {} migrations, {} system calls ({:.3} ms)",
                os.switches,
                os.wakeups,
                os.migrations,
                os.syscalls,
                os.syscall_time_ns as f64 / 1e6
            );
        }
        if let Some(n) = p.cpu_samples {
            let _ = writeln!(out, "    CPU samples: {n}");
        }
        for note in &p.notes {
            let _ = writeln!(out, "    note: {note}");
        }
    }
    out.push_str("\ndevices\n");
    for d in &info.devices {
        let streams: Vec<String> = d.streams.iter().map(i64::to_string).collect();
        let _ = writeln!(
            out,
            "  device {:<3} {:<28} streams [{}] {:>10} ops",
            d.index,
            d.name.as_deref().unwrap_or("-"),
            streams.join(", "),
            d.device_ops
        );
    }
}
