//! [`IterationsStream`]: `iterations` gathered batch by batch, so that `strato iterations` on
//! one file or stored profile never holds the trace's spans (issue 28: the whole-trace
//! analysis held every span with its scopes and the span hierarchy, 0.42x the file on a
//! 1.4 GB trace).
//!
//! Kept while the input streams: per span, what the hierarchy's sweep reads (24 bytes,
//! [`Extent`]); per device-queue span, its correlation (8 bytes); per device op of a queue,
//! what the miner reads (40 bytes, [`DevOp`]); per thread span with a correlation, a candidate
//! launch (32 bytes, [`Candidate`]); the host-to-device copies; per span with a lines-up key
//! (an annotation or `nn.Module` frame), its key's number; a few counts per rank and process.
//! When the input is read: the launches are chosen from the candidates into a sorted list
//! ([`Launches`]); the main streams are picked and the other queues dropped; every track is
//! sorted and swept as [`crate::cross_stack::hierarchy::index::Hierarchy::build`] sweeps it
//! (host tracks first, each dropped once swept), keeping of each span only the nearest keyed
//! span above it and of each launch the operation its device ops belong to: the chains
//! [`super::attach_lines_up`] reads, made of keyed spans alone. Then each main stream is mined
//! as [`super::iterations`] mines it. The rules are the whole-trace ones to the span; the
//! tests hold the two to the same result on every shared file, in batches of every size, and
//! on a constructed trace fed one event at a time.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, Trace, TrackKind};

use super::lines_up::{name_loops, KeyedStream, LinesUpKeys};
use super::measure::Op;
use super::registration::IterationsResult;
use super::report::{
    main_streams, mine_stream, owning_pid, IterationsReport, MainStream, StreamAt,
};
use super::steps::{check_with_windows, windows_of_steps};
use super::IterationOptions;
use crate::chunked::Chunked;
use crate::cross_stack::hierarchy::index::nest;
use crate::cross_stack::hierarchy::stream::{
    Extent, OperationOrders, HAS_CORRELATION, THREAD_STATE,
};
use crate::device_time::memory::{arg_i64, copy_direction, CopyDirection};
use crate::scope::{
    is_device_work, is_step_name, operation_in, sort_launch_candidates, thread_score, OpSegment,
    ProcessTracks,
};

// The sizes the docs give (docs/analyses/iterations.md, "Cost").
const _: () = assert!(std::mem::size_of::<DevOp>() == 40);
const _: () = assert!(std::mem::size_of::<Launch>() == 32);
const _: () = assert!(std::mem::size_of::<Candidate>() == 32);

/// [`DevOp::bits`]: a kernel (beside [`HAS_CORRELATION`]).
const KERNEL: u8 = 8;

/// No keyed span: the end of a chain.
const NONE: u32 = u32::MAX;

/// The spans of one track, in trace order.
#[derive(Debug, Default)]
struct TrackSpans {
    spans: Chunked<Extent>,
    /// On a device track: the correlation of each span (0 without one), beside `spans`.
    correlations: Chunked<u64>,
}

/// A track's spans gathered for its sweep.
struct SweptTrack {
    spans: Vec<Extent>,
    correlations: Vec<u64>,
}

impl TrackSpans {
    fn gathered(self) -> SweptTrack {
        SweptTrack {
            spans: self.spans.into_vec(),
            correlations: self.correlations.into_vec(),
        }
    }
}

/// A device op of a queue (not a device-side sync), as the miner reads it (40 bytes).
#[derive(Debug, Clone, Copy)]
struct DevOp {
    start: Ns,
    end: Ns,
    /// Its correlation (0 without one: [`HAS_CORRELATION`]).
    correlation: u64,
    name: u32,
    track: u32,
    /// Its position among its track's spans.
    at: u32,
    bits: u8,
}

impl DevOp {
    fn correlation(&self) -> Option<u64> {
        (self.bits & HAS_CORRELATION != 0).then_some(self.correlation)
    }

    fn op(&self) -> Op {
        Op {
            start: self.start,
            end: self.end,
            name: self.name,
            correlation: self.correlation(),
            kernel: self.bits & KERNEL != 0,
        }
    }
}

