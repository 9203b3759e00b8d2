//! Device time: where each device's time went, read from the device ops alone (no CPU-side
//! attribution).
//!
//! Owns the per-rank temporal breakdown and its interval helpers ([`gpu_time`]: idle,
//! compute, non-compute, overlap, idle gaps; `merge`/`length`, which the other families
//! reuse), the busy fraction over time ([`busy`]), the utilization figure a sampler would
//! report beside the true busy time ([`util`]), kernel statistics and latencies
//! ([`kernel_stats`]), device memory with host<->device copies ([`memory`]) and the launch
//! queue of each stream ([`queue_length`]: ops launched and not started yet; the one module
//! here that also reads each op's launching call).

pub mod busy;
pub mod gpu_time;
pub mod kernel_stats;
pub mod memory;
pub mod queue_length;
pub mod util;
