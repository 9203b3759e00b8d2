//! Analyses.
