//! Overview: the profile's sources, window, ranks and devices in cards.

use crate::html::Html;
use crate::svg::fmt_ns;
use crate::ReportInput;
use strato_analysis::device_time::util::UtilResult;

use super::{base_name, card, cell_rows, close, name, open};

pub(super) fn overview(h: &mut Html, input: &ReportInput) {
    let info = &input.info.info;
    open(h, "overview", "Overview", "");
    h.markup("<div class=\"cards\">");
    card(h, &fmt_ns(info.duration_ns as f64), "traced time");
    card(h, &info.spans.to_string(), "spans");
    // Counted as those that did something: a rank's trace often lists every GPU of its node
    // and names the GPUs' pids as processes.
    let processes = info.processes.iter().filter(|p| p.spans > 0).count();
    let working_devices = info.devices.iter().filter(|d| d.device_ops > 0).count();
    card(h, &processes.to_string(), "processes with spans");
    card(h, &working_devices.to_string(), "devices that ran work");
    if info.sources.len() > 1 {
        card(h, &info.sources.len().to_string(), "ranks");
    }
    let device_ops: usize = info.devices.iter().map(|d| d.device_ops).sum();
    card(h, &device_ops.to_string(), "device ops");
    if let Ok(UtilResult(u)) = &input.util {
        if let Some(d) = u.devices.iter().max_by_key(|d| d.busy_ns) {
            card(
                h,
                &format!("{:.1}%", d.true_busy_pct),
                "true device busy (busiest)",
            );
        }
    }
    h.markup("</div>");
    let rows: Vec<Vec<String>> = info
        .sources
        .iter()
        .map(|s| {
            vec![
                name(&s.source),
                s.format.clone(),
                s.rank.map_or("-".into(), |r| r.to_string()),
                s.host.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    h.table(
        &["source", "format", "rank", "host"],
        &[2],
        &cell_rows(rows),
    );
    let levels: Vec<Vec<String>> = info
        .spans_by_level
        .iter()
        .map(|(l, n)| vec![l.clone(), n.to_string()])
        .collect();
    h.details_table("Spans by stratum", &["stratum", "spans"], &[1], &levels);
    let devices: Vec<Vec<String>> = info
        .devices
        .iter()
        .filter(|d| d.device_ops > 0)
        .map(|d| {
            vec![
                base_name(&d.source).to_owned(),
                d.index.to_string(),
                d.name.clone().unwrap_or_else(|| "-".into()),
                d.streams.len().to_string(),
                d.device_ops.to_string(),
            ]
        })
        .collect();
    if !devices.is_empty() {
        h.details_table(
            &format!(
                "Devices that ran work ({} of {} listed by the sources)",
                working_devices,
                info.devices.len()
            ),
            &["source", "device", "name", "streams", "device ops"],
            &[1, 3, 4],
            &cell_rows(devices),
        );
    }
    close(h);
}
