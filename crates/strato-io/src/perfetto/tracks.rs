//! Track descriptors and what a track is in the trace model: a thread, a counter, a device
//! queue named as rocprofv3 or stratoscope's exporter name them, a lane of its parent, or a
//! custom track; and the names of devices those tracks carry.

use std::collections::HashMap;

use strato_trace::{Process, TrackKind};

use super::{wire, Descriptor, Reader};

impl<'a> Reader<'a> {
    pub(super) fn descriptor(&mut self, d: wire::TrackDescriptor) {
        let Some(uuid) = d.uuid else {
            return;
        };
        let name = d
            .name
            .or(d.static_name)
            .or_else(|| d.thread.as_ref().and_then(|t| t.thread_name.clone()))
            .or_else(|| d.process.as_ref().and_then(|p| p.process_name.clone()));
        let descriptor = Descriptor {
            parent: d.parent_uuid,
            name,
            process_pid: d.process.as_ref().and_then(|p| p.pid).map(i64::from),
            process_name: d.process.as_ref().and_then(|p| p.process_name.clone()),
            thread: d
                .thread
                .as_ref()
                .map(|t| (i64::from(t.pid.unwrap_or(0)), i64::from(t.tid.unwrap_or(0)))),
            counter_unit: d
                .counter
                .as_ref()
                .map(|c| c.unit_name.clone().unwrap_or_default()),
            sibling_rank: d.sibling_order_rank,
        };
        if let Some(pid) = descriptor.process_pid {
            if !self
                .trace
                .processes
                .iter()
                .any(|p| p.rank == self.rank && p.pid == pid)
            {
                self.trace.processes.push(Process {
                    rank: self.rank,
                    pid,
                    name: descriptor.process_name.clone(),
                    labels: None,
                });
            }
        }
        self.descriptors.insert(uuid, descriptor);
    }

    /// The name of a track and of its ancestors' processes.
    pub(super) fn process_of(&self, uuid: u64) -> Option<i64> {
        let mut at = Some(uuid);
        for _ in 0..64 {
            let d = self.descriptors.get(&at?)?;
            if let Some(pid) = d.process_pid.or(d.thread.map(|t| t.0)) {
                return Some(pid);
            }
            at = d.parent;
        }
        None
    }

    /// The model track kind and display name of a Perfetto track.
    pub(super) fn kind_of(
        &self,
        uuid: u64,
        resolved: &HashMap<u64, (TrackKind, Option<String>)>,
        taken: &mut HashMap<(i64, i64), u64>,
    ) -> (TrackKind, Option<String>) {
        let Some(d) = self.descriptors.get(&uuid) else {
            return (
                TrackKind::Custom {
                    group: "perfetto".into(),
                    name: if uuid == 0 {
                        "events without a track".into()
                    } else {
                        format!("track {uuid}")
                    },
                },
                None,
            );
        };
        let name = d.name.clone().unwrap_or_default();
        let parent = d.parent.and_then(|p| self.descriptors.get(&p));
        let parent_name = parent.and_then(|p| p.name.clone()).unwrap_or_default();
        if let Some((pid, tid)) = d.thread {
            return (TrackKind::Thread { pid, tid }, d.name.clone());
        }
        if let Some(unit) = &d.counter_unit {
            let device = parent.and_then(|p| device_of_name(p.name.as_deref().unwrap_or("")));
            return (
                TrackKind::Counter {
                    pid: if device.is_some() {
                        None
                    } else {
                        self.process_of(uuid)
                    },
                    device,
                    name: name.clone(),
                    unit: unit.clone(),
                },
                d.name.clone(),
            );
        }
        if d.process_pid.is_some() {
            return (
                TrackKind::Custom {
                    group: name.clone(),
                    name: "process".into(),
                },
                d.name.clone(),
            );
        }
        // rocprofv3's queue/stream tracks carry the device in their own name.
        if let Some((device, queue)) = rocprof_queue(&name) {
            return (
                TrackKind::DeviceQueue {
                    device,
                    queue: unique_queue(taken, device, queue, uuid),
                },
                d.name.clone(),
            );
        }
        if let Some(tid) = rocprof_thread(&name) {
            return (
                TrackKind::Thread {
                    pid: self.process_of(uuid).unwrap_or(0),
                    tid,
                },
                d.name.clone(),
            );
        }
        // A lane of a thread or queue track (the exporter's overlap and per-level children).
        if let Some(parent_uuid) = d.parent {
            if let Some((kind @ (TrackKind::Thread { .. } | TrackKind::DeviceQueue { .. }), n)) =
                resolved.get(&parent_uuid)
            {
                return (kind.clone(), n.clone());
            }
        }
        // A child of a device track: a queue numbered by its sibling rank (the exporter) or
        // by its name (`stream 7`, `queue 3`).
        if let Some(device) = device_of_name(&parent_name) {
            let queue = trailing_number(&name)
                .or(d.sibling_rank.map(i64::from))
                .unwrap_or(0);
            return (
                TrackKind::DeviceQueue {
                    device,
                    queue: unique_queue(taken, device, queue, uuid),
                },
                d.name.clone(),
            );
        }
        (
            TrackKind::Custom {
                group: if parent_name.is_empty() {
                    "perfetto".into()
                } else {
                    parent_name
                },
                name: if name.is_empty() {
                    format!("track {uuid}")
                } else {
                    name
                },
            },
            d.name.clone(),
        )
    }
}

