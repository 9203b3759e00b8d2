//! Roofline (XSP): layers and kernels by arithmetic intensity against the device's roofs.

use crate::html::Html;
use crate::svg::fmt_si;
use crate::svg::scatter::{self, Point, Roof};
use crate::ReportInput;
use strato_analysis::cross_stack::layers::{LayersResult, Roofline as RooflineFigures};

use super::{analysis_or_close, cell_rows, close, close_empty, name, open};

pub(super) fn roofline(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "roofline",
        "Roofline",
        "Attained FLOP/s against arithmetic intensity (FLOP per byte of DRAM traffic) for \
         kernels (Nsight Compute metrics) and layers (FLOPs from the op's arguments), against \
         the device's memory and compute roofs (XSP).",
    );
    let report = match analysis_or_close(h, &input.layers) {
        Some(LayersResult::Layers(report)) => report,
        // The report asks for the layers by framework op, never the module tree.
        Some(LayersResult::Modules(_)) => {
            return close_empty(h, "The layers were not computed by framework op.")
        }
        None => return false,
    };
    let known = |r: &RooflineFigures| r.arithmetic_intensity.zip(r.attained_flops_per_s);
    let total_kernel: f64 = report
        .kernels
        .iter()
        .map(|k| k.duration.total_ns as f64)
        .sum::<f64>()
        .max(1.0);
    let total_layer: f64 = report
        .layers
        .iter()
        .map(|l| l.kernel_time_ns as f64)
        .sum::<f64>()
        .max(1.0);
    let mut points = Vec::new();
    let mut rows = Vec::new();
    let mut precisions = Vec::new();
    // (what, series, name, figures, share of the series' time): kernels, then layers.
    let kernels = report.kernels.iter().map(|k| {
        let share = k.duration.total_ns as f64 / total_kernel;
        ("kernel", 0, &k.name, &k.roofline, share)
    });
    let layers = report.layers.iter().map(|l| {
        let share = l.kernel_time_ns as f64 / total_layer;
        ("layer", 1, &l.name, &l.roofline, share)
    });
    for (what, series, n, figures, share) in kernels.chain(layers) {
        if let Some((ai, at)) = known(figures) {
            points.push(Point {
                label: format!("{what}: {}", name(n)),
                intensity: ai,
                attained: at,
                series,
                radius: 3.0 + 12.0 * share.sqrt(),
            });
            precisions.extend(figures.precision);
            rows.push(roof_row(what, n, figures));
        }
    }
    if points.is_empty() {
        let mut why = String::from(
            "No kernel or layer has both FLOPs and bytes: kernel figures come from Nsight Compute \
             metrics imported beside the timeline, layer FLOPs from PyTorch's `with_flops` or \
             the op's input shapes (record_shapes).",
        );
        for n in report.notes.iter().take(3) {
            why.push(' ');
            why.push_str(n);
        }
        return close_empty(h, &why);
    }
    precisions.sort_by_key(|p| p.as_str());
    precisions.dedup();
    let spec = report.device.as_ref().and_then(|d| d.spec.as_ref());
    let roofs: Vec<Roof> = spec
        .map(|s| {
            precisions
                .iter()
                .filter_map(|p| {
                    s.peak_flops(*p).map(|f| Roof {
                        label: p.as_str().to_owned(),
                        peak_flops: f,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    match report.device.as_ref() {
        Some(d) => h.elem(
            "p",
            &format!(
                "Device: {}{}",
                d.name.as_deref().unwrap_or("unnamed"),
                if d.spec.is_some() {
                    ""
                } else {
                    " (not in the device table: no roofs drawn)"
                }
            ),
        ),
        None => h.elem("p", "Device unknown: no roofs drawn."),
    };
    h.fragment(&scatter::draw(&scatter::Roofline {
        aria: "roofline".into(),
        points,
        series_names: vec!["kernels".into(), "layers".into()],
        bandwidth: spec.map(|s| s.bandwidth()),
        roofs,
    }));
    h.details_table(
        "Table: roofline points",
        &[
            "what",
            "name",
            "FLOPs",
            "bytes",
            "FLOP/byte",
            "FLOP/s",
            "bound",
            "% of roof",
        ],
        &[2, 3, 4, 5, 7],
        &cell_rows(rows),
    );
    close(h);
    true
}

fn roof_row(what: &str, n: &str, r: &RooflineFigures) -> Vec<String> {
    let o = |v: Option<f64>| v.map_or("unknown".to_owned(), fmt_si);
    vec![
        what.to_owned(),
        name(n),
        o(r.flops),
        o(r.bytes),
        o(r.arithmetic_intensity),
        o(r.attained_flops_per_s),
        r.bound
            .map_or("unknown".into(), |b| format!("{b:?}").to_lowercase()),
        r.roof_pct.map_or("unknown".into(), |p| format!("{p:.1}%")),
    ]
}
