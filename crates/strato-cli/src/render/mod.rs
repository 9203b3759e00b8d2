//! Rendering shared by the commands, one module per output kind: [`measure`], [`record`]. The one set of unit and width formatters (durations, percentages, name fitting)
//! and the table writer are `strato_analysis::text`, shared with the analyses' own text.

pub(crate) mod measure;
pub(crate) mod record;

/// Writes `value` as pretty JSON and a newline.
pub(crate) fn write_json(
    out: &mut impl std::io::Write,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
