//! [`LayersStream`]: the layer, kernel and model tables gathered batch by batch, so that `strato
//! layers` and `strato roofline` on one file or stored profile never hold the trace's spans
//! (issue 28: the whole-trace tables held every span with its args, the scopes, the hierarchy
//! and two per-span vectors, 0.49x the file on a 1.4 GB trace). [`super::layers`] feeds it the
//! whole trace as one batch: one code path.
//!
//! Kept per CPU-thread span: its extent, id, name, effective level, a few flags and, for a
//! framework op, its cost (an index into the distinct costs met: an op's args are read once,
//! as its batch passes): 32 bytes ([`ThreadSpan`]). Kept per thread span with a correlation
//! (a launch, maybe): 24 bytes ([`Correlated`]); per device op: its extent, correlation, track
//! and name (32 bytes, [`DeviceOp`]); per `[memory]` allocation on a thread: its time, track
//! and bytes. The kernel table is summed as the batches pass (each kernel's duration kept for
//! its statistics), in trace order, as the whole-trace table sums it. All are kept in
//! [`Chunked`] storage: no room held for growth.
//!
//! At the end each thread track is sorted and swept as the hierarchy sweeps it
//! ([`crate::cross_stack::hierarchy::index::nest`]): a span's parent is the innermost span of
//! its track containing it at the same or a higher stratum, thread states taking no part. The
//! rules of the parent module follow, to the span: a layer instance is a framework op with no
//! framework op above it (or a non-step annotation); a launch is its rank's first accelerator
//! API call with the correlation, else its first thread span with it
//! ([`crate::scope::Scopes::launch_of`]); a device op without a launch belongs to its rank's
//! only process. Costs are summed bottom-up and layers in the order the whole-trace tables
//! took (by start, longer first, then level and id), so that every float sum adds in the
//! same order. A track's temporaries (parents and layers, 8 bytes a span) are freed before the
//! next track is swept.

use rustc_hash::FxHashMap;
use serde_json::Value;
use strato_trace::{Level, Ns, StrId, Trace, TrackKind};

use super::{
    framework_op_cost, i64_list, ncu_cost, parse_args, roofline, stats, Cost, KernelRow,
    LayerKernel, LayerRow, LayerSource, LayersOptions, LayersReport, ModelRow, RoofDevice, StepRow,
    KERNEL_ATTRIBUTES,
};
use crate::chunked::Chunked;
use crate::cross_stack::hierarchy::index::nest;
use crate::device_time::memory::object_keys;
use crate::models::devices::{detect, DeviceSpec, Precision};
use crate::scope::{
    effective_level, innermost_segments, is_device_work, is_step_name, is_thread_state,
    sort_launch_candidates, ProcessTracks,
};

mod records;

use records::{
    Allocation, Correlated, Costs, DeviceOp, Instance, KernelSums, Launched, Launches, Step,
    ThreadSpan, API, HAS_CORRELATION, LAUNCHED, NONE, NO_COST, STEP_NAME, UNDER_BACKEND,
};

/// The layer, kernel and model tables gathered batch by batch ([`LayersStream::add`], then
/// [`LayersStream::finish`]).
#[derive(Debug)]
pub struct LayersStream {
    options: LayersOptions,
    /// Spans read so far: the next span's index in the whole trace.
    seen: u64,
    /// Per track: its spans in trace order when it is a CPU thread (thread states aside).
    threads: Vec<Chunked<ThreadSpan>>,
    /// Per track: whether it is a CPU thread with spans (thread states included).
    has_spans: Vec<bool>,
    /// Per thread track with some: its spans named as steps, in trace order.
    steps: FxHashMap<u32, Vec<ThreadSpan>>,
    /// Thread spans with a correlation, in trace order.
    correlated: Chunked<Correlated>,
    device_ops: Chunked<DeviceOp>,
    costs: Costs,
    /// Device ops per (rank, device): the roofline's device is the busiest.
    device_count: FxHashMap<(u32, i64), usize>,
    kernels: FxHashMap<StrId, KernelSums>,
    kernel_count: usize,
    /// Whether any `[memory]` event was read.
    has_memory: bool,
    allocations: Chunked<Allocation>,
}

