//! The plots of `_repr_html_`: the report's SVG bar charts ([`strato_report::svg::bars`]) of a
//! result, and the report's plot style sheet scoped to the result's `<div>` (so a notebook's
//! own styles are left alone).

use strato_report::svg::bars::{stacked, Axis, Bar, Chart, Segment};
use strato_report::svg::color;

use strato_engine::rows::Ordered;

/// `svg` with the report's plot styles (`svg.plot ...` rules of `report.css`), scoped to
/// `div.stratoscope`.
pub fn styled(svg: &str) -> String {
    let rules: String = strato_report::sections::CSS
        .lines()
        .filter(|l| l.starts_with("svg.plot"))
        .map(|l| format!("div.stratoscope {l}\n"))
        .collect();
    format!("<style>div.stratoscope{{--fg:#1f2328;--muted:#59636e}}\n{rules}</style>{svg}")
}

fn number(v: Option<&Ordered>) -> f64 {
    match v {
        Some(Ordered::Int(i)) => *i as f64,
        Some(Ordered::UInt(u)) => *u as f64,
        Some(Ordered::Float(f)) => *f,
        _ => 0.0,
    }
}

fn text(v: Option<&Ordered>) -> String {
    match v {
        Some(Ordered::Text(s)) => s.clone(),
        Some(Ordered::Int(i)) => i.to_string(),
        Some(Ordered::UInt(u)) => u.to_string(),
        Some(Ordered::Float(f)) => f.to_string(),
        Some(Ordered::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

/// A stacked bar per object of `items`: labelled by `label`, one segment per `(field, legend)`
/// of `parts` (values in ns, or % with `Axis::Percent`).
pub fn stacked_fields(
    aria: &str,
    axis: Axis,
    items: &[Ordered],
    label: impl Fn(&Ordered) -> String,
    parts: &[(&str, &str)],
) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let bars = items
        .iter()
        .map(|item| Bar {
            label: label(item),
            segments: parts
                .iter()
                .enumerate()
                .map(|(i, (field, legend))| Segment {
                    value: number(item.get(field)).max(0.0),
                    fill: color(i).to_owned(),
                    tip: format!("{legend}: {}", text(item.get(field))),
                })
                .collect(),
            note: String::new(),
        })
        .collect();
    Some(stacked(&Chart {
        aria: aria.to_owned(),
        axis,
        axis_title: String::new(),
        bars,
        legend: parts
            .iter()
            .enumerate()
            .map(|(i, (_, legend))| ((*legend).to_owned(), color(i).to_owned()))
            .collect(),
        defs: String::new(),
    }))
}

/// A stacked bar per group of `rows`: segments are the `key` values (the `top` largest by
/// total, the rest folded into "other"), sized by `value` (ns).
pub fn stacked_groups(
    aria: &str,
    groups: &[(String, Vec<Ordered>)],
    key: &str,
    value: &str,
    top: usize,
) -> Option<String> {
    let mut totals: Vec<(String, f64)> = Vec::new();
    for (_, rows) in groups {
        for row in rows {
            let k = text(row.get(key));
            let v = number(row.get(value));
            match totals.iter_mut().find(|(name, _)| *name == k) {
                Some(t) => t.1 += v,
                None => totals.push((k, v)),
            }
        }
    }
    if totals.is_empty() {
        return None;
    }
    totals.sort_by(|a, b| b.1.total_cmp(&a.1));
    let kept: Vec<String> = totals.iter().take(top).map(|(k, _)| k.clone()).collect();
    let folded = totals.len() > kept.len();
    let mut legend: Vec<(String, String)> = kept
        .iter()
        .enumerate()
        .map(|(i, k)| (strato_report::html::shorten(k, 40), color(i).to_owned()))
        .collect();
    if folded {
        legend.push(("other".to_owned(), "#bab0ac".to_owned()));
    }
    let bars = groups
        .iter()
        .map(|(label, rows)| {
            let mut values = vec![0.0; kept.len() + usize::from(folded)];
            for row in rows {
                let k = text(row.get(key));
                let slot = kept.iter().position(|x| *x == k).unwrap_or(kept.len());
                if slot < values.len() {
                    values[slot] += number(row.get(value)).max(0.0);
                }
            }
            Bar {
                label: label.clone(),
                segments: values
                    .iter()
                    .zip(&legend)
                    .map(|(v, (name, fill))| Segment {
                        value: *v,
                        fill: fill.clone(),
                        tip: format!("{name}: {}", strato_report::svg::fmt_ns(*v)),
                    })
                    .collect(),
                note: String::new(),
            }
        })
        .collect();
    Some(stacked(&Chart {
        aria: aria.to_owned(),
        axis: Axis::Duration,
        axis_title: String::new(),
        bars,
        legend,
        defs: String::new(),
    }))
}

/// The plot shown with a registered analysis's table `name` (the rows' result `doc`), where
/// it has one.
pub fn of_table(name: &str, doc: &Ordered) -> Option<String> {
    match name {
        "gpu_time" => stacked_fields(
            "device time per rank",
            Axis::Percent,
            list(doc, "ranks"),
            |r| format!("rank {}", label_text(r.get("rank"))),
            &[
                ("compute_pct", "compute %"),
                ("non_compute_pct", "non-compute %"),
                ("idle_pct", "idle %"),
            ],
        ),
        "breakdown" => {
            let groups: Vec<(String, Vec<Ordered>)> = list(doc, "processes")
                .iter()
                .map(|p| {
                    (
                        format!(
                            "rank {} pid {}",
                            label_text(p.get("rank")),
                            label_text(p.get("pid"))
                        ),
                        list(p, "rows").to_vec(),
                    )
                })
                .collect();
            stacked_groups("time by resource", &groups, "resource", "time_ns", 8)
        }
        "collectives_ranks" => stacked_fields(
            "collective wait per rank",
            Axis::Duration,
            list(doc, "ranks"),
            |r| format!("rank {}", label_text(r.get("rank"))),
            &[("wait_ns", "wait"), ("transfer_part_ns", "transfer")],
        ),
        "kernel_stats" => {
            let groups: Vec<(String, Vec<Ordered>)> = list(doc, "ranks")
                .iter()
                .map(|r| {
                    (
                        format!("rank {}", label_text(r.get("rank"))),
                        list(r, "kernels").to_vec(),
                    )
                })
                .collect();
            stacked_groups("kernel time per rank", &groups, "name", "total_ns", 8)
        }
        _ => None,
    }
}

fn list<'a>(doc: &'a Ordered, key: &str) -> &'a [Ordered] {
    match doc.get(key) {
        Some(Ordered::List(items)) => items,
        _ => &[],
    }
}

/// A rank (or pid) as a group label (`?` when it is not a number or text).
pub fn label_text(v: Option<&Ordered>) -> String {
    match v {
        Some(Ordered::Int(i)) => i.to_string(),
        Some(Ordered::UInt(u)) => u.to_string(),
        Some(Ordered::Text(s)) => s.clone(),
        _ => "?".into(),
    }
}