/// Host-to-device copies: start, end, bytes.
type Copies = Vec<(Ns, Ns, Option<i64>)>;

/// A main stream's device ops, gathered when the input is read, in trace order.
struct MainQueue {
    at: StreamAt,
    ops: Vec<DevOp>,
}

/// A thread span with a correlation, as met (32 bytes): a candidate launch.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    correlation: u64,
    pid: i64,
    index: u32,
    rank: u32,
    /// A runtime call.
    api: bool,
}

/// The launch of a (rank, correlation): the first runtime call, else the first thread span
/// ([`crate::scope::Scopes::build`]'s choice); after the thread sweeps, the nearest keyed span
/// on its chain (itself included) and the operation its device ops belong to. Beside it, the
/// pid of the correlation's last runtime call (the process a main stream's ops vote for).
/// 32 bytes.
#[derive(Debug, Clone, Copy)]
struct Launch {
    correlation: u64,
    /// The last runtime call's pid ([`i64::MIN`]: none).
    api_pid: i64,
    rank: u32,
    index: u32,
    up: u32,
    /// [`NONE`]: no operation (or no process).
    operation: u32,
}

/// The launches, sorted by (rank, correlation), and their positions by span index: two
/// exact-size lists where a hash map would hold twice the room.
#[derive(Debug, Default)]
struct Launches {
    by_key: Vec<Launch>,
    by_index: Vec<u32>,
}

impl Launches {
    /// Chooses each (rank, correlation)'s launch among `candidates` (in trace order), with
    /// the pid of its last runtime call.
    fn choose(mut candidates: Vec<Candidate>) -> Launches {
        sort_launch_candidates(&mut candidates, |c| (c.rank, c.correlation, c.api, c.index));
        let by_key: Vec<Launch> = (candidates
            .chunk_by(|a, b| (a.rank, a.correlation) == (b.rank, b.correlation)))
        .map(|group| Launch {
            correlation: group[0].correlation,
            // The runtime calls come first, in trace order.
            api_pid: (group.iter().take_while(|c| c.api).last()).map_or(i64::MIN, |c| c.pid),
            rank: group[0].rank,
            index: group[0].index,
            up: NONE,
            operation: NONE,
        })
        .collect();
        drop(candidates);
        let mut by_index: Vec<u32> = (0..by_key.len() as u32).collect();
        by_index.sort_unstable_by_key(|&k| by_key[k as usize].index);
        Launches { by_key, by_index }
    }

    fn get(&self, rank: u32, correlation: u64) -> Option<&Launch> {
        let at = (self.by_key)
            .binary_search_by_key(&(rank, correlation), |l| (l.rank, l.correlation))
            .ok()?;
        Some(&self.by_key[at])
    }

    /// The launch that is span `index`, if it is one.
    fn at_index_mut(&mut self, index: u32) -> Option<&mut Launch> {
        let by_key = &self.by_key;
        let at = (self.by_index)
            .binary_search_by_key(&index, |&k| by_key[k as usize].index)
            .ok()?;
        Some(&mut self.by_key[self.by_index[at] as usize])
    }
}

/// A span with a lines-up key: its key's number and, after the sweeps, the next keyed span
/// up its chain.
#[derive(Debug, Clone, Copy)]
struct Keyed {
    key: u32,
    next: u32,
}

/// What `--check-steps` reads of one rank: its `ProfilerStep#N` host spans and its host
/// runtime calls with a correlation (start, correlation), in trace order.
#[derive(Debug, Default)]
struct RankSteps {
    steps: Vec<(Ns, Ns, String)>,
    api: Vec<(Ns, u64)>,
}

