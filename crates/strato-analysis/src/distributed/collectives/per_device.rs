//! One process driving several GPUs (an Nsight Systems export of a single-process multi-GPU
//! job: one file, one rank, NCCL kernels on devices 0 and 1) seen as one rank per device, so
//! that its collectives are matched across devices as across ranks.
//!
//! NCCL gives every device of a communicator its own NCCL rank, whatever process drives it; a
//! file, however, becomes one rank. [`split_multi_device_ranks`] makes the NCCL view: a rank
//! whose collective kernels run on two or more devices keeps its first device and gets one new
//! rank per other device. Moved to the new rank: that device's queues, its device entry, and
//! each CPU thread whose launches (correlated device ops) all went to that device. A thread
//! that launched on several devices stays with the original rank; the collective kernels it
//! launched on the other devices then have no CPU side (no launch, no CPU op: their kind comes
//! from the kernel name, their cause from the device alone). Ranks of one process share a
//! clock: the alignment finds no offset above its error and leaves them.

use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{Level, Rank, RankId, Trace, TrackKind};

use super::kinds::is_collective_kernel;

/// The trace with each multi-device rank split by device (see the module docs); `None` when
/// every rank's collective kernels run on at most one device (nothing to split).
pub fn split_multi_device_ranks(trace: &Trace) -> Option<Trace> {
    // Devices with collective kernels, per rank.
    let mut devices: Vec<Vec<i64>> = vec![Vec::new(); trace.ranks.len()];
    for span in &trace.spans {
        if span.level != Level::DeviceKernel {
            continue;
        }
        let track = trace.track(span.track);
        let TrackKind::DeviceQueue { device, .. } = track.kind else {
            continue;
        };
        if is_collective_kernel(trace.str(span.name)) {
            let list = &mut devices[track.rank.0 as usize];
            if !list.contains(&device) {
                list.push(device);
            }
        }
    }
    if devices.iter().all(|d| d.len() < 2) {
        return None;
    }
    let mut out = trace.clone();
    // (original rank, device) -> new rank, for every device after the first.
    let mut new_rank: FxHashMap<(RankId, i64), RankId> = FxHashMap::default();
    for (r, list) in devices.iter_mut().enumerate() {
        if list.len() < 2 {
            continue;
        }
        list.sort_unstable();
        let original = RankId(r as u32);
        let base = trace.ranks[r].clone();
        out.ranks[r].source = format!("{} (device {})", base.source, list[0]);
        for &device in &list[1..] {
            let id = out.add_rank(Rank {
                rank: None,
                source: format!("{} (device {device})", base.source),
                notes: Default::default(),
                ..base.clone()
            });
            new_rank.insert((original, device), id);
        }
    }
    // Devices launched on by each thread (through correlation ids).
    let mut device_of_correlation: FxHashMap<(RankId, u64), i64> = FxHashMap::default();
    for span in &trace.spans {
        let track = trace.track(span.track);
        if let (TrackKind::DeviceQueue { device, .. }, Some(c)) =
            (&track.kind, span.correlation.get())
        {
            if span.level.is_device_op() {
                device_of_correlation.insert((track.rank, c), *device);
            }
        }
    }
    let mut thread_devices: FxHashMap<u32, FxHashSet<i64>> = FxHashMap::default();
    for span in &trace.spans {
        let track = trace.track(span.track);
        if track.is_device() || devices[track.rank.0 as usize].len() < 2 {
            continue;
        }
        if let Some(c) = span.correlation.get() {
            if let Some(&d) = device_of_correlation.get(&(track.rank, c)) {
                thread_devices.entry(span.track.0).or_default().insert(d);
            }
        }
    }
    for (i, track) in out.tracks.iter_mut().enumerate() {
        let device = match track.kind {
            TrackKind::DeviceQueue { device, .. } => Some(device),
            _ => thread_devices
                .get(&(i as u32))
                .filter(|set| set.len() == 1)
                .and_then(|set| set.iter().next().copied()),
        };
        if let Some(&to) = device.and_then(|d| new_rank.get(&(track.rank, d))) {
            track.rank = to;
        }
    }
    for device in &mut out.devices {
        if let Some(to) = device
            .rank
            .and_then(|r| new_rank.get(&(r, device.index)).copied())
        {
            device.rank = Some(to);
        }
    }
    Some(out)
}
