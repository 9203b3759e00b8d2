//! Terminal rendering and the stable JSON shapes of the commands. Reads analysis results only.

use std::io::{self, Write};
use strato_analysis::text::units::ms;

use strato_analysis::info::TraceInfo;

/// `strato info` as text.
pub fn info(out: &mut impl Write, info: &TraceInfo) -> io::Result<()> {
    for s in &info.sources {
        let rank = s.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        let world = s.world_size.map(|w| format!("/{w}")).unwrap_or_default();
        writeln!(out, "source   {} ({}{}{})", s.source, s.format, rank, world)?;
    }
    // What the importers dropped, clamped, guessed or lost, per source.
    for s in info.sources.iter().filter(|s| !s.import_notes.is_empty()) {
        let n = &s.import_notes;
        writeln!(
            out,
            "import notes for {} ({} events read):",
            s.source, n.events_read
        )?;
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
            writeln!(out, "  {name:<40} {count:>10}{warn}")?;
        }
        for note in &n.notes {
            writeln!(out, "  note: {note}")?;
        }
    }
    writeln!(
        out,
        "span     {} .. {} ({})",
        info.start_ns.map_or("-".into(), |v| v.to_string()),
        info.end_ns.map_or("-".into(), |v| v.to_string()),
        ms(info.duration_ns)
    )?;
    writeln!(
        out,
        "events   {} spans, {} instants, {} counter samples, {} flows ({} with both ends), {} tracks",
        info.spans, info.instants, info.counter_samples, info.flows, info.flows_complete, info.tracks
    )?;
    writeln!(out, "\nspans by level")?;
    for (level, count) in &info.spans_by_level {
        writeln!(out, "  {level:<16} {count:>10}")?;
    }
    writeln!(out, "\nevents by source category")?;
    let mut cats: Vec<_> = info.events_by_category.iter().collect();
    cats.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (cat, count) in cats {
        let cat = if cat.is_empty() { "(none)" } else { cat };
        writeln!(out, "  {cat:<24} {count:>10}")?;
    }
    writeln!(out, "\nprocesses")?;
    for p in &info.processes {
        writeln!(
            out,
            "  pid {:<10} {:<32} {:>4} threads {:>10} spans",
            p.pid,
            p.name.as_deref().unwrap_or("-"),
            p.threads,
            p.spans
        )?;
        if let Some(os) = &p.os {
            writeln!(
                out,
                "    OS: {} switches, {} wakeups, {} migrations, {} system calls ({:.3} ms)",
                os.switches,
                os.wakeups,
                os.migrations,
                os.syscalls,
                os.syscall_time_ns as f64 / 1e6
            )?;
        }
        if let Some(n) = p.cpu_samples {
            writeln!(out, "    CPU samples: {n}")?;
        }
        for note in &p.notes {
            writeln!(out, "    note: {note}")?;
        }
    }
    writeln!(out, "\ndevices")?;
    for d in &info.devices {
        let streams: Vec<String> = d.streams.iter().map(i64::to_string).collect();
        writeln!(
            out,
            "  device {:<3} {:<28} streams [{}] {:>10} ops",
            d.index,
            d.name.as_deref().unwrap_or("-"),
            streams.join(", "),
            d.device_ops
        )?;
    }
    Ok(())
}
