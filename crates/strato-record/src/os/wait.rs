//! The program's time runnable behind the launcher's own threads ([`CollectorWait`]): kept
//! apart because it is pure bookkeeping over switch, wakeup and migration times.

use std::collections::HashMap;

/// The time the program's threads wait for a CPU that a thread of the launcher (this
/// collector, the sample collector) holds: per CPU, since when a launcher thread runs there;
/// per runnable program thread, the CPU whose run queue it is on (the CPU it was preempted
/// on, a wakeup's `target_cpu`, a migration's `dest_cpu`). The wait is the overlap of the two,
/// settled at every change of either.
#[derive(Debug, Default)]
pub(super) struct CollectorWait {
    pub(super) launcher: std::collections::HashSet<i32>,
    on_cpu: HashMap<u32, i64>,
    /// Runnable program thread -> (its CPU, time settled up to).
    pub(super) queued: HashMap<i32, (u32, i64)>,
    /// Program thread -> ns waited so far.
    pub(super) waited: HashMap<i32, i64>,
}

impl CollectorWait {
    /// Re-reads the launcher's threads (`/proc/self/task`).
    pub(super) fn refresh_launcher(&mut self) {
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            self.launcher = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect();
        }
    }

    pub(super) fn is_launcher(&self, tid: i32) -> bool {
        self.launcher.contains(&tid)
    }

    /// Adds `tid`'s wait up to `ts`; returns its new total when it grew.
    fn settle(&mut self, tid: i32, ts: i64) -> Option<(i32, i64)> {
        let (cpu, at) = self.queued.get_mut(&tid)?;
        let from = self.on_cpu.get(cpu).map(|&l| l.max(*at));
        *at = ts;
        let add = from.map_or(0, |f| ts - f);
        if add <= 0 {
            return None;
        }
        let total = self.waited.entry(tid).or_insert(0);
        *total += add;
        Some((tid, *total))
    }

    /// Settles every thread queued on `cpu` (a launcher thread comes or goes there).
    fn settle_cpu(&mut self, cpu: u32, ts: i64) -> Vec<(i32, i64)> {
        let tids: Vec<i32> = self
            .queued
            .iter()
            .filter(|(_, q)| q.0 == cpu)
            .map(|(&t, _)| t)
            .collect();
        tids.into_iter()
            .filter_map(|t| self.settle(t, ts))
            .collect()
    }

    pub(super) fn launcher_in(&mut self, cpu: u32, ts: i64) -> Vec<(i32, i64)> {
        let grown = self.settle_cpu(cpu, ts);
        self.on_cpu.insert(cpu, ts);
        grown
    }

    pub(super) fn launcher_out(&mut self, cpu: u32, ts: i64) -> Vec<(i32, i64)> {
        let grown = self.settle_cpu(cpu, ts);
        self.on_cpu.remove(&cpu);
        grown
    }

    /// `tid` is runnable on `cpu` from `ts` (or moves there).
    pub(super) fn queue(&mut self, tid: i32, cpu: u32, ts: i64) -> Option<(i32, i64)> {
        let grown = self.settle(tid, ts);
        self.queued.insert(tid, (cpu, ts));
        grown
    }

    /// `tid` stops being runnable at `ts` (it runs, or blocks).
    pub(super) fn dequeue(&mut self, tid: i32, ts: i64) -> Option<(i32, i64)> {
        let grown = self.settle(tid, ts);
        self.queued.remove(&tid);
        grown
    }
}
