//! `strato diff`'s text: the run-to-run diff ([`text`]) and the by-op diff ([`op_text`]),
//! coloured and fitted to a [`Terminal`] the front end describes. Writes to a string.

use std::fmt::Write;

use super::diff::{Change, Delta, DiffReport, SideSummary};
use super::op_diff::{KeyDiff, OpDiffReport, EXPLAINED_SHARE};
use crate::text::terminal::{Style, Terminal};
use crate::text::units::{fit, fit_middle, ms_num};

type Result = std::fmt::Result;

/// `strato diff --by-op` as text: totals, then the op and module tables (largest differences
/// first, the explaining set marked `*`).
pub(crate) fn op_text(out: &mut String, r: &OpDiffReport, top: usize) -> Result {
    writeln!(out, "window: {}", r.window)?;
    for (tag, s) in [("A", &r.a), ("B", &r.b)] {
        writeln!(
            out,
            "{tag}: {}  {} device ops, {} ms (no framework op {} ms, no module {} ms)",
            s.label,
            s.device_ops,
            ms_num(s.device_ns as f64),
            ms_num(s.without_op_ns as f64),
            ms_num(s.without_module_ns as f64)
        )?;
    }
    writeln!(
        out,
        "B - A: {} ms{}",
        signed_ms(r.delta_ns),
        r.ratio
            .map_or(String::new(), |x| format!("  (B/A {x:.2}x)"))
    )?;
    let section = |out: &mut String, title: &str, rows: &[KeyDiff], explaining: usize| -> Result {
        writeln!(
            out,
            "\n{title}: {explaining} of {} account for {:.0}% of the difference (*)",
            rows.len(),
            100.0 * EXPLAINED_SHARE
        )?;
        writeln!(
            out,
            "  {:>1} {:>10} {:>10} {:>10} {:>7} {:>6}  name",
            "", "A ms", "B ms", "B-A ms", "B/A", "cum%"
        )?;
        for x in rows.iter().take(top.max(explaining)) {
            writeln!(
                out,
                "  {:>1} {:>10} {:>10} {:>10} {:>7} {:>5.0}%  {}",
                if x.explains { "*" } else { "" },
                ms_num(x.a_ns as f64),
                ms_num(x.b_ns as f64),
                signed_ms(x.delta_ns),
                x.ratio.map_or("new".into(), |v| format!("{v:.2}")),
                100.0 * x.cumulative_share,
                x.key
            )?;
        }
        Ok(())
    };
    section(out, "framework ops", &r.ops, r.ops_explaining.len())?;
    section(out, "modules", &r.modules, r.modules_explaining.len())?;
    Ok(())
}

fn signed_ms(ns: i64) -> String {
    format!("{:+.3}", ns as f64 / 1e6)
}

fn pct(p: Option<f64>) -> String {
    p.map_or("new".into(), |p| format!("{p:+.1}%"))
}

fn style_of(change: Change) -> Option<Style> {
    match change {
        Change::Slower | Change::Added => Some(Style::Red),
        Change::Faster | Change::Removed => Some(Style::Green),
        Change::Same => None,
    }
}

/// A table whose first `names` columns shrink (equally) so the whole fits `width`; numbers
/// are right-aligned; the last column may be painted by the row's change.
struct Table {
    header: Vec<&'static str>,
    names: usize,
    rows: Vec<(Vec<String>, Change)>,
}

impl Table {
    fn print(&self, out: &mut String, term: &Terminal) -> Result {
        let n = self.header.len();
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for (r, _) in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let numbers: usize = w[self.names..].iter().sum::<usize>() + 2 * (n - 1);
        let room = term.width.saturating_sub(numbers + 2);
        let each = (room / self.names.max(1)).max(12);
        for x in w.iter_mut().take(self.names) {
            *x = (*x).min(each);
        }
        let line = |cells: &[String], change: Option<Change>| {
            let mut s = String::from("  ");
            for (i, c) in cells.iter().enumerate().take(n) {
                if i > 0 {
                    s.push_str("  ");
                }
                let cell = if i < self.names {
                    fit(c, w[i])
                } else {
                    c.clone()
                };
                let pad = w[i].saturating_sub(cell.chars().count());
                let padded = if i < self.names {
                    format!("{cell}{}", " ".repeat(if i + 1 == n { 0 } else { pad }))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                };
                match change.and_then(style_of) {
                    Some(style) if i + 1 >= n - 2 => s.push_str(&term.paint(&padded, style)),
                    _ => s.push_str(&padded),
                }
            }
            s.trim_end().to_owned()
        };
        let header: Vec<String> = self.header.iter().map(|h| (*h).to_owned()).collect();
        writeln!(out, "{}", term.paint(&line(&header, None), Style::Bold))?;
        for (r, c) in &self.rows {
            writeln!(out, "{}", line(r, Some(*c)))?;
        }
        Ok(())
    }
}

fn delta_cells(d: &Delta) -> Vec<String> {
    vec![
        ms_num(d.a_ns as f64),
        format!("{:.1}%", 100.0 * d.a_share),
        ms_num(d.b_ns as f64),
        format!("{:.1}%", 100.0 * d.b_share),
        signed_ms(d.delta_ns),
        pct(d.delta_pct),
        d.change.as_str().to_owned(),
    ]
}