/// `iterations` gathered batch by batch ([`IterationsStream::add`], then
/// [`IterationsStream::finish`]).
#[derive(Debug)]
pub struct IterationsStream {
    options: IterationOptions,
    /// Check the first loops against the steps (`--check-steps`).
    check_steps: bool,
    /// Spans read so far: the next span's index in the whole trace.
    seen: u64,
    tracks: Vec<TrackSpans>,
    operation_orders: OperationOrders,
    /// Device ops per (rank index, device, queue), queue -1 apart, in trace order.
    queues: FxHashMap<(u32, i64, i64), Chunked<DevOp>>,
    /// Kernels per (rank index, device, queue) with a device op (syncs included).
    kernels: FxHashMap<(u32, i64, i64), usize>,
    /// Host-to-device copies per (rank index, device), any queue: start, end, bytes.
    h2d: FxHashMap<(u32, i64), Copies>,
    /// The thread spans with a correlation, in trace order.
    candidates: Chunked<Candidate>,
    /// Chosen among the candidates when the input is read.
    launches: Launches,
    /// Thread spans per (rank index, pid).
    spans_per_pid: FxHashMap<(u32, i64), usize>,
    /// `ProfilerStep#N` spans off device queues, per rank index.
    steps_per_rank: FxHashMap<u32, usize>,
    keys: LinesUpKeys,
    /// Keyed spans by index.
    keyed: FxHashMap<u32, Keyed>,
    /// Per rank index, with `check_steps`.
    rank_steps: FxHashMap<u32, RankSteps>,
}

impl IterationsStream {
    pub fn new(options: IterationOptions, check_steps: bool) -> IterationsStream {
        IterationsStream {
            options,
            check_steps,
            seen: 0,
            tracks: Vec::new(),
            operation_orders: OperationOrders::default(),
            queues: FxHashMap::default(),
            kernels: FxHashMap::default(),
            h2d: FxHashMap::default(),
            candidates: Chunked::default(),
            launches: Launches::default(),
            spans_per_pid: FxHashMap::default(),
            steps_per_rank: FxHashMap::default(),
            keys: LinesUpKeys::default(),
            keyed: FxHashMap::default(),
            rank_steps: FxHashMap::default(),
        }
    }

