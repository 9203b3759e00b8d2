//! The nn.Module tree (`strato layers --by module`): PyTorch's `python_function` spans named
//! `nn.Module: <Class>_<N>` give the model's structure. A *call* is one such span; an
//! *instance* is one module object (one `_N` suffix: `Qwen2DecoderLayer_3`), whose calls are
//! counted apart; a *class* folds its instances (`Qwen2DecoderLayer` over layers 0..23) with
//! the spread of their per-instance totals.
//!
//! Per call: inclusive CPU time (its duration), exclusive CPU time (minus the module calls
//! directly inside it), device time of the device ops launched while it is the innermost module
//! call on the launching thread (exclusive) and of its whole subtree (inclusive). Nesting is by
//! time containment on the thread (Python frames nest properly). A call nested inside a call of
//! the same class (`Sequential` in `Sequential`) is not added again to its class's totals (it
//! still counts in its own instance's total, from which the spread is taken).
//!
//! Recomputed forward (activation checkpointing): a module call running inside PyTorch's
//! autograd engine (`autograd::engine::evaluate_function: ...` encloses it on its thread) is
//! forward work recomputed during backward; [`Recompute`] sums the outermost such calls' CPU
//! and device time: the cost of checkpointing.
//!
//! The icicle tree ([`ModuleNode`]) folds calls by their class path from the root (instances
//! folded); recomputed roots are prefixed `[recompute]`.
//!
//! Window: the whole trace; over several ranks, on the job's clock (each rank's window shifted
//! as `strato collectives` aligns the ranks' clocks, [`job_clock_shifts`]), so ranks whose
//! clocks differ do not stretch it. Conservation: `device_ns_in_modules +
//! device_ns_outside_modules = device_ns`; the tree's roots add up to `device_ns_in_modules`
//! and to the root calls' CPU time; each node's children sum to at most the node (inclusive
//! times).

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Ns, Trace, TrackKind};

use crate::analyzed::Analyzed;
use crate::distributed::clock_align::RankWindows;
use crate::distributed::collectives::{job_clock_shifts, rank_summaries, RankCollectives};
use crate::registry::RankPart;
use crate::scope::is_device_work;

mod registration;
mod stream;
pub(crate) use registration::modules_table;
pub use registration::Modules;
pub use stream::ModulesStream;

/// The prefix PyTorch's profiler gives module spans (`with_stack=True` / `with_modules=True`).
pub const MODULE_PREFIX: &str = "nn.Module: ";
/// The name prefix of the autograd engine's per-node spans: what runs inside is backward.
pub const BACKWARD_PREFIX: &str = "autograd::engine::evaluate_function";

/// `(class, instance)` of a module span name: `nn.Module: Linear_12` -> (`Linear`,
/// `Linear_12`); a name without a numeric suffix is its own class and instance.
pub fn module_of(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(MODULE_PREFIX)?.trim();
    if rest.is_empty() {
        return None;
    }
    let class = match rest.rsplit_once('_') {
        Some((c, n)) if !c.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            c
        }
        _ => rest,
    };
    Some((class, rest))
}

/// Spread of per-instance totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Spread {
    pub min_ns: Ns,
    pub max_ns: Ns,
    pub mean_ns: f64,
    pub std_ns: f64,
}

fn spread(values: &[Ns]) -> Spread {
    if values.is_empty() {
        return Spread::default();
    }
    let n = values.len() as f64;
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    Spread {
        min_ns: *values.iter().min().unwrap_or(&0),
        max_ns: *values.iter().max().unwrap_or(&0),
        mean_ns: mean,
        std_ns: var.sqrt(),
    }
}

/// One module class, its instances folded.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleClass {
    pub class: String,
    /// Distinct instances (`_N` suffixes).
    pub instances: usize,
    pub calls: usize,
    pub cpu_inclusive_ns: Ns,
    pub cpu_exclusive_ns: Ns,
    /// Device time of the device ops launched under its calls (inclusive).
    pub device_ns: Ns,
    pub device_exclusive_ns: Ns,
    /// Spread over instances of each instance's inclusive CPU time.
    pub cpu_spread: Spread,
    /// Spread over instances of each instance's inclusive device time.
    pub device_spread: Spread,
    /// Calls of this class recomputed under backward (activation checkpointing).
    pub recomputed_calls: usize,
}

