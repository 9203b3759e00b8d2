//! What a what-if change is ([`Scale`]: a [`Selector`] and a factor, as `strato whatif` parses
//! it) and what it selects in a graph ([`selected`], with the module calls `module:` changes
//! name: [`ModuleCalls`]).

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, RankId, Span, SpanId, StrId, Trace, TrackId, TrackKind};

use super::durations::SpanOrder;

/// What a change selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Device ops (kernels, copies, memsets) whose name contains the text.
    Kernel(String),
    /// Device ops launched from inside a CPU op of exactly this name, at any depth.
    Op(String),
    /// Device ops launched from inside a call of an `nn.Module` of this class (the module's
    /// `nn.Module: CLASS_N` span on the launching thread; `CLASS` as
    /// [`crate::cross_stack::modules::module_of`] reads it), at any depth.
    Module(String),
    /// CPU ops of exactly this name and every CPU op they call on their thread.
    Cpu(String),
    /// Every CPU op of the threads of exactly this name (a faster host thread, a pool's slow
    /// worker made as fast as the others).
    Thread(String),
    /// Device ops of a category.
    Category(DeviceCategory),
    /// The links collectives move their data over: the collective kernels
    /// ([`crate::distributed::collectives::is_collective_kernel`]), whose transfer (from the
    /// last member's arrival to the end, when the job's collectives are matched across ranks;
    /// the whole kernel otherwise) scales by the factor, 1 / the bandwidth's factor.
    Links,
    /// Host synchronisations: the blocking runtime calls ([`super::super::is_blocking_call`]) under a
    /// CPU op of this name, or every one (`None`). Their factor is 0: the call no longer waits
    /// for the device (it costs what it costs when it does not wait).
    Sync(Option<String>),
    /// Copies made asynchronous (from pinned host memory, with non-blocking calls): the
    /// blocking runtime calls ([`super::super::is_blocking_call`]) that launched a copy or a memset
    /// (`cudaMemcpy`, `cuMemcpyDtoH`, a pageable `cudaMemcpyAsync`, `hipMemcpy`, an OpenCL read
    /// or write made blocking), under a CPU op of this name or every one (`None`), no longer
    /// wait for the device, as [`Selector::Sync`]'s do. The copy itself still runs when and
    /// as long as it did (pinned memory can make it faster too; that is not modelled). The
    /// factor is 0.
    AsyncCopies(Option<String>),
    /// A straggler's lateness at collectives: at each collective of a window where the rank
    /// (labelled so; `None`: the window's straggler, the rank that arrived last at the most of
    /// its collectives, the lower rank on a tie) came later than the median member, it arrives
    /// with the median member (the lower median: with two members, with the other). Its own
    /// work is unchanged; what waited for it at the collective goes on earlier, and so does
    /// the rank itself after the collective. The factor is unused.
    Straggler(Option<i64>),
    /// Communication overlapped with compute, as bucketing would: collective kernels no
    /// longer wait on the device for compute, nor compute for them on a stream they share
    /// ([`comm_off_compute`]). The factor is unused.
    OverlapComm,
    /// Host<->device copies overlapped with compute, as a copy stream of their own with the
    /// next batch prefetched would ([`copies_off_compute`]): a host-to-device copy no longer
    /// waits on the device for compute, nor compute for it (its data is there in time, as
    /// when it was copied a step ahead); compute no longer waits for a device-to-host copy
    /// (the copy still waits for the compute that made its data). The most overlapping copies
    /// can buy on the device; the host's waits for them are `--async-copies`'. The factor is
    /// unused.
    OverlapCopies,
    /// The launches inside each call of the CPU op of this name (`None`: each top-level CPU op
    /// of a thread) replayed as one graph launch, as CUDA graphs (or torch.compile's
    /// `reduce-overhead`) would: the region's CPU ops cost nothing (factor 0, as `cpu:`), and
    /// each device op launched inside it is launched at the region's start, with the typical
    /// launch delay, instead of by its own call ([`graph_launches`]). Synchronisations inside
    /// the region still wait (a graph cannot hold them).
    GraphLaunch(Option<String>),
}

/// A category of device ops ([`Selector::Category`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCategory {
    /// Kernels.
    Kernel,
    /// Copies and memsets.
    Copy,
    /// Every device op.
    Device,
}

