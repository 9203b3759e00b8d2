//! Synthetic traces for tests (feature `test-support`): one small builder instead of `Rank {..}`
//! and `Span {..}` literals copied across crates.
//!
//! The builder writes the trace model directly, so a test states only what it is about
//! (tracks, spans with level, name and times, flows, counters) and gets exact answers by
//! construction. It does not validate: tests of invalid traces build them the same way and call
//! [`Trace::validate`] themselves.
//!
//! ```
//! use strato_trace::testing::TraceBuilder;
//! use strato_trace::Level;
//!
//! let mut b = TraceBuilder::new();
//! let cpu = b.thread(1, 1);
//! let gpu = b.queue(0, 7);
//! let launch = b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20).correlation(1).id();
//! let kernel = b.span(gpu, Level::DeviceKernel, "gemm", 25, 65).correlation(1).id();
//! b.flow(1, "ac2g", Some((cpu, 10, Some(launch))), Some((gpu, 25, Some(kernel))));
//! let trace = b.build();
//! assert_eq!(trace.spans.len(), 2);
//! assert!(trace.validate().is_ok());
//! ```

use crate::OptionalId;
use crate::{
    CounterSample, Flow, FlowEnd, ImportNotes, Instant, Level, Ns, Rank, RankId, SourceFormat,
    Span, SpanId, Trace, TrackId, TrackIndexHandle, TrackKind,
};

/// Builds a [`Trace`] piece by piece. Tracks belong to the current rank: the last one added
/// with [`TraceBuilder::rank`], or a default one (format `"test"`) created on first use.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
    index: TrackIndexHandle,
    current: Option<RankId>,
}

/// The span just added, to set its optional fields; [`SpanMut::id`] gives its id.
#[derive(Debug)]
pub struct SpanMut<'a> {
    trace: &'a mut Trace,
    id: SpanId,
}

/// A rank with the given number and source, format `"test"`, nothing else known.
pub fn rank(rank: Option<i64>, source: &str) -> Rank {
    Rank {
        rank,
        world_size: None,
        source: source.to_owned(),
        format: SourceFormat::Other("test".to_owned()),
        host: None,
        metadata: crate::metadata::SourceMetadata::None,
        notes: ImportNotes::default(),
    }
}

/// Two ranks of one step (`step`, 0..1000 ns on each rank's thread), each launching one
/// all-reduce kernel (correlation 1) and waiting for the stream (`cudaStreamSynchronize`,
/// correlation 2, and its `Stream Sync` on the device); rank 1 arrives late, after a slow CPU op
/// (5..600): rank 0's kernel runs 30..900, rank 1's 620..905. The collectives analysis matches
/// the two kernels (by kind and order), and rank 0's critical path then waits for rank 1.
/// Returns the trace and the kernels, rank 0's then rank 1's.
pub fn late_rank_at_an_all_reduce() -> (Trace, [SpanId; 2]) {
    let mut b = TraceBuilder::new();
    let mut kernels = [SpanId(0); 2];
    for (r, slow_end, launch, kernel, sync) in [
        (0, None, (10, 20), (30, 900), (25, 950)),
        (1, Some(600), (600, 610), (620, 905), (615, 960)),
    ] {
        b.rank(rank(Some(r), &format!("rank{r}")));
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Backend, "step", 0, 1000);
        if let Some(end) = slow_end {
            b.span(cpu, Level::Backend, "slow", 5, end);
        }
        kernels[r as usize] = b.launched_all_reduce(cpu, gpu, launch, kernel, sync);
    }
    (b.build(), kernels)
}

impl TraceBuilder {
    /// A rank's all-reduce: launched from `cpu` at `launch` (`cudaLaunchKernel`, correlation
    /// 1), the NCCL kernel on `gpu` (`kernel`: its extent), which the host waits for at `sync`
    /// (`cudaStreamSynchronize`, correlation 2, with its `Stream Sync` on the device, the last 5
    /// ns of the kernel). Returns the kernel.
    pub fn launched_all_reduce(
        &mut self,
        cpu: TrackId,
        gpu: TrackId,
        launch: (Ns, Ns),
        kernel: (Ns, Ns),
        sync: (Ns, Ns),
    ) -> SpanId {
        let api = Level::AcceleratorApi;
        self.span(cpu, api, "cudaLaunchKernel", launch.0, launch.1)
            .correlation(1);
        self.span(cpu, api, "cudaStreamSynchronize", sync.0, sync.1)
            .correlation(2);
        let nccl = "ncclKernel_AllReduce_RING_LL_Sum_float";
        let id = (self.span(gpu, Level::DeviceKernel, nccl, kernel.0, kernel.1))
            .correlation(1)
            .id();
        self.span(
            gpu,
            Level::DeviceSync,
            "Stream Sync",
            kernel.1 - 5,
            kernel.1,
        )
        .correlation(2);
        id
    }

    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `rank` and makes it the rank of the tracks that follow.
    pub fn rank(&mut self, rank: Rank) -> RankId {
        let id = self.trace.add_rank(rank);
        self.current = Some(id);
        id
    }

    /// The current rank, created (`rank(None, "test")`) when there is none.
    pub fn current_rank(&mut self) -> RankId {
        match self.current {
            Some(id) => id,
            None => self.rank(rank(None, "test")),
        }
    }

    /// The track of `kind` on the current rank (one per kind and rank).
    pub fn track(&mut self, kind: TrackKind) -> TrackId {
        let rank = self.current_rank();
        self.trace.track_for(&mut self.index, rank, kind)
    }

