//! Dependency paths: the critical path ([`critical_path`]), the longest chain of dependencies
//! through CPU operations, runtime calls, device work, stream order, synchronisations and,
//! across ranks, collectives (read from [`crate::distributed`]); and [`whatif`], the same
//! graph replayed and predicted with changes.

pub mod critical_path;
pub mod whatif;