/// One node of the icicle: calls folded by class path.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleNode {
    pub class: String,
    pub depth: usize,
    pub parent: Option<usize>,
    pub calls: usize,
    /// Distinct instances among the calls.
    pub instances: usize,
    pub cpu_inclusive_ns: Ns,
    pub device_ns: Ns,
}

/// Forward work recomputed during backward.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Recompute {
    /// Recomputed module calls (all depths).
    pub calls: usize,
    /// Outermost recomputed calls (their times are summed below).
    pub root_calls: usize,
    pub cpu_ns: Ns,
    pub device_ns: Ns,
    /// Classes of the outermost recomputed calls.
    pub classes: Vec<String>,
}

/// The module tree of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct ModulesReport {
    pub window_start_ns: Ns,
    pub window_end_ns: Ns,
    pub module_calls: usize,
    /// Inclusive CPU time of the root module calls.
    pub root_cpu_ns: Ns,
    pub device_ns: Ns,
    pub device_ns_in_modules: Ns,
    pub device_ns_outside_modules: Ns,
    /// By inclusive device time, then CPU time, largest first.
    pub modules: Vec<ModuleClass>,
    /// The icicle, parents before children.
    pub tree: Vec<ModuleNode>,
    pub recompute: Recompute,
    /// What the report was made of, for the merge of several rank files ([`merged`]; not
    /// shown).
    #[serde(skip)]
    pub(crate) gathered: Box<RankModules>,
}

/// A rank file's module calls as the merge of several rank files reads them
/// ([`ModulesReport::gathered`], [`merged`]): each call's extent, name, parent (its position),
/// whether it is recomputed and the device time it owns, in trace order; the file's device time,
/// its ranks' windows and collectives (for the job's clock) and its number of spans.
#[derive(Debug, Clone, Default)]
pub(crate) struct RankModules {
    calls: Vec<RankCall>,
    total: Ns,
    in_modules: Ns,
    windows: RankWindows,
    collectives: Vec<RankCollectives>,
    spans: u32,
}

#[derive(Debug, Clone)]
struct RankCall {
    start: Ns,
    end: Ns,
    name: String,
    parent: Option<u32>,
    recomputed: bool,
    exclusive: Ns,
    inclusive: Ns,
}

impl RankModules {
    fn of(trace: &Trace, g: &Gathered) -> RankModules {
        let position = |i: u32| g.calls.binary_search_by_key(&i, |c| c.index).ok();
        RankModules {
            calls: (g.calls.iter())
                .map(|c| RankCall {
                    start: c.start,
                    end: c.end,
                    name: trace.str(c.name).to_owned(),
                    parent: (g.parent.get(&c.index).copied())
                        .and_then(position)
                        .map(|p| p as u32),
                    recomputed: g.recomputed.contains(&c.index),
                    exclusive: g.device.exclusive.get(&c.index).copied().unwrap_or(0),
                    inclusive: g.device.inclusive.get(&c.index).copied().unwrap_or(0),
                })
                .collect(),
            total: g.device.total,
            in_modules: g.device.in_modules,
            windows: g.windows.clone(),
            collectives: g.collectives.clone(),
            spans: g.spans,
        }
    }
}