/// One what-if change: the time of what `selector` picks, scaled by `factor` (0.5: twice as
/// fast; 0: gone).
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    /// The change as given (`kernel:gemm=0.5`).
    pub text: String,
    pub selector: Selector,
    pub factor: f64,
}

/// The most changes one replay takes (each is a bit of a mask per op).
pub const MAX_CHANGES: usize = 64;

impl Scale {
    /// The change `--no-sync` (`under` empty: every host synchronisation) or
    /// `--no-sync=NAME` (those under the CPU op NAME) asks for.
    pub fn no_sync(under: &str) -> Scale {
        Scale::of_op("no-sync", under, Selector::Sync)
    }

    /// The change `--async-copies` (`under` empty: every blocking copy call) or
    /// `--async-copies=NAME` (those under the CPU op NAME) asks for.
    pub fn async_copies(under: &str) -> Scale {
        Scale::of_op("async-copies", under, Selector::AsyncCopies)
    }

    /// A change named `flag` (`flag=NAME` with a CPU op's name), with factor 0, whose
    /// selector `selector` makes of the name (`None`: none given).
    pub(super) fn of_op(flag: &str, name: &str, selector: fn(Option<String>) -> Selector) -> Scale {
        let name = name.trim();
        Scale {
            text: if name.is_empty() {
                flag.to_owned()
            } else {
                format!("{flag}={name}")
            },
            selector: selector((!name.is_empty()).then(|| name.to_owned())),
            factor: 0.0,
        }
    }

    /// The change `--link-bw F` asks for: the links `factor` times as fast (2: twice the
    /// bandwidth, each collective's transfer in half the time); `Err` unless `factor` is a
    /// finite number > 0.
    pub fn link_bandwidth(factor: f64) -> Result<Scale, String> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(format!(
                "link_bw: {factor} is not a finite number > 0 (2: twice the bandwidth)"
            ));
        }
        Ok(Scale {
            text: format!("link-bw={factor}"),
            selector: Selector::Links,
            factor: 1.0 / factor,
        })
    }

    /// The change `--even-straggler` asks for (`rank` `None`: each window's straggler), or
    /// evening rank `rank` ([`Selector::Straggler`]).
    pub fn even_straggler(rank: Option<i64>) -> Scale {
        Scale {
            text: match rank {
                None => "even-straggler".to_owned(),
                Some(r) => format!("even-straggler={r}"),
            },
            selector: Selector::Straggler(rank),
            factor: 1.0,
        }
    }

    /// The change `--overlap-comm` asks for ([`Selector::OverlapComm`]).
    pub fn overlap_comm() -> Scale {
        Scale {
            text: "overlap-comm".to_owned(),
            selector: Selector::OverlapComm,
            factor: 1.0,
        }
    }

    /// The change `--overlap-copies` asks for ([`Selector::OverlapCopies`]).
    pub fn overlap_copies() -> Scale {
        Scale {
            text: "overlap-copies".to_owned(),
            selector: Selector::OverlapCopies,
            factor: 1.0,
        }
    }

    /// The change `--graph-launch` (`region` empty: each top-level CPU op of a thread) or
    /// `--graph-launch=NAME` (each call of the CPU op NAME) asks for
    /// ([`Selector::GraphLaunch`]).
    pub fn graph_launch(region: &str) -> Scale {
        Scale::of_op("graph-launch", region, Selector::GraphLaunch)
    }

    /// Parses `KIND:NAME=FACTOR`: KIND is `kernel` (device ops whose name contains NAME), `op`
    /// (device ops launched under the CPU op NAME), `module` (device ops launched under a call
    /// of the `nn.Module` class NAME), `cpu` (the CPU op NAME and what it calls), `thread`
    /// (every CPU op of the threads named NAME) or `category` (NAME: `kernel`, `copy` or
    /// `device`); FACTOR a finite number >= 0.
    pub fn parse(text: &str) -> Result<Scale, String> {
        let shape = "KIND:NAME=FACTOR (kind: kernel, op, module, cpu, thread or category)";
        let (selector, factor) = text
            .rsplit_once('=')
            .ok_or_else(|| format!("scale {text:?}: not {shape}"))?;
        let factor = factor
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .ok_or_else(|| format!("scale {text:?}: the factor is not a finite number >= 0"))?;
        let (kind, name) = selector
            .split_once(':')
            .ok_or_else(|| format!("scale {text:?}: not {shape}"))?;
        if name.is_empty() {
            return Err(format!("scale {text:?}: no name after {kind}:"));
        }
        let selector = match kind.trim() {
            "kernel" => Selector::Kernel(name.to_owned()),
            "op" => Selector::Op(name.to_owned()),
            "module" => Selector::Module(name.to_owned()),
            "cpu" => Selector::Cpu(name.to_owned()),
            "thread" => Selector::Thread(name.to_owned()),
            "category" => Selector::Category(match name {
                "kernel" => DeviceCategory::Kernel,
                "copy" => DeviceCategory::Copy,
                "device" => DeviceCategory::Device,
                _ => {
                    return Err(format!(
                        "scale {text:?}: no category {name:?} (categories: kernel, copy, device)"
                    ))
                }
            }),
            other => {
                return Err(format!(
                    "scale {text:?}: no selector kind {other:?} (kinds: kernel, op, module, cpu, \
                     thread, category)"
                ))
            }
        };
        Ok(Scale {
            text: text.to_owned(),
            selector,
            factor,
        })
    }
}