    /// Takes one batch of events (`batch` holds every table read so far).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let index = self.seen as u32;
            self.seen += 1;
            let t = span.track.0 as usize;
            if self.tracks.len() <= t {
                self.tracks.resize_with(t + 1, TrackSpans::default);
            }
            let track = batch.track(span.track);
            let rank = track.rank.0;
            let spans = &mut self.tracks[t];
            let at = spans.spans.len() as u32;
            let extent = Extent::of(batch, span, index);
            self.operation_orders.keep(&extent, span);
            let bits = extent.bits;
            spans.spans.push(extent);
            if let Some(key) = self.keys.number(batch, span) {
                self.keyed.insert(index, Keyed { key, next: NONE });
            }
            if !matches!(track.kind, TrackKind::DeviceQueue { .. })
                && is_step_name(batch.str(span.name))
            {
                *self.steps_per_rank.entry(rank).or_default() += 1;
            }
            if track.is_device() {
                spans.correlations.push(span.correlation.get().unwrap_or(0));
            } else if self.check_steps && batch.str(span.name).starts_with("ProfilerStep#") {
                let name = batch.str(span.name).to_owned();
                (self.rank_steps.entry(rank).or_default().steps).push((span.start, span.end, name));
            }
            match track.kind {
                TrackKind::Thread { pid, .. } => {
                    *self.spans_per_pid.entry((rank, pid)).or_insert(0) += 1;
                    let Some(c) = span.correlation.get() else {
                        continue;
                    };
                    self.candidates.push(Candidate {
                        correlation: c,
                        pid,
                        index,
                        rank,
                        api: span.level == Level::AcceleratorApi,
                    });
                }
                TrackKind::DeviceQueue { device, queue } => {
                    if !span.level.is_device_op() {
                        continue;
                    }
                    if span.level == Level::DeviceCopy
                        && copy_direction(batch.str(span.name)) == CopyDirection::HostToDevice
                    {
                        let args = batch.args_text(span.args);
                        let bytes = arg_i64(args.as_deref(), &["bytes", "Bytes"]);
                        let copies = self.h2d.entry((rank, device)).or_default();
                        copies.push((span.start, span.end, bytes));
                    }
                    if queue == -1 {
                        continue;
                    }
                    let kernel = span.level == Level::DeviceKernel;
                    *self.kernels.entry((rank, device, queue)).or_insert(0) += usize::from(kernel);
                    if span.level == Level::DeviceSync {
                        continue;
                    }
                    let kernel_bit = if kernel { KERNEL } else { 0 };
                    self.queues
                        .entry((rank, device, queue))
                        .or_default()
                        .push(DevOp {
                            start: span.start,
                            end: span.end,
                            correlation: span.correlation.get().unwrap_or(0),
                            name: span.name.0,
                            track: span.track.0,
                            at,
                            bits: (bits & HAS_CORRELATION) | kernel_bit,
                        });
                }
                _ => {}
            }
            if self.check_steps && !track.is_device() && span.level == Level::AcceleratorApi {
                if let Some(c) = span.correlation.get() {
                    (self.rank_steps.entry(rank).or_default().api).push((span.start, c));
                }
            }
        }
    }

    /// The result once the input is read (`trace`: every table but the events).
    pub fn finish(mut self, trace: &Trace) -> IterationsResult {
        // The main streams; the other queues are dropped.
        let main = main_streams(&self.kernels);
        let mut queues = std::mem::take(&mut self.queues);
        let streams: Vec<MainQueue> = (main.into_iter())
            .map(|at| {
                let ops = queues.remove(&at.id()).unwrap_or_default();
                MainQueue {
                    at,
                    ops: ops.into_vec(),
                }
            })
            .collect();
        drop(queues);
        // Each main stream's keyed ops and owning pid, and nothing else of the spans.
        let keyed = self.keyed_streams(trace, &streams);
        let pids: Vec<Option<i64>> = (streams.iter())
            .map(|main| {
                let (launches, rank) = (&self.launches, main.at.rank.0);
                owning_pid(
                    main.at.rank,
                    main.ops.iter().filter_map(DevOp::correlation),
                    |c| Some(launches.get(rank, c)?.api_pid).filter(|&p| p != i64::MIN),
                    &self.spans_per_pid,
                )
            })
            .collect();
        drop(std::mem::take(&mut self.launches));
        drop(std::mem::take(&mut self.keyed));
        let mut report = IterationsReport {
            sequences: Vec::new(),
            not_found: Vec::new(),
        };
        for (main, pid) in streams.iter().zip(pids) {
            let mut ops: Vec<Op> = main.ops.iter().map(DevOp::op).collect();
            ops.sort_by_key(|o| (o.start, o.end));
            let mut h2d = (self.h2d.remove(&(main.at.rank.0, main.at.device))).unwrap_or_default();
            h2d.sort_by_key(|c| c.0);
            let mined = MainStream {
                at: main.at,
                ops,
                h2d,
                pid,
            };
            mine_stream(trace, mined, &self.options, &mut report);
        }
        drop(std::mem::take(&mut self.h2d));
        name_loops(&mut report, &keyed, &self.keys.names, &self.steps_per_rank);
        drop(keyed);
        let checks = (report.sequences.iter())
            .map(|s| {
                if !self.check_steps || s.loop_index != 0 {
                    return None;
                }
                let id = (s.rank_index, s.device, s.stream);
                let same: Vec<_> = (report.sequences.iter())
                    .filter(|o| (o.rank_index, o.device, o.stream) == id)
                    .collect();
                let of_rank = self.rank_steps.get(&s.rank_index);
                let steps = of_rank.map(|r| r.steps.clone()).unwrap_or_default();
                let api = of_rank.iter().flat_map(|r| r.api.iter().copied());
                let ops = (streams.iter())
                    .filter(|m| m.at.id() == id)
                    .flat_map(|m| m.ops.iter())
                    .map(|o| (o.start, o.end, o.correlation()));
                check_with_windows(windows_of_steps(steps, api, ops), &same)
            })
            .collect();
        IterationsResult { report, checks }
    }

    /// The keyed ops of each main stream: every track swept as the hierarchy sweeps it (host tracks first, so launches know
    /// their chains, each track dropped once swept), each op given the keyed spans of its own
    /// chain (from its parent up) and of its operation's chain.
    fn keyed_streams(
        &mut self,
        trace: &Trace,
        streams: &[MainQueue],
    ) -> FxHashMap<(u32, i64, i64), KeyedStream> {
        let mut tracks = std::mem::take(&mut self.tracks);
        tracks.resize_with(trace.tracks.len().max(tracks.len()), TrackSpans::default);
        let scopes = Operations::build(trace, &tracks, &self.operation_orders);
        self.launches = Launches::choose(std::mem::take(&mut self.candidates).into_vec());
        let is_device = |t: usize| trace.tracks.get(t).is_some_and(|track| track.is_device());
        let mut stack = Vec::new();
        for t in (0..tracks.len()).filter(|&t| !is_device(t)) {
            let spans = std::mem::take(&mut tracks[t]).gathered().spans;
            self.host_track(t, spans, &scopes, &mut stack);
        }
        // Per device track: the nearest keyed span above each of its spans, by position, and
        // each span's index.
        let mut parent_up: Vec<Vec<(u32, u32)>> = vec![Vec::new(); tracks.len()];
        for t in (0..tracks.len()).filter(|&t| is_device(t)) {
            let swept = std::mem::take(&mut tracks[t]).gathered();
            parent_up[t] = self.device_track(trace, t, swept, &mut stack);
        }
        drop(tracks);
        let keyed = &self.keyed;
        let chain = |mut c: u32| {
            std::iter::from_fn(move || {
                let keyed = keyed.get(&c)?;
                let at = (keyed.key, c);
                c = keyed.next;
                Some(at)
            })
        };
        let mut out = FxHashMap::default();
        for main in streams {
            let mut sorted: Vec<(Ns, u32, &DevOp)> = (main.ops.iter())
                .map(|o| (o.start, parent_up[o.track as usize][o.at as usize].1, o))
                .collect();
            sorted.sort_unstable_by_key(|s| (s.0, s.1));
            let mut keyed_ops = KeyedStream::default();
            for (start, _, op) in sorted {
                let own = parent_up[op.track as usize][op.at as usize].0;
                let operation = scopes.operation_of(trace, &self.launches, op);
                keyed_ops.push(
                    start,
                    chain(own).chain(operation.into_iter().flat_map(chain)),
                );
            }
            out.insert(main.at.id(), keyed_ops);
        }
        out
    }

    /// Sweeps host track `t` (`spans`: its spans, in trace order): the next keyed span up
    /// from each keyed span, and the nearest keyed span of each launch on it.
    fn host_track(
        &mut self,
        t: usize,
        mut spans: Vec<Extent>,
        scopes: &Operations,
        stack: &mut Vec<usize>,
    ) {
        let (launches, keyed) = (&mut self.launches, &mut self.keyed);
        let mut launched = |s: &Extent, up: u32| {
            if s.bits & HAS_CORRELATION == 0 {
                return;
            }
            if let Some(launch) = launches.at_index_mut(s.index) {
                launch.up = up;
                launch.operation = scopes.of_launch(t, s.start).unwrap_or(NONE);
            }
        };
        // Thread states take no part: no parent, no span's parent.
        for s in spans.iter().filter(|s| s.bits & THREAD_STATE != 0) {
            launched(
                s,
                if keyed.contains_key(&s.index) {
                    s.index
                } else {
                    NONE
                },
            );
        }
        spans.retain(|s| s.bits & THREAD_STATE == 0);
        spans.sort_unstable_by_key(Extent::sweep_key);
        let mut up: Vec<u32> = vec![NONE; spans.len()];
        nest(
            spans.len(),
            |k| (spans[k].start, spans[k].end, spans[k].level),
            stack,
            |k, found| {
                let above = found.map_or(NONE, |p| up[p]);
                let index = spans[k].index;
                up[k] = match keyed.get_mut(&index) {
                    Some(own) => {
                        own.next = above;
                        index
                    }
                    None => above,
                };
                launched(&spans[k], up[k]);
            },
        );
    }

    /// Sweeps device track `t`: the next keyed span up from each keyed span on it, and for
    /// each of its spans (by position) the nearest keyed span above it (its launch's for a
    /// launched device op, else the one of the span around it) and its index.
    fn device_track(
        &mut self,
        trace: &Trace,
        t: usize,
        spans: SweptTrack,
        stack: &mut Vec<usize>,
    ) -> Vec<(u32, u32)> {
        let rank = trace.tracks[t].rank.0;
        let mut order: Vec<u32> = (0..spans.spans.len() as u32)
            .filter(|&k| spans.spans[k as usize].bits & THREAD_STATE == 0)
            .collect();
        order.sort_unstable_by_key(|&k| spans.spans[k as usize].sweep_key());
        let mut parent_up: Vec<(u32, u32)> =
            (spans.spans.iter()).map(|s| (NONE, s.index)).collect();
        let mut up: Vec<u32> = vec![NONE; order.len()];
        let (launches, keyed) = (&self.launches, &mut self.keyed);
        nest(
            order.len(),
            |k| {
                let s = &spans.spans[order[k] as usize];
                (s.start, s.end, s.level)
            },
            stack,
            |k, found| {
                let at = order[k] as usize;
                let s = &spans.spans[at];
                let launch = (is_device_work(s.raw) && s.bits & HAS_CORRELATION != 0)
                    .then(|| launches.get(rank, spans.correlations[at]))
                    .flatten();
                let above = match (launch, found) {
                    (Some(l), _) => l.up,
                    (None, Some(p)) => up[p],
                    (None, None) => NONE,
                };
                parent_up[at].0 = above;
                up[k] = match keyed.get_mut(&s.index) {
                    Some(own) => {
                        own.next = above;
                        s.index
                    }
                    None => above,
                };
            },
        );
        parent_up
    }
}

