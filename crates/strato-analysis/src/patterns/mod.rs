//! Repeated patterns in the device's work: the iterations mined from each device's kernel
//! stream and measured ([`iterations`]), on the suffix structures over integer sequences they
//! need ([`suffix`]: suffix array, LCP, suffix-tree nodes, longest common extension).

pub mod iterations;
pub mod suffix;