/// The bit mask of the changes whose selector `pick` accepts (bit `i`: `changes[i]`).
pub(super) fn change_bits(changes: &[Scale], pick: &dyn Fn(&Selector) -> bool) -> u64 {
    changes
        .iter()
        .enumerate()
        .filter(|(_, c)| pick(&c.selector))
        .fold(0, |m, (i, _)| m | (1u64 << i))
}

/// What the changes select in a graph ([`selected`]).
#[derive(Default)]
pub(super) struct Selection {
    /// The changes each span falls under, as a bit mask (bit `i`: `changes[i]`).
    pub(super) masks: FxHashMap<SpanId, u64>,
    /// Each launch call inside a [`Selector::GraphLaunch`] region: the region (its outermost
    /// call).
    pub(super) regions: FxHashMap<SpanId, SpanId>,
}

/// The changes each span of the graph falls under, as a bit mask per span: device ops by
/// their own name and category and by the CPU ops (`op:`) and module calls (`module:`) above
/// their launch, CPU ops by their own name and their callers' (`cpu:`, `graph-launch`); and
/// the graph-launch region of each launch call inside one.
pub(super) fn selected<'o>(
    trace: &Trace,
    order: impl FnOnce() -> &'o SpanOrder,
    changes: &[Scale],
    modules: &ModuleCalls,
) -> Selection {
    let mut selection = Selection::default();
    // A straggler's lateness and overlapped communication select no span: without another
    // change there is nothing to walk (an advice's straggler is replayed once per window).
    let by_spans = change_bits(changes, &|s| {
        !matches!(
            s,
            Selector::Straggler(_) | Selector::OverlapComm | Selector::OverlapCopies
        )
    });
    if by_spans == 0 {
        return selection;
    }
    let SpanOrder { threads, device } = order();
    let masks = &mut selection.masks;
    let bits = |pick: &dyn Fn(&Selector) -> bool| change_bits(changes, pick);
    // What selects device ops by what is above their launch on its thread.
    let op_bits = bits(&|s| matches!(s, Selector::Op(_) | Selector::Module(_)));
    let sync_bits = bits(&|s| matches!(s, Selector::Sync(_)));
    let every_sync = bits(&|s| matches!(s, Selector::Sync(None)));
    // Copies made asynchronous select the blocking calls that launched a copy: known once
    // the device ops are read (below).
    let async_bits = bits(&|s| matches!(s, Selector::AsyncCopies(_)));
    let every_async = bits(&|s| matches!(s, Selector::AsyncCopies(None)));
    let every_top_level = bits(&|s| matches!(s, Selector::GraphLaunch(None)));
    let graph_bits = bits(&|s| matches!(s, Selector::GraphLaunch(_)));
    // CPU spans per thread, walked in call order with their callers' masks ("under" a name).
    let mut under: FxHashMap<SpanId, u64> = FxHashMap::default();
    let mut calls: FxHashMap<(RankId, u64), SpanId> = FxHashMap::default();
    for &(track, ref spans) in threads {
        let rank = trace.track(track).rank;
        let thread_name = trace.track(track).name.as_deref();
        // What selects every CPU op of this thread (by its name).
        let thread_bits =
            bits(&|s| matches!(s, Selector::Thread(n) if Some(n.as_str()) == thread_name));
        // Each open span, its mask, and the graph-launch region it is in.
        let mut stack: Vec<(SpanId, u64, Option<SpanId>)> = Vec::new();
        for &id in spans {
            let span = &trace.spans[id.0 as usize];
            while stack
                .last()
                .is_some_and(|(top, _, _)| trace.spans[top.0 as usize].end <= span.start)
            {
                stack.pop();
            }
            let name = trace.str(span.name);
            let mut own = bits(&|s| match s {
                Selector::Op(n)
                | Selector::Cpu(n)
                | Selector::Sync(Some(n))
                | Selector::AsyncCopies(Some(n))
                | Selector::GraphLaunch(Some(n)) => n == name,
                _ => false,
            });
            if stack.is_empty() {
                own |= every_top_level | thread_bits;
            }
            let mask = own | stack.last().map_or(0, |&(_, m, _)| m);
            let region = stack
                .last()
                .and_then(|&(_, _, r)| r)
                .or_else(|| (own & graph_bits != 0).then_some(id));
            // A synchronisation change selects blocking calls only.
            let blocking = span.level == Level::AcceleratorApi
                && super::super::graph::is_blocking_call(trace, id);
            let syncs = if blocking {
                (mask | every_sync) & sync_bits
            } else {
                0
            };
            let mut launched_under = mask;
            if span.level == Level::AcceleratorApi {
                if let Some(c) = span.correlation.get() {
                    calls.entry((rank, c)).or_insert(id);
                    launched_under |= modules.around(track, span.start);
                    if let Some(region) = region.filter(|&r| r != id) {
                        selection.regions.insert(id, region);
                    }
                }
            }
            let cpu = (mask & !op_bits & !sync_bits & !async_bits) | syncs;
            if cpu != 0 {
                masks.insert(id, cpu);
            }
            under.insert(id, launched_under);
            stack.push((id, mask, region));
        }
    }
    // What a device op's own name and level select, worked out once per name and level: the
    // name tests (`kernel:` substrings, collective kernels) are the cost here, and a step's
    // device ops repeat a few names.
    let mut by_name: FxHashMap<(StrId, Level), u64> = FxHashMap::default();
    for &id in device {
        let span = &trace.spans[id.0 as usize];
        let (name, level) = (trace.str(span.name), span.level);
        let mut mask = *by_name.entry((span.name, level)).or_insert_with(|| {
            bits(&|s| match s {
                Selector::Kernel(text) => name.contains(text.as_str()),
                Selector::Category(DeviceCategory::Kernel) => level == Level::DeviceKernel,
                Selector::Category(DeviceCategory::Copy) => {
                    matches!(level, Level::DeviceCopy | Level::DeviceSet)
                }
                Selector::Category(DeviceCategory::Device) => true,
                Selector::Links => {
                    level == Level::DeviceKernel
                        && crate::distributed::collectives::is_collective_kernel(name)
                }
                _ => false,
            })
        });
        let rank = trace.track(span.track).rank;
        if let Some(&call) = span.correlation.get().and_then(|c| calls.get(&(rank, c))) {
            let above = under.get(&call).copied().unwrap_or(0);
            mask |= above & op_bits;
            // A copy or memset whose call blocked: the call, made asynchronous.
            if async_bits != 0
                && matches!(level, Level::DeviceCopy | Level::DeviceSet)
                && super::super::graph::is_blocking_call(trace, call)
            {
                let made_async = (above | every_async) & async_bits;
                if made_async != 0 {
                    *masks.entry(call).or_insert(0) |= made_async;
                }
            }
        }
        if mask != 0 {
            masks.insert(id, mask);
        }
    }
    selection
}

