//! Rendering shared by the commands, one module per output kind: [`measure`], [`record`]. The one set of unit and width formatters (durations, percentages, name fitting)
//! and the table writer are `strato_analysis::text`, shared with the analyses' own text.

pub(crate) mod measure;
pub(crate) mod record;
