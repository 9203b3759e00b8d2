//! Terminal rendering and the stable JSON shapes of the commands. Reads analysis results only.

use crate::render::units::ms;
use std::io::{self, Write};

use strato_analysis::device_time::gpu_time::{GpuTimeReport, Window};
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

/// `strato gpu-time` as text.
pub fn gpu_time(out: &mut impl Write, report: &GpuTimeReport) -> io::Result<()> {
    let window = match report.window {
        Window::Whole => "whole trace, ns resolution",
        Window::Hta => "HTA window and rounding",
    };
    writeln!(
        out,
        "device temporal breakdown ({window}); percentages of kernel time\n"
    )?;
    writeln!(
        out,
        "{:>5}  {:>8}  {:>8}  {:>12}  {:>14}  {:>13}  source",
        "rank", "idle %", "compute %", "non-compute %", "kernel time", "comm/comp ovl"
    )?;
    for r in &report.ranks {
        writeln!(
            out,
            "{:>5}  {:>8.2}  {:>9.2}  {:>13.2}  {:>14}  {:>13}  {}",
            r.rank,
            r.idle_pct,
            r.compute_pct,
            r.non_compute_pct,
            ms(r.kernel_time_ns),
            r.comm_comp_overlap_pct
                .map_or("n/a".into(), |v| format!("{v:.2} %")),
            r.source
        )?;
        if let Some(note) = &r.note {
            writeln!(out, "       note: {note}")?;
        }
        if let Some(warning) = r.unclassified_warning() {
            writeln!(out, "       warning: {warning}")?;
        }
    }
    writeln!(
        out,
        "\nidle time per stream (host wait: launch came late; kernel wait: gap < threshold)\n"
    )?;
    writeln!(
        out,
        "{:>5}  {:>6}  {:>6}  {:>8}  {:>14}  {:>14}  {:>14}  {:>11}",
        "rank", "device", "stream", "events", "host wait", "kernel wait", "other", "overlapping"
    )?;
    let mut overlapping = 0;
    for r in &report.ranks {
        for s in &r.streams {
            overlapping += s.overlapping_events;
            writeln!(
                out,
                "{:>5}  {:>6}  {:>6}  {:>8}  {:>14}  {:>14}  {:>14}  {:>11}",
                r.rank,
                s.device,
                s.stream,
                s.events,
                ms(s.host_wait_ns),
                ms(s.kernel_wait_ns),
                ms(s.other_ns),
                s.overlapping_events
            )?;
        }
    }
    if overlapping > 0 {
        let how = match report.window {
            Window::Whole => "no gap is counted before them",
            Window::Hta => "HTA counts their negative gaps",
        };
        writeln!(
            out,
            "
{overlapping} events started before earlier events on their stream had ended \
             (overlapping); {how}"
        )?;
    }
    gpu_exposure(out, report)
}

/// The exposure table of `strato gpu-time` (whole window only): per device that ran work, and
/// per step, the window split into compute alone / compute with communication beside it /
/// exposed communication / exposed copy / idle.
fn gpu_exposure(out: &mut impl Write, report: &GpuTimeReport) -> io::Result<()> {
    if !report.ranks.iter().any(|r| r.exposure.is_some()) {
        return Ok(());
    }
    writeln!(
        out,
        "\nexposed communication per device that ran work (parts add up to the device's window)\n"
    )?;
    writeln!(
        out,
        "{:>5}  {:>6}  {:<18}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}",
        "rank",
        "device",
        "step",
        "window",
        "compute alone",
        "compute + comm",
        "exposed comm",
        "exposed copy",
        "idle"
    )?;
    for r in &report.ranks {
        for d in r.exposure.iter().flatten() {
            let rows = std::iter::once(("all", &d.exposure))
                .chain(d.steps.iter().map(|s| (s.step.as_str(), &s.exposure)));
            for (step, e) in rows {
                writeln!(
                    out,
                    "{:>5}  {:>6}  {:<18}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}",
                    r.rank,
                    d.device,
                    crate::render::units::fit(step, 18),
                    ms(e.window_end_ns - e.window_start_ns),
                    ms(e.compute_alone_ns),
                    ms(e.compute_with_communication_ns),
                    ms(e.exposed_communication_ns),
                    ms(e.exposed_copy_ns),
                    ms(e.idle_ns)
                )?;
            }
        }
    }
    Ok(())
}