    /// CPU thread `tid` of process `pid`.
    pub fn thread(&mut self, pid: i64, tid: i64) -> TrackId {
        self.track(TrackKind::Thread { pid, tid })
    }

    /// Queue (stream) `queue` of device `device`.
    pub fn queue(&mut self, device: i64, queue: i64) -> TrackId {
        self.track(TrackKind::DeviceQueue { device, queue })
    }

    /// A counter track named `name`, unit `unit`.
    pub fn counter_track(
        &mut self,
        pid: Option<i64>,
        device: Option<i64>,
        name: &str,
        unit: &str,
    ) -> TrackId {
        self.track(TrackKind::Counter {
            pid,
            device,
            name: name.to_owned(),
            unit: unit.to_owned(),
        })
    }

    /// Adds the span `[start, end)` on `track`; its category is `"test"` until set.
    pub fn span(
        &mut self,
        track: TrackId,
        level: Level,
        name: &str,
        start: Ns,
        end: Ns,
    ) -> SpanMut<'_> {
        let name = self.trace.intern(name);
        let category = self.trace.intern("test");
        self.trace.spans.push(Span {
            track,
            start,
            end,
            name,
            category,
            level,
            correlation: OptionalId::NONE,
            external_id: OptionalId::NONE,
            args: None,
        });
        let id = SpanId((self.trace.spans.len() - 1) as u32);
        SpanMut {
            trace: &mut self.trace,
            id,
        }
    }

    /// Adds an instant at `ts` on `track` in `category`.
    pub fn instant(&mut self, track: TrackId, level: Level, category: &str, name: &str, ts: Ns) {
        let name = self.trace.intern(name);
        let category = self.trace.intern(category);
        self.trace.instants.push(Instant {
            track,
            ts,
            name,
            category,
            level,
            args: None,
        });
    }

    /// Adds a sample of a counter track.
    pub fn counter(&mut self, track: TrackId, ts: Ns, value: f64) {
        self.trace.counters.push(CounterSample { track, ts, value });
    }

    /// Adds a flow `id` from `(track, ts, span)` to `(track, ts, span)`; either end may be
    /// missing, as in real files.
    pub fn flow(
        &mut self,
        id: u64,
        category: &str,
        from: Option<(TrackId, Ns, Option<SpanId>)>,
        to: Option<(TrackId, Ns, Option<SpanId>)>,
    ) {
        let end = |e: Option<(TrackId, Ns, Option<SpanId>)>| {
            e.map(|(track, ts, span)| FlowEnd { track, ts, span })
        };
        let category = self.trace.intern(category);
        self.trace.flows.push(Flow {
            id,
            category,
            from: end(from),
            to: end(to),
        });
    }

    /// The trace so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The trace so far, for what the builder has no method for.
    pub fn trace_mut(&mut self) -> &mut Trace {
        &mut self.trace
    }

    /// The trace, not validated.
    pub fn build(self) -> Trace {
        self.trace
    }
}

impl SpanMut<'_> {
    fn span(&mut self) -> &mut Span {
        &mut self.trace.spans[self.id.0 as usize]
    }

    /// Sets the source category.
    pub fn category(mut self, category: &str) -> Self {
        let category = self.trace.intern(category);
        self.span().category = category;
        self
    }

    /// Sets the launch correlation id.
    pub fn correlation(mut self, correlation: u64) -> Self {
        self.span().correlation = Some(correlation).into();
        self
    }

    /// Sets the external id (framework op -> API call link).
    pub fn external_id(mut self, external_id: u64) -> Self {
        self.span().external_id = Some(external_id).into();
        self
    }

    /// Sets the attributes (a JSON object text).
    pub fn args(mut self, json_object: &str) -> Self {
        let args = self.trace.add_args(json_object);
        self.span().args = Some(args);
        self
    }

    /// The span's id.
    pub fn id(&self) -> SpanId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_what_it_is_told() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 2);
        assert_eq!(b.thread(1, 2), cpu);
        let gpu = b.queue(0, 7);
        let mem = b.counter_track(None, Some(0), "mem", "bytes");
        let s = b
            .span(gpu, Level::DeviceKernel, "k", 5, 9)
            .category("kernel")
            .correlation(3)
            .external_id(4)
            .args(r#"{"a": 1}"#)
            .id();
        b.instant(cpu, Level::Other, "test", "mark", 6);
        b.counter(mem, 7, 1.5);
        b.flow(3, "ac2g", Some((cpu, 4, None)), Some((gpu, 5, Some(s))));
        let second = b.rank(rank(Some(1), "r1"));
        let other = b.thread(1, 2);
        let t = b.build();
        assert_ne!(other, cpu);
        assert_eq!(t.tracks[other.0 as usize].rank, second);
        assert_eq!(t.ranks.len(), 2);
        let span = &t.spans[s.0 as usize];
        assert_eq!((span.start, span.end, span.duration()), (5, 9, 4));
        assert_eq!((t.str(span.name), t.str(span.category)), ("k", "kernel"));
        assert_eq!(
            (span.correlation.get(), span.external_id.get()),
            (Some(3), Some(4))
        );
        assert_eq!(t.args_text(span.args).as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(
            (t.instants.len(), t.counters.len(), t.flows.len()),
            (1, 1, 1)
        );
        assert!(t.validate().is_ok());
    }
}
