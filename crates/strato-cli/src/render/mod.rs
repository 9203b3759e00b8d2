//! Text rendering shared by the commands. [`units`] holds the one set of unit and width
//! formatters (durations, name fitting) every command uses.

pub(crate) mod units;