/// The module calls `module:` changes select (`nn.Module: CLASS_N` spans of thread tracks), per
/// thread in call order, each with the changes it falls under (its own and those of the
/// selected calls around it). Read once per replay, then per window by time: a window's graph
/// holds only the trace's ops, and a module call is not one.
#[derive(Debug, Default, Clone)]
pub(super) struct ModuleCalls {
    pub(super) per_track: FxHashMap<TrackId, Vec<ModuleCall>>,
    /// Whether any change selects module calls (else none is kept).
    pub(super) wanted: bool,
    /// Whether every call kept is linked ([`ModuleCalls::link`]).
    pub(super) linked: bool,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct ModuleCall {
    pub(super) start: Ns,
    pub(super) end: Ns,
    /// The selected call around it (an index in its thread's list), or `u32::MAX`.
    pub(super) parent: u32,
    /// The changes it falls under.
    pub(super) bits: u64,
    /// The changes that select it (its class's).
    pub(super) own: u64,
}

impl ModuleCalls {
    /// The calls `changes` select (none without a `module:` change: nothing is read).
    pub(super) fn new(trace: &Trace, changes: &[Scale]) -> ModuleCalls {
        let mut calls = ModuleCalls::for_changes(changes);
        if calls.wanted {
            for span in &trace.spans {
                calls.add(trace, span, changes);
            }
        }
        calls.link();
        calls
    }