/// The processes of the host tracks and the operations of each one's annotated thread and
/// graph-capture tracks, as [`crate::scope::Scopes::build`] makes them: the operation a
/// device op belongs to.
struct Operations {
    processes: ProcessTracks,
    segments: Vec<Vec<OpSegment>>,
    capture: FxHashMap<u32, Vec<OpSegment>>,
    only: FxHashMap<u32, Option<usize>>,
}

impl Operations {
    fn build(trace: &Trace, tracks: &[TrackSpans], orders: &OperationOrders) -> Operations {
        let processes = ProcessTracks::build(trace, tracks.len(), |t| {
            let spans = &tracks[t].spans;
            (!spans.is_empty())
                .then(|| thread_score(spans.iter().map(|s| (s.start, s.end, s.level, s.raw))))
        });
        let operations_of = |t: usize| orders.segments(tracks[t].spans.iter());
        let segments = (processes.annotated.iter())
            .map(|a| a.map(|t| operations_of(t.0 as usize)).unwrap_or_default())
            .collect();
        let capture = (processes.graph_capture.iter())
            .flatten()
            .map(|t| (t.0, operations_of(t.0 as usize)))
            .collect();
        let only = processes.only_process();
        Operations {
            processes,
            segments,
            capture,
            only,
        }
    }

    /// The operation of a launch on track `t` starting at `start`: on a graph-capture track,
    /// the innermost operation on it then, else the one on its process's annotated thread.
    fn of_launch(&self, t: usize, start: Ns) -> Option<u32> {
        let p = (self.processes.process_of_track.get(t).copied()).flatten()?;
        (self.capture.get(&(t as u32)))
            .and_then(|segments| operation_in(segments, start))
            .or_else(|| operation_in(&self.segments[p], start))
    }

    /// The operation device op `op` belongs to ([`crate::scope::DeviceOwner::operation`]).
    fn operation_of(&self, trace: &Trace, launches: &Launches, op: &DevOp) -> Option<u32> {
        let rank = trace.tracks[op.track as usize].rank.0;
        match op.correlation().and_then(|c| launches.get(rank, c)) {
            Some(l) => (l.operation != NONE).then_some(l.operation),
            None => {
                let p = self.only.get(&rank).copied().flatten()?;
                operation_in(&self.segments[p], op.start)
            }
        }
    }
}
