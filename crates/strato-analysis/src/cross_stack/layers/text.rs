//! Text shared by the layer tables and the roofline: the device line, notes, roofline cells.

use std::io::{Result, Write};

use super::{LayersReport, Roofline};
use crate::text::units::opt;

/// The device the rooflines are against, and its table entry.
pub fn device_line(out: &mut dyn Write, report: &LayersReport) -> Result<()> {
    match &report.device {
        Some(d) => {
            let spec = d
                .spec
                .as_ref()
                .map_or("not in the device table".to_owned(), |s| {
                    format!(
                        "{}: fp32 {} TFLOP/s, {} GB/s, fp32 ridge {}",
                        s.name,
                        s.fp32_tflops.map_or("unknown".into(), |v| v.to_string()),
                        s.memory_bandwidth_gbs,
                        opt(
                            s.ridge(crate::models::devices::Precision::Fp32),
                            |r| format!("{r:.1} FLOP/B")
                        )
                    )
                });
            writeln!(
                out,
                "device: rank {} device {} ({}) — {}",
                d.rank,
                d.device,
                d.name.as_deref().unwrap_or("unnamed"),
                spec
            )?;
        }
        None => writeln!(out, "device: none")?,
    }
    Ok(())
}

/// One `note:` line per note of the report.
pub fn notes(out: &mut dyn Write, report: &LayersReport) -> Result<()> {
    for n in &report.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}

/// GFLOP, FLOP/B, TFLOP/s and bound cells of a roofline (`unknown` where missing).
pub fn roof_cells(r: &Roofline) -> Vec<String> {
    vec![
        opt(r.flops, |f| format!("{:.3}", f / 1e9)),
        opt(r.arithmetic_intensity, |a| format!("{a:.2}")),
        opt(r.attained_flops_per_s, |f| format!("{:.3}", f / 1e12)),
        r.bound
            .map_or("unknown".into(), |b| format!("{b:?}").to_lowercase()),
    ]
}