    /// No call yet; calls are kept ([`ModuleCalls::add`]) when `changes` has a `module:`
    /// change.
    pub(super) fn for_changes(changes: &[Scale]) -> ModuleCalls {
        ModuleCalls {
            wanted: change_bits(changes, &|s| matches!(s, Selector::Module(_))) != 0,
            ..ModuleCalls::default()
        }
    }

    /// Keeps `span` of `trace` when it is a call of a module class `changes` select.
    pub(super) fn add(&mut self, trace: &Trace, span: &Span, changes: &[Scale]) {
        if !self.wanted
            || span.end <= span.start
            || !matches!(trace.track(span.track).kind, TrackKind::Thread { .. })
        {
            return;
        }
        let Some((class, _)) = crate::cross_stack::modules::module_of(trace.str(span.name)) else {
            return;
        };
        let own = change_bits(
            changes,
            &|s| matches!(s, Selector::Module(c) if c.as_str() == class),
        );
        if own != 0 {
            self.linked = false;
            self.per_track
                .entry(span.track)
                .or_default()
                .push(ModuleCall {
                    start: span.start,
                    end: span.end,
                    parent: u32::MAX,
                    bits: own,
                    own,
                });
        }
    }

    /// Adds the calls of another file's tracks, which come after the `track_base` tracks of
    /// the files before it.
    pub(super) fn append(&mut self, other: ModuleCalls, track_base: u32) {
        for (track, calls) in other.per_track {
            self.linked = false;
            self.per_track
                .entry(TrackId(track.0 + track_base))
                .or_default()
                .extend(calls);
        }
    }

    /// Each thread's calls in call order, each linked to the selected call around it (once
    /// every call is added; again after more are).
    pub(super) fn link(&mut self) {
        if self.linked {
            return;
        }
        self.linked = true;
        for list in self.per_track.values_mut() {
            list.sort_by_key(|c| (c.start, std::cmp::Reverse(c.end)));
            let mut open: Vec<u32> = Vec::new();
            for k in 0..list.len() {
                list[k].parent = u32::MAX;
                list[k].bits = list[k].own;
                while open
                    .last()
                    .is_some_and(|&top| list[top as usize].end <= list[k].start)
                {
                    open.pop();
                }
                if let Some(&parent) = open.last() {
                    list[k].parent = parent;
                    list[k].bits |= list[parent as usize].bits;
                }
                open.push(k as u32);
            }
        }
    }

    /// [`ModuleCalls::new`] for each set of changes.
    pub(super) fn of_sets(trace: &Trace, sets: &[Vec<Scale>]) -> Vec<ModuleCalls> {
        sets.iter()
            .map(|set| ModuleCalls::new(trace, &set[..set.len().min(MAX_CHANGES)]))
            .collect()
    }

    /// The changes of the selected calls open on `track` at `ts` (0 outside any).
    pub(super) fn around(&self, track: TrackId, ts: Ns) -> u64 {
        let Some(list) = self.per_track.get(&track) else {
            return 0;
        };
        // The innermost open call is the last one started by `ts` or one of the calls around
        // it: calls nest.
        let mut at = list.partition_point(|c| c.start <= ts).checked_sub(1);
        while let Some(k) = at {
            let call = list[k];
            if ts < call.end {
                return call.bits;
            }
            at = (call.parent != u32::MAX).then_some(call.parent as usize);
        }
        0
    }
}
