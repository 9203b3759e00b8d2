//! Performance models: what a device can do and what an op costs, independent of any trace's
//! timing.
//!
//! Owns the device table with its detection ([`devices`]: peak FLOP/s per precision, memory
//! and link bandwidth) and the per-op FLOPs and compulsory bytes ([`op_models`]). The tables
//! that apply them to a trace (layers and roofline, the per-op table) are cross-stack
//! analyses ([`crate::cross_stack`]): they need the ops each device op is attributed to.

pub mod devices;
pub mod op_models;