/// The module tree of a job from its rank files' reports, in input order: their calls one
/// after the other (each file's after the files before it, as the whole job orders them),
/// their device time added up, their ranks and collectives numbered as the job numbers them;
/// the report then made as the whole job's. Equal to [`modules`] over the whole job: a call's
/// parent and the device ops it owns are on its own rank.
pub(crate) fn merged(parts: Vec<RankPart<ModulesReport>>) -> ModulesReport {
    let mut names = Trace::default();
    let mut g = Gathered::default();
    for RankPart {
        value,
        first_rank,
        job_ranks,
    } in parts
    {
        let part = *value.gathered;
        for c in &part.collectives {
            let job_rank = job_ranks.get(c.rank.0 as usize).copied().flatten();
            g.collectives.push(c.in_job(first_rank, job_rank, g.spans));
        }
        g.windows.add_all(first_rank, &part.windows);
        g.spans = g.spans.saturating_add(part.spans);
        let first = g.calls.len() as u32;
        for (k, call) in part.calls.into_iter().enumerate() {
            let index = first + k as u32;
            g.calls.push(Call {
                index,
                start: call.start,
                end: call.end,
                name: names.strings.intern(&call.name),
            });
            if let Some(p) = call.parent {
                g.parent.insert(index, first + p);
            }
            if call.recomputed {
                g.recomputed.insert(index);
            }
            if call.exclusive != 0 {
                g.device.exclusive.insert(index, call.exclusive);
            }
            if call.inclusive != 0 {
                g.device.inclusive.insert(index, call.inclusive);
            }
        }
        g.device.total = g.device.total.saturating_add(part.total);
        g.device.in_modules = g.device.in_modules.saturating_add(part.in_modules);
    }
    report_of(&names, g)
}

/// What [`enclosing`] gives: per span, the marked span around it (4 bytes a span).
#[derive(Debug, Clone)]
pub struct Enclosing {
    /// Per span, the marked span around it, or [`Enclosing::NONE`].
    around: Vec<u32>,
}

impl Enclosing {
    const NONE: u32 = u32::MAX;

    /// The marked span around span `i` (`None` outside any, and for spans off thread tracks).
    pub fn of(&self, i: u32) -> Option<u32> {
        self.around
            .get(i as usize)
            .copied()
            .filter(|&a| a != Self::NONE)
    }
}

/// Per span of a thread track, the innermost span of `marked` on the same thread that contains
/// it (for a marked span, the marked span around it). By time containment; spans that overlap
/// without nesting end the enclosing one.
pub fn enclosing(trace: &Trace, marked: &[bool]) -> Enclosing {
    let n = trace.spans.len();
    if !marked.contains(&true) {
        return Enclosing { around: Vec::new() };
    }
    let mut around: Vec<u32> = vec![Enclosing::NONE; n];
    let mut by_track: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (i, s) in trace.spans.iter().enumerate() {
        if matches!(trace.track(s.track).kind, TrackKind::Thread { .. }) {
            by_track.entry(s.track.0).or_default().push(i as u32);
        }
    }
    for (_, mut spans) in by_track {
        // Outer before inner at equal starts; marked spans before others of the same extent.
        spans.sort_unstable_by_key(|&i| {
            let s = &trace.spans[i as usize];
            (s.start, std::cmp::Reverse(s.end), !marked[i as usize], i)
        });
        enclose(
            spans.len(),
            |k| {
                (
                    trace.spans[spans[k] as usize].end,
                    marked[spans[k] as usize],
                )
            },
            |k, outer| {
                around[spans[k] as usize] = outer.map_or(Enclosing::NONE, |o| spans[o]);
            },
        );
    }
    Enclosing { around }
}

/// The enclosing sweep of one thread: its `len` spans sorted by start, longer first, marked
/// first at equal extents (`at(k)`: the `k`-th one's end and whether it is marked). Visits each
/// in that order with the innermost marked span before it that contains it (`visit(k,
/// Some(its k))`); a span that ends after the marked span on top (overlapping without nesting)
/// ends it.
pub(crate) fn enclose(
    len: usize,
    at: impl Fn(usize) -> (Ns, bool),
    mut visit: impl FnMut(usize, Option<usize>),
) {
    let mut stack: Vec<usize> = Vec::new();
    for k in 0..len {
        let (end, marked) = at(k);
        while stack.last().is_some_and(|&top| at(top).0 < end) {
            stack.pop();
        }
        visit(k, stack.last().copied());
        if marked {
            stack.push(k);
        }
    }
}

