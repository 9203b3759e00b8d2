//! The profile directory.
