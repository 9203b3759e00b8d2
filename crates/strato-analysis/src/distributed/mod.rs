//! Distributed jobs: several ranks read together.
//!
//! Owns the collectives of a multi-rank job matched across ranks, with arrival, wait,
//! transfer, bandwidth and stragglers ([`collectives`]), and the clock offset of each rank
//! estimated from those matches ([`clock_align`]). The critical path ([`crate::paths`]) and
//! the multi-rank advice ([`crate::advise`]) read the matches from here.

pub mod clock_align;
pub mod collectives;
