//! Comparisons of two profiles: run to run per operation, stratum and kernel name ([`diff`],
//! from each side's breakdown and kernel statistics) and cross-hardware per framework op and
//! module ([`op_diff`], from each side's span hierarchy); both registered as one comparison,
//! `diff` ([`registration::Diff`]).

pub mod diff;
mod diff_text;
pub mod op_diff;
pub mod registration;

pub use registration::Diff;