/// Renders the diff as text.
pub(crate) fn text(out: &mut String, d: &DiffReport, top: usize, term: &Terminal) -> Result {
    let side = |name: &str, s: &SideSummary| {
        let stats = format!(
            "({} process{}, wall {} ms, device {} ms, {} device ops)",
            s.processes,
            if s.processes == 1 { "" } else { "es" },
            ms_num(s.window_ns as f64),
            ms_num(s.device_time_ns as f64),
            s.device_ops
        );
        let room = term
            .width
            .saturating_sub(stats.chars().count() + name.len() + 4);
        format!("{name}  {}  {stats}", fit_middle(&s.label, room.max(16)))
    };
    writeln!(out, "{}", term.paint(&side("A", &d.a), Style::Bold))?;
    writeln!(out, "{}", term.paint(&side("B", &d.b), Style::Bold))?;
    for (what, x) in [("wall time", &d.window), ("device time", &d.device_time)] {
        let change = format!("{} ms ({})", signed_ms(x.delta_ns), pct(x.delta_pct));
        let painted = match style_of(x.change) {
            Some(s) => term.paint(&change, s),
            None => change,
        };
        writeln!(
            out,
            "  {what:<12} {} ms -> {} ms  {painted}",
            ms_num(x.a_ns as f64),
            ms_num(x.b_ns as f64)
        )?;
    }

    let header_ms = vec![
        "A ms",
        "A share",
        "B ms",
        "B share",
        "change ms",
        "change",
        "",
    ];
    let changed_ops: Vec<_> = d
        .operations
        .iter()
        .filter(|o| o.delta.change != Change::Same)
        .collect();
    writeln!(
        out,
        "\n{}",
        term.paint(
            &format!(
                "operations ({} changed of {}; largest first)",
                changed_ops.len(),
                d.operations.len()
            ),
            Style::Cyan
        )
    )?;
    let mut t = Table {
        header: [vec!["operation"], header_ms.clone()].concat(),
        names: 1,
        rows: Vec::new(),
    };
    for o in d.operations.iter().take(top) {
        t.rows.push((
            [vec![o.operation.clone()], delta_cells(&o.delta)].concat(),
            o.delta.change,
        ));
    }
    t.print(out, term)?;

    let changed: Vec<_> = d
        .strata
        .iter()
        .filter(|s| s.delta.change != Change::Same)
        .collect();
    writeln!(
        out,
        "\n{}",
        term.paint(
            &format!(
                "operation x stratum ({} changed rows; largest first)",
                changed.len()
            ),
            Style::Cyan
        )
    )?;
    let mut t = Table {
        header: [vec!["operation", "stratum"], header_ms.clone()].concat(),
        names: 2,
        rows: Vec::new(),
    };
    for s in changed.iter().take(top) {
        t.rows.push((
            [
                vec![s.operation.clone(), s.stratum_label()],
                delta_cells(&s.delta),
            ]
            .concat(),
            s.delta.change,
        ));
    }
    t.print(out, term)?;
    if changed.len() > top {
        writeln!(
            out,
            "  ({} more; --top N or --json for all)",
            changed.len() - top
        )?;
    }

    let changed: Vec<_> = d
        .kernels
        .iter()
        .filter(|k| k.delta.change != Change::Same)
        .collect();
    writeln!(
        out,
        "\n{}",
        term.paint(
            &format!(
                "kernels ({} changed of {}; largest first)",
                changed.len(),
                d.kernels.len()
            ),
            Style::Cyan
        )
    )?;
    let mut t = Table {
        header: [vec!["kernel", "A n", "B n"], header_ms].concat(),
        names: 1,
        rows: Vec::new(),
    };
    for k in changed.iter().take(top) {
        t.rows.push((
            [
                vec![k.name.clone(), k.a_count.to_string(), k.b_count.to_string()],
                delta_cells(&k.delta),
            ]
            .concat(),
            k.delta.change,
        ));
    }
    t.print(out, term)?;
    if changed.len() > top {
        writeln!(
            out,
            "  ({} more; --top N or --json for all)",
            changed.len() - top
        )?;
    }

    let list = |out: &mut String, what: &str, names: Vec<String>, style: Style| -> Result {
        if names.is_empty() {
            return Ok(());
        }
        writeln!(
            out,
            "\n{}",
            term.paint(&format!("{what} ({})", names.len()), style)
        )?;
        for n in names.iter().take(top) {
            writeln!(out, "  {}", fit(n, term.width.saturating_sub(4)))?;
        }
        if names.len() > top {
            writeln!(out, "  ({} more)", names.len() - top)?;
        }
        Ok(())
    };
    list(
        out,
        "operations added in B",
        d.added_operations().map(str::to_owned).collect(),
        Style::Red,
    )?;
    list(
        out,
        "operations removed from A",
        d.removed_operations().map(str::to_owned).collect(),
        Style::Green,
    )?;
    list(
        out,
        "kernels added in B",
        d.added_kernels()
            .map(|k| {
                format!(
                    "{}  ({} calls, {} ms)",
                    k.name,
                    k.b_count,
                    ms_num(k.delta.b_ns as f64)
                )
            })
            .collect(),
        Style::Red,
    )?;
    list(
        out,
        "kernels removed from A",
        d.removed_kernels()
            .map(|k| {
                format!(
                    "{}  ({} calls, {} ms)",
                    k.name,
                    k.a_count,
                    ms_num(k.delta.a_ns as f64)
                )
            })
            .collect(),
        Style::Green,
    )?;
    Ok(())
}