/// What the module report is made of ([`report_of`]): the module calls with their module
/// parents, which are recomputed, and the device time each owns; gathered from the whole trace
/// ([`modules`]) or while one file streams ([`ModulesStream`]).
#[derive(Debug, Default)]
struct Gathered {
    /// The module calls, in trace order.
    calls: Vec<Call>,
    /// Call (span id) -> the module call around it.
    parent: FxHashMap<u32, u32>,
    /// Calls under the autograd engine (recomputed forward).
    recomputed: rustc_hash::FxHashSet<u32>,
    /// Each rank's span extents, on its own clock: the window.
    windows: RankWindows,
    /// Each rank's collectives, which put the windows on the job's clock.
    collectives: Vec<RankCollectives>,
    /// Spans read.
    spans: u32,
    device: DeviceTime,
}

/// One module call: its span id, extent and name.
#[derive(Debug, Clone, Copy)]
struct Call {
    index: u32,
    start: Ns,
    end: Ns,
    name: strato_trace::StrId,
}

/// The device time of a trace's device work, and what each module call owns of it.
#[derive(Debug, Default)]
struct DeviceTime {
    /// Device time launched while the call is the innermost module call.
    exclusive: FxHashMap<u32, Ns>,
    /// Device time launched under the call.
    inclusive: FxHashMap<u32, Ns>,
    total: Ns,
    in_modules: Ns,
}

impl DeviceTime {
    /// A device op of `duration` launched under module call `owner` (`parent`: each call's
    /// module parent).
    fn add(&mut self, duration: Ns, owner: Option<u32>, parent: &FxHashMap<u32, u32>) {
        self.total = self.total.saturating_add(duration);
        let Some(m) = owner else { return };
        self.in_modules = self.in_modules.saturating_add(duration);
        let sum = self.exclusive.entry(m).or_insert(0);
        *sum = sum.saturating_add(duration);
        let mut cur = Some(m);
        while let Some(c) = cur {
            let sum = self.inclusive.entry(c).or_insert(0);
            *sum = sum.saturating_add(duration);
            cur = parent.get(&c).copied();
        }
    }
}

/// Builds the module tree.
pub fn modules(analyzed: &Analyzed) -> ModulesReport {
    let (trace, scopes) = (analyzed.trace(), analyzed.scopes());
    let n = trace.spans.len();
    let on_thread = |i: u32| {
        let s = &trace.spans[i as usize];
        matches!(trace.track(s.track).kind, TrackKind::Thread { .. })
    };
    let is_module: Vec<bool> = (0..n as u32)
        .map(|i| on_thread(i) && module_of(trace.str(trace.spans[i as usize].name)).is_some())
        .collect();
    let is_backward: Vec<bool> = trace
        .spans
        .iter()
        .map(|s| trace.str(s.name).starts_with(BACKWARD_PREFIX))
        .collect();
    let module_around = enclosing(trace, &is_module);
    let backward_around = enclosing(trace, &is_backward);
    let mut g = Gathered {
        collectives: rank_summaries(trace),
        spans: n as u32,
        ..Gathered::default()
    };
    for (i, s) in trace.spans.iter().enumerate() {
        if !is_module[i] {
            continue;
        }
        let i = i as u32;
        g.calls.push(Call {
            index: i,
            start: s.start,
            end: s.end,
            name: s.name,
        });
        if let Some(p) = module_around.of(i) {
            g.parent.insert(i, p);
        }
        if backward_around.of(i).is_some() {
            g.recomputed.insert(i);
        }
    }
    // Device time: exclusive per call, then up the module chain.
    for (i, s) in trace.spans.iter().enumerate() {
        g.windows.add(trace.track(s.track).rank, s.start, s.end);
        if !matches!(trace.track(s.track).kind, TrackKind::DeviceQueue { .. })
            || !is_device_work(s.level)
        {
            continue;
        }
        let owner = scopes.launch_of(trace, i as u32).and_then(|l| {
            if is_module[l as usize] {
                Some(l)
            } else {
                module_around.of(l)
            }
        });
        g.device.add(s.duration(), owner, &g.parent);
    }
    report_of(trace, g)
}

