//! Naming a loop after what its iterations line up with ([`attach_lines_up`]): the
//! annotation or module class with one instance per iteration, the loop a loop nests in, and
//! the rewording of loops that are layers inside one step.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, Trace, TrackKind};

use super::diagnosis::Diagnosis;
use super::report::IterationsReport;

/// Share of an iteration's ops one instance must own, and share of that instance's ops the
/// iteration must hold, for the iteration to coincide with the instance.
pub const LINES_UP_SHARE: f64 = 0.9;

/// The key of an enclosing CPU span for [`attach_lines_up`]: annotations (Operation/Phase
/// level) by name with digit runs as `*`, `nn.Module: NAME_N` frames by class `NAME`.
fn lines_up_key(trace: &Trace, span: &strato_trace::Span) -> Option<(&'static str, String)> {
    let name = trace.str(span.name);
    match crate::scope::effective_level(trace, span) {
        Level::Operation | Level::Phase => {
            let mut key = String::with_capacity(name.len());
            for c in name.chars() {
                if c.is_ascii_digit() {
                    if !key.ends_with('*') {
                        key.push('*');
                    }
                } else {
                    key.push(c);
                }
            }
            Some(("annotation", key))
        }
        Level::Python => {
            let class = name.strip_prefix("nn.Module: ")?;
            let class = match class.rsplit_once('_') {
                Some((c, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => c,
                _ => class,
            };
            Some(("module", class.to_owned()))
        }
        _ => None,
    }
}

/// Sets `lines_up_with`, `lines_up_kind` and `inside_loop` of every sequence of `report`
/// (mined from `analyzed`'s trace), and rewords the loops of one-step traces.
///
/// Rules: each device op of the loop's stream is keyed by the annotations and module frames on
/// its chain of parents ([`crate::cross_stack::hierarchy`]: launch, then the CPU spans around it)
/// and on the chain of the operation it belongs to ([`crate::scope`]). A key
/// *lines up* with the loop when every iteration has one instance (span) of that key owning at
/// least [`LINES_UP_SHARE`] of the iteration's ops, that instance's ops on the stream are at
/// least that share inside the iteration (except for the first and last iterations, which the
/// trace's edges may cut), and no instance serves two iterations. Of the keys
/// that line up, the one with the highest mean share wins (annotations before modules on a
/// tie). When no key lines up with every iteration, the key whose instances line up with the
/// most iterations (distinct instances, at least two and at least half of the iterations;
/// then the highest mean share) is named as a partial match, with that count in
/// `lines_up_iterations`: a loop that runs past the layers (a tail of other blocks repeating
/// the same ops) is still named after its layers, and says how many of them there are. A loop whose
/// iterations each contain at least two iterations of another loop on the same stream is *inside*
/// that loop (steps containing layers). When the loop lines up with a module class and the rank has
/// at most one `ProfilerStep#N`, or when (nearly) all its iterations' ops lie inside one step
/// annotation (a name containing `step`) it does not line up with, its between-iteration findings
/// (CPU/copy-bound, irregular) are replaced by [`Diagnosis::LayersInOneStep`].
pub fn attach_lines_up(analyzed: &crate::analyzed::Analyzed, report: &mut IterationsReport) {
    let trace = analyzed.trace();
    let h = analyzed.hierarchy();
    // Device ops per (rank, device, stream), sorted by start.
    let mut stream_ops: FxHashMap<(u32, i64, i64), Vec<u32>> = FxHashMap::default();
    let mut steps_per_rank: FxHashMap<u32, usize> = FxHashMap::default();
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        if let TrackKind::DeviceQueue { device, queue } = track.kind {
            if span.level.is_device_op() && span.level != Level::DeviceSync {
                stream_ops
                    .entry((track.rank.0, device, queue))
                    .or_default()
                    .push(i as u32);
            }
        } else if crate::scope::is_step_name(trace.str(span.name)) {
            *steps_per_rank.entry(track.rank.0).or_default() += 1;
        }
    }
    for v in stream_ops.values_mut() {
        v.sort_by_key(|&i| (trace.spans[i as usize].start, i));
    }
    let operation_of: FxHashMap<u32, u32> = analyzed
        .scopes()
        .device_owners
        .iter()
        .filter_map(|o| Some((o.span, o.operation?)))
        .collect();
    let mut keys = LinesUpKeys::default();
    let mut key_of_span: FxHashMap<u32, Option<u32>> = FxHashMap::default();
    let mut keyed: FxHashMap<(u32, i64, i64), KeyedStream> = FxHashMap::default();
    for seq in &report.sequences {
        let id = (seq.rank_index, seq.device, seq.stream);
        if keyed.contains_key(&id) {
            continue;
        }
        let ops = stream_ops.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let mut stream = KeyedStream::default();
        for &op in ops {
            // The op's own chain, then the chain of the operation it belongs to (its launch
            // may be on another thread than the annotations: autograd's backward thread).
            let own = h.chain(op).into_iter().skip(1);
            let scoped = operation_of
                .get(&op)
                .map(|&o| h.chain(o))
                .unwrap_or_default();
            let keyed_chain = own.chain(scoped).filter_map(|c| {
                let key = *key_of_span
                    .entry(c)
                    .or_insert_with(|| keys.number(trace, &trace.spans[c as usize]));
                key.map(|k| (k, c))
            });
            stream.push(trace.spans[op as usize].start, keyed_chain);
        }
        keyed.insert(id, stream);
    }
    name_loops(report, &keyed, &keys.names, &steps_per_rank);
}

/// The keys of [`attach_lines_up`] met so far, each kept once and named by its number.
#[derive(Debug, Default)]
pub(super) struct LinesUpKeys {
    pub(super) names: Vec<Key>,
    number: FxHashMap<Key, u32>,
}

impl LinesUpKeys {
    /// The number of `span`'s key, `None` when it has none ([`lines_up_key`]).
    pub(super) fn number(&mut self, trace: &Trace, span: &strato_trace::Span) -> Option<u32> {
        let key = lines_up_key(trace, span)?;
        Some(*self.number.entry(key).or_insert_with_key(|key| {
            self.names.push(key.clone());
            self.names.len() as u32 - 1
        }))
    }
}

/// A key of [`attach_lines_up`]: its kind (`"annotation"`, `"module"`) and name.
pub(super) type Key = (&'static str, String);

/// One stream's ops as [`name_loops`] reads them: each op's start (sorted) and keyed
/// instances (all ops' in one list, each op's from its offset), and each instance's op count.
#[derive(Debug)]
pub(super) struct KeyedStream {
    starts: Vec<Ns>,
    /// Where each op's instances start in `keys`, and their end.
    offsets: Vec<u32>,
    keys: Vec<(u32, u32)>,
    totals: FxHashMap<u32, usize>,
}

impl Default for KeyedStream {
    fn default() -> Self {
        KeyedStream {
            starts: Vec::new(),
            offsets: vec![0],
            keys: Vec::new(),
            totals: FxHashMap::default(),
        }
    }
}

impl KeyedStream {
    /// The next op (by start): its start and the keyed spans of its chains, in chain order (an
    /// instance met again is not counted twice).
    pub(super) fn push(&mut self, start: Ns, chain: impl Iterator<Item = (u32, u32)>) {
        let first = *self.offsets.last().unwrap_or(&0) as usize;
        for (k, c) in chain {
            if self.keys[first..].iter().any(|kept| kept.1 == c) {
                continue;
            }
            *self.totals.entry(c).or_default() += 1;
            self.keys.push((k, c));
        }
        self.starts.push(start);
        self.offsets.push(self.keys.len() as u32);
    }

    /// The keyed instances of ops `lo..hi`, op by op.
    fn keys_of(&self, lo: usize, hi: usize) -> impl Iterator<Item = &[(u32, u32)]> + '_ {
        (lo..hi).map(|i| &self.keys[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
}

/// The rules of [`attach_lines_up`] over each mined stream's keyed ops (`keyed`, by (rank
/// index, device, stream); `key_names` by key number) and the `ProfilerStep#N` spans per rank
/// index.
pub(super) fn name_loops(
    report: &mut IterationsReport,
    keyed: &FxHashMap<(u32, i64, i64), KeyedStream>,
    key_names: &[Key],
    steps_per_rank: &FxHashMap<u32, usize>,
) {
    let windows: Vec<Vec<(Ns, Ns)>> = report
        .sequences
        .iter()
        .map(|s| {
            s.iterations
                .iter()
                .map(|i| (i.start_ns, i.end_ns))
                .collect()
        })
        .collect();
    let mut in_one_step: rustc_hash::FxHashSet<(u32, i64, i64, usize)> = Default::default();
    for seq in report.sequences.iter_mut() {
        let id = (seq.rank_index, seq.device, seq.stream);
        let stream = &keyed[&id];
        let (starts, totals) = (&stream.starts, &stream.totals);
        // Per key: the dominant instance of each iteration and its share.
        // Per key, per iteration: (instance, share) of its dominant instance.
        let mut candidates: FxHashMap<Key, Vec<Option<(u32, f64)>>> = FxHashMap::default();
        let n = seq.iterations.len();
        for (j, it) in seq.iterations.iter().enumerate() {
            let lo = starts.partition_point(|&s| s < it.start_ns);
            let hi = starts.partition_point(|&s| s <= it.end_ns);
            let count = hi.saturating_sub(lo);
            if count == 0 {
                continue;
            }
            // Keyed by the key itself, not its number: among instances of one key with the
            // same share, the first met in this map's order wins, as it always has.
            let mut by_instance: FxHashMap<(&Key, u32), usize> = FxHashMap::default();
            for keys in stream.keys_of(lo, hi) {
                for &(k, c) in keys {
                    *by_instance.entry((&key_names[k as usize], c)).or_default() += 1;
                }
            }
            for ((k, c), m) in by_instance {
                let share = m as f64 / count as f64;
                let inside = m as f64 / totals[&c].max(1) as f64;
                // The first and last iterations may be cut by the trace's edges.
                let edge = j == 0 || j + 1 == n;
                if share < LINES_UP_SHARE || (inside < LINES_UP_SHARE && !edge) {
                    continue;
                }
                let slot = &mut candidates.entry(k.clone()).or_insert_with(|| vec![None; n])[j];
                if slot.is_none_or(|s| share > s.1) {
                    *slot = Some((c, share));
                }
            }
        }
        let mut best: Option<((&'static str, String), f64)> = None;
        // Best partial match: (key, iterations lined up, mean share over them).
        let mut partial: Option<((&'static str, String), usize, f64)> = None;
        for (k, slots) in candidates {
            let Some(found) = slots.iter().copied().collect::<Option<Vec<(u32, f64)>>>() else {
                // Some iterations line up: count them, each instance once.
                let mut seen: rustc_hash::FxHashSet<u32> = Default::default();
                let lined: Vec<f64> = slots
                    .iter()
                    .flatten()
                    .filter(|f| seen.insert(f.0))
                    .map(|f| f.1)
                    .collect();
                let count = lined.len();
                if count < 2 || 2 * count < n {
                    continue;
                }
                let mean_share = lined.iter().sum::<f64>() / count as f64;
                let better = partial.as_ref().is_none_or(|(bk, bc, bs)| {
                    (count, mean_share, k.0 == "annotation", &k.1)
                        > (*bc, *bs, bk.0 == "annotation", &bk.1)
                });
                if better {
                    partial = Some((k, count, mean_share));
                }
                continue;
            };
            let mut instances: Vec<u32> = found.iter().map(|f| f.0).collect();
            instances.sort_unstable();
            instances.dedup();
            if instances.len() != found.len() || found.is_empty() {
                continue;
            }
            let mean_share = found.iter().map(|f| f.1).sum::<f64>() / found.len() as f64;
            let better = best.as_ref().is_none_or(|(bk, bs)| {
                mean_share > *bs
                    || (mean_share == *bs
                        && (k.0 == "annotation", &k.1) > (bk.0 == "annotation", &bk.1))
            });
            if better {
                best = Some((k, mean_share));
            }
        }
        if let Some(((kind, name), _)) = best {
            seq.lines_up_kind = Some(kind);
            seq.lines_up_with = Some(name);
        } else if let Some(((kind, name), count, _)) = partial {
            seq.lines_up_kind = Some(kind);
            seq.lines_up_with = Some(name);
            seq.lines_up_iterations = Some(count);
        }
        // One step annotation instance holding (nearly) all the iterations' ops.
        let mut in_step: FxHashMap<u32, usize> = FxHashMap::default();
        let mut inside_ops = 0usize;
        for it in &seq.iterations {
            let lo = starts.partition_point(|&s| s < it.start_ns);
            let hi = starts.partition_point(|&s| s <= it.end_ns);
            inside_ops += hi.saturating_sub(lo);
            for keys in stream.keys_of(lo.min(hi), hi) {
                let mut seen: Vec<u32> = Vec::new();
                for (k, c) in keys {
                    let (kind, name) = &key_names[*k as usize];
                    if *kind == "annotation"
                        && name.to_ascii_lowercase().contains("step")
                        && !seen.contains(c)
                    {
                        seen.push(*c);
                        *in_step.entry(*c).or_default() += 1;
                    }
                }
            }
        }
        let single_step = in_step
            .values()
            .any(|&m| inside_ops > 0 && m as f64 >= LINES_UP_SHARE * inside_ops as f64);
        if single_step && seq.lines_up_kind != Some("annotation") && seq.iterations.len() > 1 {
            in_one_step.insert((seq.rank_index, seq.device, seq.stream, seq.loop_index));
        }
    }
    // Inside another loop of the same stream: each of its iterations holds >= 2 of ours.
    let ids: Vec<(u32, i64, i64, usize)> = report
        .sequences
        .iter()
        .map(|s| (s.rank_index, s.device, s.stream, s.loop_index))
        .collect();
    for (si, seq) in report.sequences.iter_mut().enumerate() {
        let id = (seq.rank_index, seq.device, seq.stream);
        let mined = seq.inside_loop;
        seq.inside_loop = mined.or_else(|| {
            (0..windows.len())
                .filter(|&o| o != si && (ids[o].0, ids[o].1, ids[o].2) == id)
                .find(|&o| contains_iterations(&windows[o], &windows[si]))
                .map(|o| ids[o].3)
        });
        let one_step = (steps_per_rank.get(&seq.rank_index).copied().unwrap_or(0) <= 1
            && seq.lines_up_kind == Some("module"))
            || in_one_step.contains(&(id.0, id.1, id.2, seq.loop_index));
        if one_step {
            let module = if seq.lines_up_kind == Some("module") {
                seq.lines_up_with.clone()
            } else {
                None
            };
            seq.diagnosis.retain(|d| {
                !matches!(
                    d,
                    Diagnosis::CpuBound { .. }
                        | Diagnosis::CopyBound { .. }
                        | Diagnosis::Irregular { .. }
                )
            });
            let lined_up = match module {
                Some(_) => seq.lines_up_iterations.unwrap_or(seq.iterations.len()),
                None => seq.iterations.len(),
            };
            seq.diagnosis.insert(
                0,
                Diagnosis::LayersInOneStep {
                    module,
                    iterations: seq.iterations.len(),
                    lined_up,
                },
            );
        }
    }
}

/// True when every iteration of `outer` that contains any iteration of `inner` contains at
/// least two, and at least one does.
fn contains_iterations(outer: &[(Ns, Ns)], inner: &[(Ns, Ns)]) -> bool {
    let mut any = false;
    for &(o0, o1) in outer {
        let k = inner
            .iter()
            .filter(|&&(i0, i1)| o0 <= i0 && i1 <= o1)
            .count();
        if k == 1 {
            return false;
        }
        any |= k >= 2;
    }
    any
}
