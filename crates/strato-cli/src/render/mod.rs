//! Rendering shared by the commands, one module per output kind: [`breakdown`] (text, CSV),
//! [`layers`] (what the layer and roofline tables share), [`measure`], [`present`] (info and
//! gpu-time). [`units`] holds the one set of unit and width formatters (durations, percentages,
//! name fitting) every command uses.

pub(crate) mod breakdown;
pub(crate) mod layers;
pub(crate) mod measure;
pub(crate) mod present;
pub(crate) mod record;
pub(crate) mod units;

/// Writes `value` as pretty JSON and a newline.
pub(crate) fn write_json(
    out: &mut impl std::io::Write,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
