//! Comparisons of two profiles: run to run per operation, stratum and kernel name ([`diff`],
//! from each side's breakdown and kernel statistics) and cross-hardware per framework op and
//! module ([`op_diff`], from each side's span hierarchy).

pub mod diff;
pub mod op_diff;