/// The module report of what was gathered (`trace`: the names' strings).
fn report_of(trace: &Trace, g: Gathered) -> ModulesReport {
    let gathered = Box::new(RankModules::of(trace, &g));
    let Gathered {
        calls: kept,
        parent: parents,
        recomputed: recomputed_set,
        windows,
        collectives,
        spans: _,
        device,
    } = g;
    let shifts = if collectives.is_empty() {
        Vec::new()
    } else {
        job_clock_shifts(&collectives, windows.ranks())
    };
    let mut window = windows.on_job_clock(&shifts);
    let DeviceTime {
        exclusive: dev_excl,
        inclusive: dev_incl,
        total: device_ns,
        in_modules,
    } = device;
    let call_at = |i: u32| {
        kept.binary_search_by_key(&i, |c| c.index)
            .ok()
            .map(|k| &kept[k])
    };
    let id_of = |i: u32| call_at(i).and_then(|c| module_of(trace.str(c.name)));
    let duration = |i: u32| call_at(i).map_or(0, |c| c.end.saturating_sub(c.start));
    let parent_of = |i: u32| parents.get(&i).copied();
    let recomputed = |i: u32| recomputed_set.contains(&i);
    let calls: Vec<u32> = kept.iter().map(|c| c.index).collect();

    // CPU exclusive: minus direct child module calls.
    let mut child_cpu: FxHashMap<u32, Ns> = FxHashMap::default();
    for &c in &calls {
        if let Some(p) = parent_of(c) {
            let sum = child_cpu.entry(p).or_insert(0);
            *sum = sum.saturating_add(duration(c));
        }
    }

    // Classes.
    struct Acc<'a> {
        calls: usize,
        cpu_incl: Ns,
        cpu_excl: Ns,
        dev_incl: Ns,
        dev_excl: Ns,
        per_instance: FxHashMap<&'a str, (Ns, Ns)>,
        recomputed: usize,
    }
    let mut classes: FxHashMap<&str, Acc> = FxHashMap::default();
    let mut recompute = Recompute::default();
    let mut recompute_classes: Vec<String> = Vec::new();
    let mut root_cpu_ns: Ns = 0;
    for &c in &calls {
        let (class, instance) = id_of(c).unwrap_or(("", ""));
        let dur = duration(c);
        let di = dev_incl.get(&c).copied().unwrap_or(0);
        let excl = dur.saturating_sub(child_cpu.get(&c).copied().unwrap_or(0));
        // Nested in a call of the same class: not added to the class totals again.
        let mut nested_same = false;
        let mut cur = parent_of(c);
        while let Some(p) = cur {
            if id_of(p).map(|x| x.0) == Some(class) {
                nested_same = true;
                break;
            }
            cur = parent_of(p);
        }
        let a = classes.entry(class).or_insert_with(|| Acc {
            calls: 0,
            cpu_incl: 0,
            cpu_excl: 0,
            dev_incl: 0,
            dev_excl: 0,
            per_instance: FxHashMap::default(),
            recomputed: 0,
        });
        a.calls += 1;
        a.cpu_excl = a.cpu_excl.saturating_add(excl);
        a.dev_excl = a
            .dev_excl
            .saturating_add(dev_excl.get(&c).copied().unwrap_or(0));
        // An instance's calls are its own (a module object does not nest in itself).
        let inst = a.per_instance.entry(instance).or_insert((0, 0));
        inst.0 = inst.0.saturating_add(dur);
        inst.1 = inst.1.saturating_add(di);
        if !nested_same {
            a.cpu_incl = a.cpu_incl.saturating_add(dur);
            a.dev_incl = a.dev_incl.saturating_add(di);
        }
        let parent = parent_of(c);
        if parent.is_none() {
            root_cpu_ns = root_cpu_ns.saturating_add(dur);
        }
        if recomputed(c) {
            a.recomputed += 1;
            recompute.calls += 1;
            if parent.is_none_or(|p| !recomputed(p)) {
                recompute.root_calls += 1;
                recompute.cpu_ns = recompute.cpu_ns.saturating_add(dur);
                recompute.device_ns = recompute.device_ns.saturating_add(di);
                if !recompute_classes.iter().any(|k| k == class) {
                    recompute_classes.push(class.to_owned());
                }
            }
        }
    }
    recompute.classes = recompute_classes;
    let mut modules: Vec<ModuleClass> = classes
        .into_iter()
        .map(|(class, a)| {
            let cpu: Vec<Ns> = a.per_instance.values().map(|v| v.0).collect();
            let dev: Vec<Ns> = a.per_instance.values().map(|v| v.1).collect();
            ModuleClass {
                class: class.to_owned(),
                instances: a.per_instance.len(),
                calls: a.calls,
                cpu_inclusive_ns: a.cpu_incl,
                cpu_exclusive_ns: a.cpu_excl,
                device_ns: a.dev_incl,
                device_exclusive_ns: a.dev_excl,
                cpu_spread: spread(&cpu),
                device_spread: spread(&dev),
                recomputed_calls: a.recomputed,
            }
        })
        .collect();
    modules.sort_by(|a, b| {
        (b.device_ns, b.cpu_inclusive_ns, &a.class).cmp(&(
            a.device_ns,
            a.cpu_inclusive_ns,
            &b.class,
        ))
    });

    // The icicle: calls in start order so parents are placed before children.
    let mut ordered = calls.clone();
    ordered.sort_unstable_by_key(|&i| {
        let c = call_at(i).map_or((0, 0), |c| (c.start, c.end));
        (c.0, std::cmp::Reverse(c.1), i)
    });
    let mut tree: Vec<ModuleNode> = Vec::new();
    let mut node_of_call: FxHashMap<u32, usize> = FxHashMap::default();
    let mut child_index: FxHashMap<(Option<usize>, String), usize> = FxHashMap::default();
    let mut node_instances: Vec<FxHashMap<&str, ()>> = Vec::new();
    for &c in &ordered {
        let (class, instance) = id_of(c).unwrap_or(("", ""));
        let parent_node = parent_of(c).and_then(|p| node_of_call.get(&p).copied());
        let label = if parent_node.is_none() && recomputed(c) {
            format!("[recompute] {class}")
        } else {
            class.to_owned()
        };
        let idx = *child_index
            .entry((parent_node, label.clone()))
            .or_insert_with(|| {
                tree.push(ModuleNode {
                    class: label,
                    depth: parent_node.map_or(0, |p| tree[p].depth + 1),
                    parent: parent_node,
                    calls: 0,
                    instances: 0,
                    cpu_inclusive_ns: 0,
                    device_ns: 0,
                });
                node_instances.push(FxHashMap::default());
                tree.len() - 1
            });
        node_of_call.insert(c, idx);
        let t = &mut tree[idx];
        t.calls += 1;
        t.cpu_inclusive_ns = t.cpu_inclusive_ns.saturating_add(duration(c));
        t.device_ns = t
            .device_ns
            .saturating_add(dev_incl.get(&c).copied().unwrap_or(0));
        node_instances[idx].insert(instance, ());
    }
    for (t, inst) in tree.iter_mut().zip(&node_instances) {
        t.instances = inst.len();
    }
    if window.0 > window.1 {
        window = (0, 0);
    }
    ModulesReport {
        window_start_ns: window.0,
        window_end_ns: window.1,
        module_calls: calls.len(),
        root_cpu_ns,
        device_ns,
        device_ns_in_modules: in_modules,
        device_ns_outside_modules: device_ns - in_modules,
        modules,
        tree,
        recompute,
        gathered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;
    use strato_trace::Level;

    #[test]
    fn names_split_into_class_and_instance() {
        assert_eq!(
            module_of("nn.Module: Qwen2DecoderLayer_3"),
            Some(("Qwen2DecoderLayer", "Qwen2DecoderLayer_3"))
        );
        assert_eq!(module_of("nn.Module: ReLU"), Some(("ReLU", "ReLU")));
        assert_eq!(
            module_of("nn.Module: my_block"),
            Some(("my_block", "my_block"))
        );
        assert_eq!(module_of("aten::mm"), None);
        assert_eq!(module_of("nn.Module: "), None);
    }

    /// Model_0 [0,1000] > Layer_0 [100,400] > Linear_0 [150,300] (launch -> 50 ns kernel),
    /// Layer_1 [500,800] (launch -> 70 ns kernel); a kernel launched outside modules (30 ns);
    /// on the backward thread, evaluate_function [2000,3000] > Layer_0 [2100,2400] (launch ->
    /// 20 ns kernel): a recomputed call.
    #[test]
    fn tree_by_construction() {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let bw = b.thread(1, 2);
        let q = b.queue(0, 7);
        let py = Level::Python;
        b.span(t, py, "nn.Module: Model_0", 0, 1000);
        b.span(t, py, "nn.Module: Layer_0", 100, 400);
        b.span(t, py, "nn.Module: Linear_0", 150, 300);
        b.span(t, Level::AcceleratorApi, "launch", 160, 170)
            .correlation(1);
        b.span(q, Level::DeviceKernel, "k1", 5000, 5050)
            .correlation(1);
        b.span(t, py, "nn.Module: Layer_1", 500, 800);
        b.span(t, Level::AcceleratorApi, "launch", 600, 610)
            .correlation(2);
        b.span(q, Level::DeviceKernel, "k2", 5100, 5170)
            .correlation(2);
        b.span(t, Level::AcceleratorApi, "launch", 1200, 1210)
            .correlation(3);
        b.span(q, Level::DeviceKernel, "k3", 5200, 5230)
            .correlation(3);
        b.span(
            bw,
            Level::Backend,
            "autograd::engine::evaluate_function: ReluBackward0",
            2000,
            3000,
        );
        b.span(bw, py, "nn.Module: Layer_0", 2100, 2400);
        b.span(bw, Level::AcceleratorApi, "launch", 2200, 2210)
            .correlation(4);
        b.span(q, Level::DeviceKernel, "k4", 5300, 5320)
            .correlation(4);
        let trace = b.build();
        let r = modules(&Analyzed::new(&trace));
        // The same, streamed one span at a time.
        let stream = <Modules as crate::registry::Analysis>::stream(&Default::default());
        let streamed = crate::registry::fed_span_by_span(&trace, stream.expect("streams"));
        assert_eq!(
            serde_json::to_string(&streamed).ok(),
            serde_json::to_string(&r).ok()
        );
        assert_eq!(r.module_calls, 5);
        assert_eq!(r.device_ns, 50 + 70 + 30 + 20);
        assert_eq!(r.device_ns_in_modules, 50 + 70 + 20);
        assert_eq!(
            r.device_ns_in_modules + r.device_ns_outside_modules,
            r.device_ns
        );
        let class = |c: &str| r.modules.iter().find(|m| m.class == c).unwrap();
        let layer = class("Layer");
        assert_eq!((layer.instances, layer.calls), (2, 3));
        assert_eq!(layer.cpu_inclusive_ns, 300 + 300 + 300);
        assert_eq!(layer.device_ns, 50 + 70 + 20);
        assert_eq!(layer.cpu_exclusive_ns, (300 - 150) + 300 + 300);
        assert_eq!(layer.recomputed_calls, 1);
        // Per instance: Layer_0 600 ns CPU (two calls), Layer_1 300 ns.
        assert_eq!(
            (layer.cpu_spread.min_ns, layer.cpu_spread.max_ns),
            (300, 600)
        );
        let model = class("Model");
        assert_eq!((model.device_ns, model.cpu_exclusive_ns), (120, 1000 - 600));
        assert_eq!(r.recompute.root_calls, 1);
        assert_eq!((r.recompute.cpu_ns, r.recompute.device_ns), (300, 20));
        assert_eq!(r.recompute.classes, vec!["Layer".to_string()]);
        // Tree roots: Model and [recompute] Layer; their device time adds up.
        let roots: Vec<&ModuleNode> = r.tree.iter().filter(|n| n.parent.is_none()).collect();
        assert_eq!(roots.len(), 2);
        assert_eq!(
            roots.iter().map(|n| n.device_ns).sum::<Ns>(),
            r.device_ns_in_modules
        );
        assert!(roots.iter().any(|n| n.class == "[recompute] Layer"));
        let layer_node = r
            .tree
            .iter()
            .find(|n| n.class == "Layer" && n.depth == 1)
            .unwrap();
        assert_eq!((layer_node.calls, layer_node.instances), (2, 2));
    }
}
