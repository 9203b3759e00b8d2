//! Cross-stack attribution: device work tied to the CPU stack that issued it (processes,
//! threads, framework ops, annotations, Python modules and frames).
//!
//! Owns the span hierarchy ([`hierarchy`]: every span's parent, and its index that
//! [`crate::analyzed::Analyzed`] builds once), the operation-scoped CPU/GPU breakdown and
//! language transitions ([`breakdown`]), the layer/kernel/model tables and roofline
//! ([`layers`]), the nn.Module tree ([`modules`]), the per-op performance table ([`ops`],
//! which applies [`crate::models`] to the ops the hierarchy attributes device time to), CPU
//! samples joined with operations and Python stacks ([`samples`]) and the ops replayed by a
//! CUDA/HIP graph mapped back to the ops that captured them ([`graphs`]). The classification
//! these share is the root's [`crate::scope`].

pub mod breakdown;
pub mod graphs;
pub mod hierarchy;
pub mod layers;
pub mod modules;
pub mod ops;
pub mod samples;