/// A queue number not yet given to another Perfetto track of the same device.
pub(super) fn unique_queue(
    taken: &mut HashMap<(i64, i64), u64>,
    device: i64,
    queue: i64,
    uuid: u64,
) -> i64 {
    let mut q = queue;
    loop {
        match taken.get(&(device, q)) {
            Some(&owner) if owner != uuid => q = q.saturating_add(1 << 32),
            _ => {
                taken.insert((device, q), uuid);
                return q;
            }
        }
    }
}

/// The number in `[n]` after `label` in `name` (`AGENT [2]`).
pub(super) fn bracketed(name: &str, label: &str) -> Option<i64> {
    let at = name.find(label)? + label.len();
    let rest = name[at..].trim_start().strip_prefix('[')?;
    let end = rest.find(']')?;
    rest[..end].trim().parse().ok()
}

/// rocprofv3's device tracks: `COMPUTE AGENT [n] STREAM [s] (GPU)` (queue s),
/// `COMPUTE GPU [n] QUEUE [q] ...` (queue q), `COPY to AGENT [n] STREAM [s] ...` and
/// `COPY to AGENT [n] THREAD [t] ...` (copies: queue `-1 - s`, apart from compute queues).
pub(super) fn rocprof_queue(name: &str) -> Option<(i64, i64)> {
    let device = bracketed(name, "AGENT")
        .or_else(|| bracketed(name, "GPU"))
        .or_else(|| bracketed(name, "CPU"))?;
    let number = bracketed(name, "STREAM")
        .or_else(|| bracketed(name, "QUEUE"))
        .or_else(|| bracketed(name, "THREAD"))
        .unwrap_or(0);
    if name.starts_with("COPY") {
        Some((device, -1 - number))
    } else if name.starts_with("COMPUTE") {
        Some((device, number))
    } else {
        None
    }
}

/// rocprofv3's API thread tracks: `THREAD 1 (12345)`: tid 12345.
pub(super) fn rocprof_thread(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("THREAD ")?;
    let open = rest.find('(')?;
    let close = rest[open..].find(')')? + open;
    rest[open + 1..close].trim().parse().ok()
}

/// A device track as stratoscope's exporter names them: `GPU 3`, `<name> (device 3)`, either
/// with a ` [rank r]` suffix.
pub(super) fn device_of_name(name: &str) -> Option<i64> {
    let name = match name.rfind(" [rank ") {
        Some(at) if name.ends_with(']') => &name[..at],
        _ => name,
    };
    if let Some(n) = name.strip_prefix("GPU ") {
        return n.trim().parse().ok();
    }
    let inner = name.strip_suffix(')')?;
    let at = inner.rfind("(device ")?;
    inner[at + "(device ".len()..].trim().parse().ok()
}

/// The device name and index of a device track named `<name> (device n)` (stratoscope's
/// exporter, when the exported trace knew the device's name), with an optional ` [rank r]`.
pub(super) fn named_device(name: &str) -> Option<(&str, i64)> {
    let name = match name.rfind(" [rank ") {
        Some(at) if name.ends_with(']') => &name[..at],
        _ => name,
    };
    let inner = name.strip_suffix(')')?;
    let at = inner.rfind(" (device ")?;
    let index = inner[at + " (device ".len()..].trim().parse().ok()?;
    let device = inner[..at].trim();
    (!device.is_empty()).then_some((device, index))
}

/// The number a name ends with (`stream 7`: 7).
pub(super) fn trailing_number(name: &str) -> Option<i64> {
    let digits = name
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 {
        return None;
    }
    let (head, tail) = name.split_at(name.len() - digits);
    let negative = head.ends_with('-');
    let value: i64 = tail.parse().ok()?;
    Some(if negative { -value } else { value })
}