impl LayersStream {
    pub fn new(options: LayersOptions) -> LayersStream {
        LayersStream {
            options,
            seen: 0,
            threads: Vec::new(),
            has_spans: Vec::new(),
            steps: FxHashMap::default(),
            correlated: Chunked::default(),
            device_ops: Chunked::default(),
            costs: Costs::default(),
            device_count: FxHashMap::default(),
            kernels: FxHashMap::default(),
            kernel_count: 0,
            has_memory: false,
            allocations: Chunked::default(),
        }
    }

    /// Reads the events `batch` holds (the trace as it is then: its tables are the whole
    /// trace's so far, its events the batch's, in the trace's order, their args the batch's).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let index = self.seen as u32;
            self.seen += 1;
            let track = batch.track(span.track);
            match track.kind {
                TrackKind::Thread { .. } => self.thread_span(batch, span, index),
                TrackKind::DeviceQueue { device, .. } if is_device_work(span.level) => {
                    *self.device_count.entry((track.rank.0, device)).or_insert(0) += 1;
                    let mut at = span.track.0;
                    if span.correlation.is_some() {
                        at |= HAS_CORRELATION;
                    }
                    self.device_ops.push(DeviceOp {
                        start: span.start,
                        end: span.end,
                        correlation: span.correlation.get().unwrap_or(0),
                        track: at,
                        name: span.name,
                    });
                    if span.level == Level::DeviceKernel {
                        self.kernel(batch, span);
                    }
                }
                _ => {}
            }
        }
        for e in &batch.instants {
            if batch.str(e.name) != "[memory]" {
                continue;
            }
            self.has_memory = true;
            if !matches!(batch.track(e.track).kind, TrackKind::Thread { .. }) {
                continue; // never inside a layer
            }
            let bytes = parse_args(batch, e.args)
                .and_then(|a| a.get("Bytes").and_then(Value::as_i64))
                .unwrap_or(0);
            if bytes > 0 {
                self.allocations.push(Allocation {
                    ts: e.ts,
                    bytes,
                    track: e.track.0,
                });
            }
        }
    }

    fn thread_span(&mut self, batch: &Trace, span: &strato_trace::Span, index: u32) {
        if let Some(correlation) = span.correlation.get() {
            let mut track = span.track.0;
            if span.level == Level::AcceleratorApi {
                track |= API;
            }
            self.correlated.push(Correlated {
                correlation,
                start: span.start,
                index,
                track,
            });
        }
        let level = effective_level(batch, span);
        let name = batch.str(span.name);
        let bits = if is_step_name(name) { STEP_NAME } else { 0 };
        // Read now, while the args are the batch's; it counts only if the op launched device
        // work (found at the end).
        let cost = if level == Level::Backend {
            self.costs.intern(framework_op_cost(batch, name, span.args))
        } else {
            NO_COST
        };
        let kept = ThreadSpan {
            start: span.start,
            end: span.end,
            index,
            name: span.name,
            cost,
            word: ThreadSpan::word(level, bits, span.same_extent_order()),
        };
        let t = span.track.0;
        if self.threads.len() <= t as usize {
            self.threads.resize_with(t as usize + 1, Chunked::default);
            self.has_spans.resize(t as usize + 1, false);
        }
        self.has_spans[t as usize] = true;
        if bits & STEP_NAME != 0 {
            self.steps.entry(t).or_default().push(kept);
        }
        // Thread states (the OS level's `running`, `blocked:*`, ...) are no layer's and no
        // span's parent: they take no part in the sweep.
        if !is_thread_state(batch, span) {
            self.threads[t as usize].push(kept);
        }
    }

    /// Adds kernel `span` to the kernel table.
    fn kernel(&mut self, batch: &Trace, span: &strato_trace::Span) {
        self.kernel_count += 1;
        let dur = span.duration();
        let k = self.kernels.entry(span.name).or_default();
        k.durations.push(dur);
        // Only the attributes read below are built (a Kineto kernel has a dozen more).
        let Some(args) = batch
            .args_text(span.args)
            .and_then(|text| object_keys(&text, &KERNEL_ATTRIBUTES))
            .map(Value::Object)
        else {
            return;
        };
        if let (Some(g), Some(b)) = (i64_list(args.get("grid")), i64_list(args.get("block"))) {
            *k.configs.entry((g, b)).or_insert(0) += 1;
        }
        if let Some(o) = args
            .get("est. achieved occupancy %")
            .and_then(Value::as_f64)
            .or_else(|| {
                (args.get("ncu").unwrap_or(&args))
                    .get("occupancy_pct")
                    .and_then(Value::as_f64)
            })
        {
            k.occupancy.0 += o;
            k.occupancy.1 += 1;
        }
        if let Some(c) = ncu_cost(&args) {
            k.with_metrics += 1;
            k.cost.add(&c);
            k.metric_ns += dur;
        }
    }

    /// The tables of the trace whose tables `trace` holds (its events are not read).
    pub fn finish(mut self, trace: &Trace) -> LayersReport {
        let mut notes = Vec::new();
        let has_spans = std::mem::take(&mut self.has_spans);
        let processes = ProcessTracks::build(trace, has_spans.len(), |t| {
            has_spans[t].then_some((0, 0, 0))
        });
        // The device ops go to their steps and are reduced to what the layers need of them
        // before the threads are swept, so that the sweeps hold them in 16 bytes each.
        let (mut launches, launched, mut steps) = self.device_ops(trace, &processes);
        let mut instances: Chunked<Instance> = Chunked::default();
        let mut stack = Vec::new();
        for (t, spans) in std::mem::take(&mut self.threads).into_iter().enumerate() {
            if !spans.is_empty() {
                let spans = spans.into_vec();
                self.thread_track(t as u32, spans, &mut launches, &mut instances, &mut stack);
            }
        }
        let mut instances = instances.into_vec();
        instances.sort_unstable_by_key(Instance::key);
        // Span id -> place in `instances`.
        let mut position: Vec<(u32, u32)> = (instances.iter().enumerate())
            .map(|(k, i)| (i.index, k as u32))
            .collect();
        position.sort_unstable();
        let place = |index: u32| {
            let at = position.binary_search_by_key(&index, |p| p.0).ok()?;
            Some(position[at].1)
        };
        for layer in &mut launches.layer {
            *layer = Some(*layer)
                .filter(|&l| l != NONE)
                .and_then(place)
                .unwrap_or(NONE);
        }

        // Device work per layer instance, and per (layer name, kernel name).
        let mut per_instance_gpu: Vec<(usize, Ns)> = vec![(0, 0); instances.len()];
        let mut layer_kernels: FxHashMap<(StrId, StrId), (usize, Ns)> = FxHashMap::default();
        for op in &launched {
            let Some(&layer) = launches
                .layer
                .get(op.launch as usize)
                .filter(|&&l| l != NONE)
            else {
                continue;
            };
            let e = &mut per_instance_gpu[layer as usize];
            e.0 += 1;
            e.1 += op.duration;
            let lk = layer_kernels
                .entry((instances[layer as usize].name, op.name))
                .or_insert((0, 0));
            lk.0 += 1;
            lk.1 += op.duration;
        }
        drop(launched);

        let roof_device = self.roof_device(trace);
        let spec = roof_device.as_ref().and_then(|d| d.spec.as_ref());
        match &roof_device {
            Some(d) if d.spec.is_none() => notes.push(format!(
                "device {} ({}) is not in the device table: ridge points and bounds are unknown",
                d.device,
                d.name
                    .as_deref()
                    .filter(|n| !n.trim().is_empty())
                    .unwrap_or("unnamed")
            )),
            None => notes.push("no device work: no roofline".into()),
            _ => {}
        }

        let alloc = if self.has_memory {
            self.allocations(&instances, place)
        } else {
            notes.push(
                "no [memory] events (profile_memory off or args not kept): allocated bytes \
                 unknown"
                    .into(),
            );
            Vec::new()
        };
        let layers = self.layer_rows(
            trace,
            &instances,
            &per_instance_gpu,
            &alloc,
            layer_kernels,
            spec,
        );
        if layers.iter().all(|l| l.flops_known == 0) {
            notes.push(
                "no layer has known FLOPs (needs with_flops, or record_shapes for matmul/linear, \
                 plus Concrete Inputs for conv)"
                    .into(),
            );
        }
        let kernels = self.kernel_rows(trace, spec);
        // FLOPs of a step: the layer instances of the process (any thread) starting in it.
        for i in &instances {
            let Some(p) = processes.process_of_track[i.track as usize] else {
                continue;
            };
            if let Some(k) = step_at(&steps[p], i.start) {
                steps[p][k]
                    .cost
                    .add(&self.costs.get(i.cost).unwrap_or_default());
            }
        }
        let (steps, models) = self.steps_and_models(trace, &processes, &steps, spec);
        if steps.is_empty() {
            notes.push("no ProfilerStep#N annotations: no model (step) table".into());
        }
        LayersReport {
            source: self.options.source,
            trim: self.options.trim,
            device: roof_device,
            layer_instances: instances.len(),
            layers,
            kernel_count: self.kernel_count,
            kernels,
            steps,
            models,
            notes,
        }
    }

    /// The launch of each device op, as [`crate::scope::Scopes::build`] chooses it (its
    /// rank's first accelerator API call with its correlation, else the first thread span);
    /// each process's steps with the device ops it launched in them (by their launch's start,
    /// else their own); and what the layer tables read of the ops with a launch.
    fn device_ops(
        &mut self,
        trace: &Trace,
        processes: &ProcessTracks,
    ) -> (Launches, Vec<Launched>, Vec<Vec<Step>>) {
        let rank = |track: usize| trace.tracks[track].rank.0;
        let mut chosen = std::mem::take(&mut self.correlated).into_vec();
        sort_launch_candidates(&mut chosen, |c| {
            (rank(c.track()), c.correlation, c.track & API != 0, c.index)
        });
        chosen.dedup_by_key(|c| (rank(c.track()), c.correlation));
        chosen.shrink_to_fit();
        // Each process's steps, by start (ties: thread order, then trace order).
        let mut steps: Vec<Vec<Step>> = (processes.threads.iter())
            .map(|threads| {
                let mut steps: Vec<Step> = (threads.iter())
                    .filter_map(|t| self.steps.get(&t.0))
                    .flatten()
                    .map(|&span| Step {
                        span,
                        gpu_end: span.end,
                        busy: 0,
                        device_ops: 0,
                        cost: Cost::default(),
                    })
                    .collect();
                steps.sort_by_key(|s| s.span.start);
                steps
            })
            .collect();
        let mut step_ops: Vec<Vec<Vec<(Ns, Ns)>>> =
            steps.iter().map(|s| vec![Vec::new(); s.len()]).collect();
        let only_process = processes.only_process();
        let mut used: Vec<bool> = vec![false; chosen.len()];
        let mut launched: Vec<Launched> = Vec::new();
        for op in std::mem::take(&mut self.device_ops).into_vec() {
            let track = (op.track & !HAS_CORRELATION) as usize;
            let key = (rank(track), op.correlation);
            let launch = (op.track & HAS_CORRELATION != 0)
                .then(|| chosen.binary_search_by_key(&key, |c| (rank(c.track()), c.correlation)))
                .and_then(Result::ok);
            let (process, at) = match launch {
                Some(l) => {
                    used[l] = true;
                    launched.push(Launched {
                        duration: op.duration(),
                        launch: l as u32,
                        name: op.name,
                    });
                    (
                        processes.process_of_track[chosen[l].track()],
                        chosen[l].start,
                    )
                }
                None => (only_process.get(&key.0).copied().flatten(), op.start),
            };
            if let Some(p) = process {
                if let Some(k) = step_at(&steps[p], at) {
                    step_ops[p][k].push((op.start, op.end));
                }
            }
        }
        for (steps, ops) in steps.iter_mut().zip(step_ops) {
            for (step, ops) in steps.iter_mut().zip(ops) {
                step.gpu_end = ops.iter().map(|o| o.1).max().unwrap_or(step.span.end);
                step.busy = crate::device_time::gpu_time::length(
                    &crate::device_time::gpu_time::merge(ops.iter().copied()),
                );
                step.device_ops = ops.len();
            }
        }
        let mut used_spans: Vec<(u32, u32)> = (chosen.iter().zip(used).enumerate())
            .filter(|(_, (_, used))| *used)
            .map(|(at, (c, _))| (c.index, at as u32))
            .collect();
        used_spans.sort_unstable();
        let launches = Launches {
            used: used_spans,
            layer: vec![NONE; chosen.len()],
        };
        (launches, launched, steps)
    }

    /// Sweeps thread track `t` (`spans`: its spans, in trace order): each span's parent and
    /// layer, which spans launched device work (themselves or through a descendant) and the
    /// costs bottom-up. Adds the track's layer instances to `instances` and, per launch on
    /// it that is under a layer, that layer's span id to `launches.layer`.
    fn thread_track(
        &mut self,
        t: u32,
        mut spans: Vec<ThreadSpan>,
        launches: &mut Launches,
        instances: &mut Chunked<Instance>,
        stack: &mut Vec<usize>,
    ) {
        spans.sort_unstable_by_key(ThreadSpan::key);
        let n = spans.len();
        let mut parent: Vec<u32> = vec![NONE; n];
        nest(
            n,
            |k| (spans[k].start, spans[k].end, spans[k].level()),
            stack,
            |k, found| {
                if let Some(f) = found {
                    parent[k] = f as u32;
                }
            },
        );
        let parent_of = |k: usize| Some(parent[k]).filter(|&p| p != NONE);
        // Top-down (parents come first): under a framework op, the layer, the launches.
        let mut layer: Vec<u32> = vec![NONE; n];
        for k in 0..n {
            let p = parent_of(k);
            let s = &spans[k];
            let parent_under = p.is_some_and(|p| spans[p as usize].bits() & UNDER_BACKEND != 0);
            let is_layer = match self.options.source {
                LayerSource::Op => s.level() == Level::Backend && !parent_under,
                LayerSource::Annotation => {
                    s.level() == Level::Operation && s.bits() & STEP_NAME == 0
                }
            };
            layer[k] = if is_layer {
                k as u32
            } else {
                p.map_or(NONE, |p| layer[p as usize])
            };
            let mut bits = s.bits();
            if s.level() == Level::Backend || parent_under {
                bits |= UNDER_BACKEND;
            }
            if let Some(at) = launches.used(s.index) {
                bits |= LAUNCHED;
                if layer[k] != NONE {
                    launches.layer[at as usize] = spans[layer[k] as usize].index;
                }
            }
            spans[k].set_bits(bits);
        }
        // Bottom-up: launched, then costs (own cost, else the sum of the children's). Held:
        // the sums of the spans not reached yet, not a cost per span.
        let mut sums: FxHashMap<u32, Cost> = FxHashMap::default();
        for k in (0..n).rev() {
            let p = parent_of(k);
            let s = spans[k];
            if s.bits() & LAUNCHED != 0 {
                if let Some(p) = p {
                    let parent = &mut spans[p as usize];
                    parent.set_bits(parent.bits() | LAUNCHED);
                }
            }
            let own = if s.level() == Level::Backend && s.bits() & LAUNCHED != 0 {
                self.costs.get(s.cost)
            } else {
                None
            };
            let children = sums.remove(&(k as u32));
            let cost = own.or(children);
            if let (Some(c), Some(p)) = (cost, p) {
                sums.entry(p).or_default().add(&c);
            }
            if layer[k] == k as u32 {
                spans[k].cost = self.costs.intern(cost);
            }
        }
        drop(parent);
        for (k, s) in spans.iter().enumerate() {
            if layer[k] == k as u32 {
                instances.push(Instance {
                    start: s.start,
                    end: s.end,
                    index: s.index,
                    name: s.name,
                    cost: s.cost,
                    track: t,
                    order: s.nesting(),
                });
            }
        }
    }

    /// The device the roofline is drawn against: the one with the most device ops.
    fn roof_device(&self, trace: &Trace) -> Option<RoofDevice> {
        let (&(rank, device), _) =
            (self.device_count.iter()).max_by_key(|(k, v)| (**v, std::cmp::Reverse(**k)))?;
        let d = (trace.devices.iter())
            .find(|d| d.index == device && d.rank.is_none_or(|r| r.0 == rank));
        let name = d.and_then(|d| d.name.clone());
        let spec = d.and_then(|d| detect(d, None)).map(|found| found.spec);
        Some(RoofDevice {
            rank: trace.ranks[rank as usize].rank.unwrap_or(i64::from(rank)),
            device,
            name,
            spec,
        })
    }

    /// Per layer instance (by its position in `instances`): the bytes and number of the
    /// allocations made on its thread while it was the innermost layer there.
    fn allocations(
        &self,
        instances: &[Instance],
        place: impl Fn(u32) -> Option<u32>,
    ) -> Vec<(i64, usize)> {
        let mut alloc = vec![(0, 0); instances.len()];
        // Track by track, with the allocations of each: one track's segments held at a time.
        let mut allocations: FxHashMap<u32, Vec<Allocation>> = FxHashMap::default();
        for a in self.allocations.iter() {
            allocations.entry(a.track).or_default().push(*a);
        }
        for (track, mut allocations) in allocations {
            // The innermost layer at a time is decided by the layers open then only: the
            // segments are made of the layers open at some allocation.
            allocations.sort_unstable_by_key(|a| a.ts);
            let open_at_one = |i: &&Instance| {
                let k = allocations.partition_point(|a| a.ts < i.start);
                allocations.get(k).is_some_and(|a| a.ts < i.end)
            };
            let layers: Vec<(Ns, Ns, u32, u32)> = (instances.iter())
                .filter(|i| i.track == track)
                .filter(open_at_one)
                .map(|i| (i.start, i.end, i.order, i.index))
                .collect();
            let segments = innermost_segments(layers.into_iter());
            for a in allocations {
                let k = segments.partition_point(|s| s.0 <= a.ts);
                let Some(&(_, end, layer)) = k.checked_sub(1).and_then(|k| segments.get(k)) else {
                    continue;
                };
                if let Some(at) = place(layer).filter(|_| a.ts < end) {
                    let e: &mut (i64, usize) = &mut alloc[at as usize];
                    e.0 += a.bytes;
                    e.1 += 1;
                }
            }
        }
        alloc
    }

    /// One row per layer name, by CPU time.
    fn layer_rows(
        &self,
        trace: &Trace,
        instances: &[Instance],
        per_instance_gpu: &[(usize, Ns)],
        alloc: &[(i64, usize)],
        layer_kernels: FxHashMap<(StrId, StrId), (usize, Ns)>,
        spec: Option<&DeviceSpec>,
    ) -> Vec<LayerRow> {
        #[derive(Default)]
        struct Sums {
            cpu: Vec<Ns>,
            gpu: Vec<Ns>,
            kernels: usize,
            kernel_ns: Ns,
            alloc: i64,
            allocations: usize,
            flops_known: usize,
            cost: Cost,
            cost_ns: Ns,
        }
        let mut by_name: FxHashMap<StrId, Sums> = FxHashMap::default();
        let mut total_cpu: Ns = 0;
        for (k, i) in instances.iter().enumerate() {
            let a = by_name.entry(i.name).or_default();
            let cpu = i.duration();
            total_cpu += cpu;
            a.cpu.push(cpu);
            let (kernels, gpu) = per_instance_gpu[k];
            a.gpu.push(gpu);
            a.kernels += kernels;
            a.kernel_ns += gpu;
            if let Some(&(b, c)) = alloc.get(k) {
                a.alloc += b;
                a.allocations += c;
            }
            let c = self.costs.get(i.cost).unwrap_or_default();
            if c.flops.is_some() {
                a.flops_known += 1;
                a.cost.add(&c);
                a.cost_ns += gpu;
            }
        }
        let total_instances = instances.len().max(1) as f64;
        let mut kernels_of: FxHashMap<StrId, Vec<LayerKernel>> = FxHashMap::default();
        for ((layer, kernel), (count, total)) in layer_kernels {
            kernels_of.entry(layer).or_default().push(LayerKernel {
                name: trace.str(kernel).to_owned(),
                count,
                total_ns: total,
            });
        }
        let trim = self.options.trim;
        let mut layers: Vec<LayerRow> = by_name
            .into_iter()
            .map(|(name, mut a)| {
                let mut top = kernels_of.remove(&name).unwrap_or_default();
                top.sort_by(|x, y| {
                    y.total_ns
                        .cmp(&x.total_ns)
                        .then_with(|| x.name.cmp(&y.name))
                });
                top.truncate(5);
                let cpu = stats(&mut a.cpu, trim);
                LayerRow {
                    name: trace.str(name).to_owned(),
                    occurrences: cpu.count,
                    share_of_occurrences_pct: 100.0 * cpu.count as f64 / total_instances,
                    share_of_cpu_time_pct: if total_cpu > 0 {
                        100.0 * cpu.total_ns as f64 / total_cpu as f64
                    } else {
                        0.0
                    },
                    cpu,
                    allocated_bytes: self.has_memory.then_some(a.alloc),
                    allocations: a.allocations,
                    kernels: a.kernels,
                    kernel_time_ns: a.kernel_ns,
                    gpu: stats(&mut a.gpu, trim),
                    top_kernels: top,
                    flops_known: a.flops_known,
                    roofline: roofline(
                        a.cost.flops,
                        a.cost.bytes,
                        a.cost.precision,
                        a.cost_ns,
                        spec,
                    ),
                }
            })
            .collect();
        most_time_first(&mut layers, |l| (l.cpu.total_ns, &l.name));
        layers
    }

    /// One row per kernel name, by total time.
    fn kernel_rows(&mut self, trace: &Trace, spec: Option<&DeviceSpec>) -> Vec<KernelRow> {
        let trim = self.options.trim;
        let mut rows: Vec<KernelRow> = std::mem::take(&mut self.kernels)
            .into_iter()
            .map(|(name, mut k)| {
                let duration = stats(&mut k.durations, trim);
                let best = k
                    .configs
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                    .map(|(c, _)| c.clone());
                KernelRow {
                    name: trace.str(name).to_owned(),
                    duration,
                    grid: best.as_ref().map(|c| c.0.clone()),
                    block: best.map(|c| c.1),
                    configurations: k.configs.len(),
                    occupancy_pct: (k.occupancy.1 > 0)
                        .then(|| k.occupancy.0 / k.occupancy.1 as f64),
                    with_metrics: k.with_metrics,
                    roofline: roofline(
                        k.cost.flops,
                        k.cost.bytes,
                        k.cost.precision,
                        k.metric_ns,
                        spec,
                    ),
                }
            })
            .collect();
        most_time_first(&mut rows, |k| (k.duration.total_ns, &k.name));
        rows
    }

    /// Per `ProfilerStep#N` of each process: CPU latency, end-to-end latency, GPU busy time
    /// and FLOPs; per process, the model row.
    fn steps_and_models(
        &self,
        trace: &Trace,
        processes: &ProcessTracks,
        steps: &[Vec<Step>],
        spec: Option<&DeviceSpec>,
    ) -> (Vec<StepRow>, Vec<ModelRow>) {
        let trim = self.options.trim;
        let mut steps_out = Vec::new();
        let mut models = Vec::new();
        for (p, key) in processes.keys.iter().enumerate() {
            if steps[p].is_empty() {
                continue;
            }
            let rank = &trace.ranks[key.rank.0 as usize];
            let rank_number = rank.rank.unwrap_or(i64::from(key.rank.0));
            let mut lat = Vec::new();
            let mut e2e = Vec::new();
            let mut busy_total = 0;
            let mut model_cost = Cost::default();
            for step in &steps[p] {
                let (s, gpu_end, busy, c) = (&step.span, step.gpu_end, step.busy, step.cost);
                busy_total += busy;
                model_cost.add(&c);
                lat.push(s.duration());
                e2e.push(gpu_end.max(s.end) - s.start);
                steps_out.push(StepRow {
                    rank: rank_number,
                    pid: key.pid,
                    name: trace.str(s.name).to_owned(),
                    start_ns: s.start,
                    cpu_ns: s.duration(),
                    end_to_end_ns: gpu_end.max(s.end) - s.start,
                    gpu_busy_ns: busy,
                    device_ops: step.device_ops,
                    flops: c.flops,
                });
            }
            let latency = stats(&mut lat, trim);
            let steps_per_s = if latency.mean_ns > 0.0 {
                1e9 / latency.mean_ns
            } else {
                0.0
            };
            models.push(ModelRow {
                rank: rank_number,
                pid: key.pid,
                steps: steps[p].len(),
                end_to_end: stats(&mut e2e, trim),
                latency,
                steps_per_s,
                samples_per_s: self.options.batch_size.map(|b| b as f64 * steps_per_s),
                gpu_busy_ns: busy_total,
                roofline: roofline(
                    model_cost.flops,
                    model_cost.bytes,
                    model_cost.precision,
                    busy_total,
                    spec,
                ),
            });
        }
        (steps_out, models)
    }
}

/// The step of `steps` (sorted by start) that `at` falls in: the last one starting at or
/// before it, if it has not ended.
fn step_at(steps: &[Step], at: Ns) -> Option<usize> {
    let k = steps
        .partition_point(|st| st.span.start <= at)
        .checked_sub(1)?;
    (at < steps[k].span.end).then_some(k)
}

/// Sorts `rows` by their time (`of`: time and name), the most first, then by name.
fn most_time_first<R>(rows: &mut [R], of: impl Fn(&R) -> (Ns, &String)) {
    rows.sort_by(|a, b| {
        let ((ta, na), (tb, nb)) = (of(a), of(b));
        tb.cmp(&ta).then_with(|| na.cmp(nb))
    });
}
