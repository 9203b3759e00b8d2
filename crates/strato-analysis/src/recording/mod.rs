//! Stratoscope's own recordings: the profiling-overhead correction ([`overhead`]: counting
//! book-keeping events, delta calibration, removing the calibrated cost where it occurred) and
//! the calibration around it ([`calibration`]: what a recording says about its processes,
//! repeated runs, the joint fit and its validation, `calibration.json`).

pub mod calibration;
pub mod overhead;
