//! Iterations (DeepProf, `papers/` seed 004, section IV): finds the training/inference
//! iterations of each device from its device activity alone, and measures them.
//!
//! - **Sequence**: per (rank, device), the *main stream* is the queue with the most kernels
//!   (DeepProf's main stream holds the framework's compute kernels; copy and assist streams
//!   hold few or none). Its device ops (kernels, copies, sets; not device-side syncs) in start
//!   order, each mapped to an integer symbol by name, form the string S.
//! - **Pattern**: a suffix array + LCP (SA-IS, Kasai; [`crate::patterns::suffix`]) of S, walked as
//!   suffix tree nodes. Given `i` iterations, the pattern is the longest substring that repeats c
//!   times with `i - eps < c <= i` (eps starts at i/2), is at most `|S| / i` long, and whose c
//!   occurrences do not overlap; when none qualifies eps doubles (DeepProf).
//!   Ties (same length and count: rotations of the loop when the trace starts or ends mid-way
//!   through an iteration) go to the candidate whose occurrences follow the largest device idle
//!   gap (median), then the earliest. When `i` is not given it is estimated: the longest
//!   disjoint-repeat whose occurrences cover at least half of S (then a quarter, ... 1/64),
//!   and `i` = its count.
//! - **Matches**: DeepProf's Algorithm 1 (greedy, at most k0 inserted ops per occurrence), run
//!   with longest-common-extension jumps, so a start costs O(k0) and the scan O(|S| k0).
//! - **Loops**: after a pattern's matches are taken out, the uncovered rest of S (segments
//!   joined by unique separators) is mined again, for a second loop (evaluation) and more.
//!
//! Window: the main stream's ops from first to last. An iteration is one match: from its first
//! op's start to its last op's end; the interval to the next is the time to the next match's
//! start. Conservation: per loop, sum of iteration durations + sum of intervals = last end -
//! first start (tested).

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Trace, TrackKind};

use crate::device_time::gpu_time::{intersection_length, merge};
use crate::device_time::memory::{arg_i64, copy_direction, CopyDirection};
use crate::patterns::suffix::{for_each_node, lcp_array, rank_of, suffix_array, Lce};

/// Options of [`iterations`] and [`mine`].
#[derive(Debug, Clone)]
pub struct IterationOptions {
    /// `i` per loop (first loop first). Empty: estimate.
    pub iterations: Vec<usize>,
    /// DeepProf's eps: start value of the count tolerance. Default max(1, i/2).
    pub epsilon: Option<usize>,
    /// Most inserted ops in one occurrence. Default max(2, pattern length / 20).
    pub k0: Option<usize>,
    /// Most loops searched when estimating.
    pub max_loops: usize,
    /// Shortest pattern accepted.
    pub min_pattern_len: usize,
    /// Also mine the loop inside each loop's iterations (layers inside steps); see [`mine`].
    pub nested: bool,
}

impl Default for IterationOptions {
    fn default() -> Self {
        IterationOptions {
            iterations: Vec::new(),
            epsilon: None,
            k0: None,
            max_loops: 3,
            min_pattern_len: 2,
            nested: true,
        }
    }
}

/// One approximate occurrence: ops `start..=end` of S, with `inserted` ops beyond the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Match {
    pub start: usize,
    pub end: usize,
    pub inserted: usize,
}

/// One loop found in a symbol sequence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinedLoop {
    /// Index in S of the pattern's first exact occurrence.
    pub pattern_start: usize,
    pub pattern_len: usize,
    /// The `i` used (given or estimated).
    pub i: usize,
    pub i_estimated: bool,
    /// The eps the selection ended with.
    pub epsilon: usize,
    pub k0: usize,
    /// Exact occurrences of the pattern (suffix tree count).
    pub exact_occurrences: usize,
    pub matches: Vec<Match>,
    /// The loop (index in [`mine`]'s result) whose iterations hold this loop's: a nested loop.
    pub inside: Option<usize>,
}

/// A view of part of S for one round: the symbols, and each one's index in S (separators:
/// `usize::MAX`).
struct Round {
    symbols: Vec<u32>,
    origin: Vec<usize>,
    /// Symbols >= this are separators.
    separator_from: u32,
}

/// Mines the loops of a symbol sequence. `gap_before[k]` (optional) is the device idle time
/// before op k, used to break ties between rotations of a loop.
///
/// Nested loops (`options.nested`): after the rounds, for each loop found by them that has no
/// other loop inside it already, the loop of its pattern's first exact occurrence is mined
/// (i estimated) as if that occurrence were the whole sequence; when it repeats at least twice
/// and its matches cover at least [`NESTED_COVER`] of the occurrence, its pattern is matched
/// (same Algorithm 1) inside every iteration of the outer loop, and the result is one more
/// loop with [`MinedLoop::inside`] set: layers inside steps. Its matches never cross an outer
/// iteration's boundary.
pub fn mine(
    symbols: &[u32],
    gap_before: Option<&[Ns]>,
    options: &IterationOptions,
) -> Vec<MinedLoop> {
    let n = symbols.len();
    let mut loops: Vec<MinedLoop> = Vec::new();
    if n < 2 {
        return loops;
    }
    let upper = symbols.iter().copied().max().unwrap_or(0);
    let rounds = if options.iterations.is_empty() {
        options.max_loops.max(1)
    } else {
        options.iterations.len()
    };
    let mut covered = vec![false; 0];
    for round_index in 0..rounds {
        let round = if round_index == 0 {
            Round {
                symbols: symbols.to_vec(),
                origin: (0..n).collect(),
                separator_from: upper + 1,
            }
        } else {
            match residual(symbols, &covered, upper, options.min_pattern_len) {
                Some(r) => r,
                None => break,
            }
        };
        let given = options.iterations.get(round_index).copied();
        let gap = |k: usize| -> Ns {
            let o = round.origin[k];
            if o == usize::MAX {
                return 0;
            }
            gap_before.and_then(|g| g.get(o).copied()).unwrap_or(0)
        };
        let Some(mut found) = mine_round(&round, given, &gap, options) else {
            if given.is_some() {
                continue;
            }
            break;
        };
        // Later rounds must explain a good part of what is left.
        let matched: usize = found.matches.iter().map(|m| m.end - m.start + 1).sum();
        if round_index > 0 && given.is_none() && matched * 10 < round.symbols.len() * 3 {
            break;
        }
        // Back to S's indices.
        for m in &mut found.matches {
            m.start = round.origin[m.start];
            m.end = round.origin[m.end];
        }
        found.pattern_start = round.origin[found.pattern_start];
        if covered.is_empty() {
            covered = vec![false; n];
        }
        for m in &found.matches {
            covered[m.start..=m.end].iter_mut().for_each(|c| *c = true);
        }
        loops.push(found);
    }
    if options.nested {
        let outer_count = loops.len();
        for outer in 0..outer_count {
            let holds_one = (0..loops.len()).any(|o| {
                o != outer
                    && loops[o].matches.iter().all(|m| {
                        loops[outer]
                            .matches
                            .iter()
                            .any(|om| om.start <= m.start && m.end <= om.end)
                    })
            });
            if holds_one {
                continue;
            }
            if let Some(mut inner) = mine_nested(symbols, &loops[outer], upper, gap_before, options)
            {
                inner.inside = Some(outer);
                loops.push(inner);
            }
        }
    }
    loops
}

/// Smallest share of an outer iteration a nested loop's matches must cover.
pub const NESTED_COVER: f64 = 0.3;
/// Shortest pattern of a nested loop: a layer launches several kernels (GEMMs, a norm, an
/// activation); shorter repeats inside an iteration are per-parameter optimizer updates or
/// paired elementwise ops, not layers.
pub const NESTED_MIN_LEN: usize = 8;
/// Largest count of nested iterations tried per outer iteration.
pub const NESTED_MAX_I: usize = 128;
/// Longest outer pattern searched for a nested loop (up to [`NESTED_MAX_I`] suffix arrays of
/// it are built): bounds the extra time on very long iterations.
pub const NESTED_MAX_LEN: usize = 1 << 16;

/// The loop inside `outer`'s iterations (see [`mine`]), or `None`.
fn mine_nested(
    symbols: &[u32],
    outer: &MinedLoop,
    upper: u32,
    gap_before: Option<&[Ns]>,
    options: &IterationOptions,
) -> Option<MinedLoop> {
    let min_len = options.min_pattern_len.max(1);
    let (p0, len) = (outer.pattern_start, outer.pattern_len);
    if len < 2 * NESTED_MIN_LEN.max(min_len) || len > NESTED_MAX_LEN || outer.matches.len() < 2 {
        return None;
    }
    // 1. The loop of one exact occurrence of the outer pattern.
    let one = Round {
        symbols: symbols[p0..p0 + len].to_vec(),
        origin: (p0..p0 + len).collect(),
        separator_from: upper + 1,
    };
    let gap = |k: usize| -> Ns {
        let o = one.origin[k];
        gap_before.and_then(|g| g.get(o).copied()).unwrap_or(0)
    };
    // Every count i that leaves room for NESTED_MIN_LEN ops per iteration: the loop with
    // the best coverage of the occurrence wins (then the longer pattern, then the smaller i).
    let mut best: Option<(usize, MinedLoop)> = None;
    for i in 2..=(len / NESTED_MIN_LEN).min(NESTED_MAX_I) {
        let Some(found) = mine_round(&one, Some(i), &gap, options) else {
            continue;
        };
        if found.pattern_len < NESTED_MIN_LEN || found.matches.len() < 2 {
            continue;
        }
        let covered: usize = found.matches.iter().map(|m| m.end - m.start + 1).sum();
        let better = best
            .as_ref()
            .is_none_or(|(c, b)| (covered, found.pattern_len) > (*c, b.pattern_len));
        if better {
            best = Some((covered, found));
        }
    }
    let (covered, found) = best?;
    if (covered as f64) < NESTED_COVER * len as f64 {
        return None;
    }
    let pattern = one.origin[found.pattern_start];
    let m = found.pattern_len;
    // 2. That pattern matched inside every outer iteration (segments joined by separators).
    let mut joined = Round {
        symbols: Vec::new(),
        origin: Vec::new(),
        separator_from: upper + 1,
    };
    let mut separator = upper + 1;
    for om in &outer.matches {
        if !joined.symbols.is_empty() {
            joined.symbols.push(separator);
            joined.origin.push(usize::MAX);
            separator += 1;
        }
        joined
            .symbols
            .extend_from_slice(&symbols[om.start..=om.end]);
        joined.origin.extend(om.start..=om.end);
    }
    // The pattern's own copy must be inside an outer iteration (it is, unless the outer
    // matching skipped its first exact occurrence).
    let q = joined.origin.iter().position(|&o| o == pattern)?;
    if joined.origin.get(q + m - 1) != Some(&(pattern + m - 1)) {
        return None;
    }
    let top = joined.symbols.iter().copied().max().unwrap_or(0);
    let sa = suffix_array(&joined.symbols, top);
    let rank = rank_of(&sa);
    let lcp = lcp_array(&joined.symbols, &sa, &rank);
    drop(sa);
    let lce = Lce::new(rank, lcp);
    let mut matches =
        approximate_matches(&joined.symbols, &lce, q, m, found.k0, joined.separator_from);
    if matches.len() < 2 {
        return None;
    }
    for x in &mut matches {
        x.start = joined.origin[x.start];
        x.end = joined.origin[x.end];
    }
    Some(MinedLoop {
        pattern_start: pattern,
        pattern_len: m,
        i: matches.len(),
        i_estimated: true,
        epsilon: found.epsilon,
        k0: found.k0,
        exact_occurrences: matches.iter().filter(|x| x.inserted == 0).count(),
        matches,
        inside: None,
    })
}

/// The uncovered segments of S (at least `4 * min_len` long) joined by unique separators, or
/// `None` when they hold less than a tenth of S.
fn residual(symbols: &[u32], covered: &[bool], upper: u32, min_len: usize) -> Option<Round> {
    let n = symbols.len();
    let mut out = Round {
        symbols: Vec::new(),
        origin: Vec::new(),
        separator_from: upper + 1,
    };
    let mut separator = upper + 1;
    let mut k = 0;
    while k < n {
        if covered.get(k).copied().unwrap_or(false) {
            k += 1;
            continue;
        }
        let start = k;
        while k < n && !covered.get(k).copied().unwrap_or(false) {
            k += 1;
        }
        if k - start >= 4 * min_len.max(1) {
            if !out.symbols.is_empty() {
                out.symbols.push(separator);
                out.origin.push(usize::MAX);
                separator += 1;
            }
            out.symbols.extend_from_slice(&symbols[start..k]);
            out.origin.extend(start..k);
        }
    }
    let real = out.origin.iter().filter(|&&o| o != usize::MAX).count();
    (real >= 16 && real * 10 >= n).then_some(out)
}

/// One candidate node: the pattern length it allows, its count and SA range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    len: usize,
    count: usize,
    /// Later first occurrence sorts lower (earliest wins among equals).
    neg_first: std::cmp::Reverse<u32>,
    parent: usize,
    lb: u32,
    rb: u32,
    verified: bool,
}

impl Candidate {
    fn new(node: crate::patterns::suffix::Node, len: usize) -> Self {
        Candidate {
            len,
            count: node.count(),
            neg_first: std::cmp::Reverse(node.first),
            parent: node.parent_lcp as usize,
            lb: node.lb,
            rb: node.rb,
            verified: false,
        }
    }

    fn first(&self) -> usize {
        self.neg_first.0 as usize
    }
}

/// Keeps the best `CANDIDATES` candidates seen.
const CANDIDATES: usize = 1 << 18;

fn keep(heap: &mut std::collections::BinaryHeap<std::cmp::Reverse<Candidate>>, c: Candidate) {
    if heap.len() < CANDIDATES {
        heap.push(std::cmp::Reverse(c));
    } else if heap.peek().is_some_and(|w| w.0 < c) {
        heap.pop();
        heap.push(std::cmp::Reverse(c));
    }
}

/// The best candidates (ties on length and count) whose occurrences do not overlap: a
/// candidate whose closest two occurrences are `d < len` apart is demoted to length `d` (if
/// its node still spells that length) and competes again. `accept` re-checks a demoted one.
fn best_disjoint(
    sa: &[u32],
    candidates: Vec<Candidate>,
    min_len: usize,
    accept: &dyn Fn(&Candidate) -> bool,
) -> Vec<Candidate> {
    let mut heap: std::collections::BinaryHeap<Candidate> = candidates.into_iter().collect();
    let mut budget = 32 * sa.len() + (1 << 20);
    let mut ties: Vec<Candidate> = Vec::new();
    let mut positions: Vec<u32> = Vec::new();
    while let Some(mut c) = heap.pop() {
        if let Some(best) = ties.first() {
            if (c.len, c.count) != (best.len, best.count) {
                break;
            }
        }
        if !c.verified && budget > 0 {
            positions.clear();
            positions.extend_from_slice(&sa[c.lb as usize..=c.rb as usize]);
            positions.sort_unstable();
            budget = budget.saturating_sub(positions.len());
            let min_dist = positions
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize)
                .min()
                .unwrap_or(usize::MAX);
            c.verified = true;
            if min_dist < c.len {
                c.len = min_dist;
                if c.len > c.parent && c.len >= min_len && accept(&c) {
                    heap.push(c);
                }
                continue;
            }
        }
        if ties.len() < 4096 {
            ties.push(c);
        }
    }
    ties
}

fn mine_round(
    round: &Round,
    given: Option<usize>,
    gap: &dyn Fn(usize) -> Ns,
    options: &IterationOptions,
) -> Option<MinedLoop> {
    let s = &round.symbols;
    let n = s.len();
    let upper = s.iter().copied().max().unwrap_or(0);
    let sa = suffix_array(s, upper);
    let rank = rank_of(&sa);
    let lcp = lcp_array(s, &sa, &rank);
    let min_len = options.min_pattern_len.max(1);
    let (i, estimated) = match given {
        Some(i) => (i.max(2), false),
        None => (estimate_i(n, &sa, &lcp, min_len)?, true),
    };
    let mut eps = options.epsilon.unwrap_or((i / 2).max(1)).max(1);
    let cap = n / i;
    let ties = loop {
        let mut heap = std::collections::BinaryHeap::new();
        for_each_node(&sa, &lcp, |node| {
            let c = node.count();
            if c > i || c + eps <= i || c < 2 {
                return;
            }
            let spacing = (node.last - node.first) as usize / (c - 1);
            let len = (node.lcp as usize)
                .min(cap)
                .min(spacing)
                .min(node.end_gap());
            if len <= node.parent_lcp as usize || len < min_len {
                return;
            }
            keep(&mut heap, Candidate::new(node, len));
        });
        let candidates: Vec<Candidate> = heap.into_iter().map(|r| r.0).collect();
        let ties = best_disjoint(&sa, candidates, min_len, &|_| true);
        if !ties.is_empty() {
            break ties;
        }
        if eps >= i {
            return None;
        }
        eps = (eps * 2).min(i);
    };
    // Tie-break: largest median idle gap before the occurrences, then earliest.
    let chosen = ties
        .iter()
        .map(|c| {
            let count = (c.rb - c.lb + 1) as usize;
            let step = count.div_ceil(64).max(1);
            let mut gaps: Vec<Ns> = (c.lb as usize..=c.rb as usize)
                .step_by(step)
                .map(|k| gap(sa[k] as usize))
                .collect();
            gaps.sort_unstable();
            (gaps[gaps.len() / 2], c)
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.first().cmp(&a.1.first())))
        .map(|(_, c)| *c)?;
    drop(sa);
    let lce = Lce::new(rank, lcp);
    let m = chosen.len;
    let k0 = options.k0.unwrap_or((m / 20).max(2));
    let matches = approximate_matches(s, &lce, chosen.first(), m, k0, round.separator_from);
    if matches.len() < 2 {
        return None;
    }
    Some(MinedLoop {
        pattern_start: chosen.first(),
        pattern_len: m,
        i,
        i_estimated: estimated,
        epsilon: eps,
        k0,
        exact_occurrences: chosen.count,
        matches,
        inside: None,
    })
}

/// Estimates `i`: the count of the longest disjoint repeat whose occurrences cover at least
/// `n / 2^t` ops (t = 1..6, the first level that has one) and are spread over at least half
/// of S.
fn estimate_i(n: usize, sa: &[u32], lcp: &[u32], min_len: usize) -> Option<usize> {
    let mut heap = std::collections::BinaryHeap::new();
    let spread_ok = |len: usize, node: &crate::patterns::suffix::Node| {
        ((node.last - node.first) as usize + len) * 2 >= n
    };
    for_each_node(sa, lcp, |node| {
        let c = node.count();
        // The whole string must fit between occurrences on average: a node spanning two
        // iterations (clean pairs in a noisy loop) is never a candidate for the count.
        let spacing = (node.last - node.first) as usize / (c - 1);
        let len = node.lcp as usize;
        if len > spacing || len > node.end_gap() || len < min_len || (c * len) << 6 < n {
            return;
        }
        if !spread_ok(len, &node) {
            return;
        }
        keep(&mut heap, Candidate::new(node, len));
    });
    let candidates: Vec<Candidate> = heap.into_iter().map(|r| r.0).collect();
    for t in 1..=6usize {
        let level: Vec<Candidate> = candidates
            .iter()
            .copied()
            .filter(|c| (c.count * c.len) << t >= n)
            .collect();
        let accept = |c: &Candidate| (c.count * c.len) << t >= n;
        if let Some(best) = best_disjoint(sa, level, min_len, &accept).first() {
            return Some(best.count.max(2));
        }
    }
    None
}

/// DeepProf's Algorithm 1 with LCE jumps: scanning left to right, at each op equal to the
/// pattern's first, the pattern `S[p0..p0+m)` is matched greedily, each mismatching op of S
/// counting as one insertion; more than `k0` insertions (or a separator) fails the start. A
/// success resumes after the match.
fn approximate_matches(
    s: &[u32],
    lce: &Lce,
    p0: usize,
    m: usize,
    k0: usize,
    separator_from: u32,
) -> Vec<Match> {
    let n = s.len();
    let mut out = Vec::new();
    let first = s[p0];
    let mut x = 0usize;
    while x + m <= n {
        if s[x] != first {
            x += 1;
            continue;
        }
        let (mut i, mut j, mut k) = (x, 0usize, 0usize);
        let ok = loop {
            // An insertion may have stepped past the end of S.
            if i >= n {
                break false;
            }
            let l = lce.lce(i, p0 + j, n).min(m - j);
            i += l;
            j += l;
            if j == m {
                break true;
            }
            if i >= n || s[i] >= separator_from {
                break false;
            }
            k += 1;
            i += 1;
            if k > k0 {
                break false;
            }
        };
        if ok {
            out.push(Match {
                start: x,
                end: i - 1,
                inserted: k,
            });
            x = i;
        } else {
            x += 1;
        }
    }
    out
}

/// Options for the whole-trace analysis.
pub type Options = IterationOptions;

/// One iteration of one loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Iteration {
    pub index: usize,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub duration_ns: Ns,
    /// Ops of the main stream in it, and how many of them are beyond the pattern.
    pub ops: usize,
    pub inserted_ops: usize,
    /// Next iteration's start - this end (`None` for the last).
    pub interval_to_next_ns: Option<Ns>,
    /// Share of that interval covered by host-to-device copies of the device (any stream).
    pub h2d_overlap: Option<f64>,
    /// Mean idle time between consecutive main-stream ops inside the iteration.
    pub mean_op_gap_ns: f64,
    /// Host-to-device bytes of copies starting between this start and the next start.
    pub bytes_in: Option<i64>,
}

/// Averages over a loop's iterations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub iterations: usize,
    pub mean_duration_ns: f64,
    pub mean_interval_ns: f64,
    pub max_interval_ns: Ns,
    pub median_interval_ns: f64,
    pub mean_h2d_overlap: f64,
    pub mean_op_gap_ns: f64,
    pub mean_bytes_in: Option<f64>,
    /// Share of the iterations' time the main stream is busy.
    pub busy_in_iterations: f64,
    /// Share of each cycle (iteration + interval) spent between iterations.
    pub between_share: f64,
    /// Share of the main stream's ops inside iterations.
    pub coverage: f64,
}

/// One loop of one device's main stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopReport {
    /// Index of the rank in the trace (not the job rank).
    pub rank_index: u32,
    pub rank: i64,
    pub source: String,
    pub pid: Option<i64>,
    pub device: i64,
    pub stream: i64,
    /// Why this stream.
    pub stream_choice: String,
    /// 0 = the first pattern found (the longest loop); 1, 2 = further loops.
    #[serde(rename = "loop")]
    pub loop_index: usize,
    pub ops: usize,
    pub kernels: usize,
    pub pattern_len: usize,
    pub pattern_first_op: String,
    pub i: usize,
    pub i_estimated: bool,
    pub epsilon: usize,
    pub k0: usize,
    pub exact_occurrences: usize,
    pub iterations: Vec<Iteration>,
    pub summary: Summary,
    /// Findings, worded by [`Diagnosis::message`] (JSON: the messages).
    pub diagnosis: Vec<Diagnosis>,
    /// The annotation (`ProfilerStep#*`, digits as `*`) or module class (`ViTLayer`) whose
    /// instances the iterations coincide with, one instance per iteration; `None` when none
    /// does or before [`attach_lines_up`] ran. See [`attach_lines_up`].
    pub lines_up_with: Option<String>,
    /// `"annotation"` or `"module"` when `lines_up_with` is set.
    pub lines_up_kind: Option<&'static str>,
    /// When only some iterations line up with `lines_up_with` (a partial match: 24 decoder
    /// layers among 34 iterations, the rest a tail), how many do; `None` when every iteration
    /// does, or nothing lines up. See [`attach_lines_up`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_up_iterations: Option<usize>,
    /// The loop (its `loop` index, same device and stream) whose iterations contain these:
    /// layers inside steps. Set by the miner for the nested loops it mines
    /// ([`MinedLoop::inside`]) and by [`attach_lines_up`] for loops found apart that nest.
    pub inside_loop: Option<usize>,
}

/// Devices whose main stream had too few ops or no repetition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoLoop {
    pub rank: i64,
    pub device: i64,
    pub stream: i64,
    pub ops: usize,
    pub reason: String,
}

/// The report: one entry per (device main stream, loop).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationsReport {
    pub sequences: Vec<LoopReport>,
    pub not_found: Vec<NoLoop>,
}

/// A device op of a main stream.
#[derive(Debug, Clone, Copy)]
struct Op {
    start: Ns,
    end: Ns,
    name: u32,
    correlation: Option<u64>,
    kernel: bool,
}

/// The main stream of each (rank, device): `(rank, device, stream, kernels, streams)`.
fn main_streams(trace: &Trace) -> Vec<(RankId, i64, i64, usize, usize)> {
    let mut kernels: FxHashMap<(u32, i64, i64), usize> = FxHashMap::default();
    for span in &trace.spans {
        let track = trace.track(span.track);
        if let TrackKind::DeviceQueue { device, queue } = track.kind {
            if queue == -1 || !span.level.is_device_op() {
                continue;
            }
            let e = kernels.entry((track.rank.0, device, queue)).or_insert(0);
            if span.level == Level::DeviceKernel {
                *e += 1;
            }
        }
    }
    let mut best: FxHashMap<(u32, i64), (i64, usize, usize)> = FxHashMap::default();
    for (&(rank, device, queue), &count) in &kernels {
        let e = best.entry((rank, device)).or_insert((queue, count, 0));
        e.2 += 1;
        if count > e.1 || (count == e.1 && queue < e.0) {
            e.0 = queue;
            e.1 = count;
        }
    }
    let mut out: Vec<_> = best
        .into_iter()
        .map(|((rank, device), (queue, count, streams))| {
            (RankId(rank), device, queue, count, streams)
        })
        .collect();
    out.sort_by_key(|x| (x.0, x.1));
    out
}

/// Finds and measures the iterations of every device's main stream.
pub fn iterations(trace: &Trace, options: &IterationOptions) -> IterationsReport {
    let mut report = IterationsReport {
        sequences: Vec::new(),
        not_found: Vec::new(),
    };
    // Launching pid by correlation (runtime calls on CPU threads).
    let mut launch_pid: FxHashMap<(u32, u64), i64> = FxHashMap::default();
    let mut spans_per_pid: FxHashMap<(u32, i64), usize> = FxHashMap::default();
    for span in &trace.spans {
        let track = trace.track(span.track);
        if let TrackKind::Thread { pid, .. } = track.kind {
            *spans_per_pid.entry((track.rank.0, pid)).or_insert(0) += 1;
            if span.level == Level::AcceleratorApi {
                if let Some(c) = span.correlation {
                    launch_pid.insert((track.rank.0, c), pid);
                }
            }
        }
    }
    for (rank, device, stream, kernels, streams) in main_streams(trace) {
        let mut ops: Vec<Op> = Vec::new();
        let mut h2d: Vec<(Ns, Ns, Option<i64>)> = Vec::new();
        for span in &trace.spans {
            let track = trace.track(span.track);
            if track.rank != rank || !span.level.is_device_op() {
                continue;
            }
            let TrackKind::DeviceQueue { device: d, queue } = track.kind else {
                continue;
            };
            if d != device {
                continue;
            }
            if span.level == Level::DeviceCopy
                && copy_direction(trace.str(span.name)) == CopyDirection::HostToDevice
            {
                let bytes = arg_i64(trace.args_text(span.args), &["bytes", "Bytes"]);
                h2d.push((span.start, span.end, bytes));
            }
            if queue != stream || span.level == Level::DeviceSync {
                continue;
            }
            ops.push(Op {
                start: span.start,
                end: span.end,
                name: span.name.0,
                correlation: span.correlation,
                kernel: span.level == Level::DeviceKernel,
            });
        }
        ops.sort_by_key(|o| (o.start, o.end));
        h2d.sort_by_key(|c| c.0);
        let info = &trace.ranks[rank.0 as usize];
        let rank_number = info.rank.unwrap_or(i64::from(rank.0));
        // Owning pid: majority of launching runtime calls, else the rank's busiest process.
        let mut votes: FxHashMap<i64, usize> = FxHashMap::default();
        for o in &ops {
            if let Some(pid) = o.correlation.and_then(|c| launch_pid.get(&(rank.0, c))) {
                *votes.entry(*pid).or_insert(0) += 1;
            }
        }
        let pid = votes
            .into_iter()
            .max_by_key(|&(pid, n)| (n, -pid))
            .map(|(pid, _)| pid)
            .or_else(|| {
                spans_per_pid
                    .iter()
                    .filter(|((r, _), _)| *r == rank.0)
                    .max_by_key(|(&(_, pid), &n)| (n, -pid))
                    .map(|(&(_, pid), _)| pid)
            });
        let mut dict: FxHashMap<u32, u32> = FxHashMap::default();
        let symbols: Vec<u32> = ops
            .iter()
            .map(|o| {
                let next = dict.len() as u32;
                *dict.entry(o.name).or_insert(next)
            })
            .collect();
        let mut gap_before: Vec<Ns> = Vec::with_capacity(ops.len());
        let mut last_end = Ns::MIN;
        for o in &ops {
            gap_before.push(if last_end == Ns::MIN {
                0
            } else {
                (o.start - last_end).max(0)
            });
            last_end = last_end.max(o.end);
        }
        let loops = mine(&symbols, Some(&gap_before), options);
        if loops.is_empty() {
            report.not_found.push(NoLoop {
                rank: rank_number,
                device,
                stream,
                ops: ops.len(),
                reason: if ops.len() < 4 {
                    "too few device ops on the main stream".into()
                } else {
                    "no substring repeats often enough to be a loop".into()
                },
            });
            continue;
        }
        let stream_choice = format!(
            "stream {stream}: most kernels of the device's {streams} stream(s) ({kernels} kernels)"
        );
        let h2d_merged = merge(h2d.iter().map(|c| (c.0, c.1)));
        let mut gap_prefix: Vec<Ns> = Vec::with_capacity(gap_before.len() + 1);
        gap_prefix.push(0);
        for g in &gap_before {
            gap_prefix.push(gap_prefix[gap_prefix.len() - 1] + g);
        }
        for (loop_index, found) in loops.iter().enumerate() {
            let iterations = measure(&ops, &found.matches, &gap_prefix, &h2d, &h2d_merged);
            let summary = summarize(&iterations, ops.len());
            let diagnosis = diagnose(&summary, &iterations, found);
            report.sequences.push(LoopReport {
                rank_index: rank.0,
                rank: rank_number,
                source: info.source.clone(),
                pid,
                device,
                stream,
                stream_choice: stream_choice.clone(),
                loop_index,
                ops: ops.len(),
                kernels: ops.iter().filter(|o| o.kernel).count(),
                pattern_len: found.pattern_len,
                pattern_first_op: trace
                    .strings
                    .get(strato_trace::StrId(ops[found.pattern_start].name))
                    .to_string(),
                i: found.i,
                i_estimated: found.i_estimated,
                epsilon: found.epsilon,
                k0: found.k0,
                exact_occurrences: found.exact_occurrences,
                iterations,
                summary,
                diagnosis,
                lines_up_with: None,
                lines_up_kind: None,
                lines_up_iterations: None,
                inside_loop: found.inside,
            });
        }
    }
    report
}

fn measure(
    ops: &[Op],
    matches: &[Match],
    gap_prefix: &[Ns],
    h2d: &[(Ns, Ns, Option<i64>)],
    h2d_merged: &[(Ns, Ns)],
) -> Vec<Iteration> {
    let mut out: Vec<Iteration> = Vec::with_capacity(matches.len());
    for (index, m) in matches.iter().enumerate() {
        let start = ops[m.start].start;
        let end = ops[m.start..=m.end]
            .iter()
            .map(|o| o.end)
            .max()
            .unwrap_or(start);
        let next_start = matches.get(index + 1).map(|n| ops[n.start].start);
        let interval = next_start.map(|n| (n - end).max(0));
        let h2d_overlap = next_start.map(|n| {
            if n <= end {
                0.0
            } else {
                intersection_length(h2d_merged, &[(end, n)]) as f64 / (n - end) as f64
            }
        });
        let window_end = next_start.unwrap_or(end);
        let lo = h2d.partition_point(|c| c.0 < start);
        let hi = h2d.partition_point(|c| c.0 < window_end.max(start + 1));
        let copies = &h2d[lo..hi];
        let bytes_in = if copies.iter().any(|c| c.2.is_some()) {
            Some(copies.iter().filter_map(|c| c.2).sum())
        } else if copies.is_empty() && h2d.iter().any(|c| c.2.is_some()) {
            Some(0)
        } else {
            None
        };
        let count = m.end - m.start + 1;
        let gaps = gap_prefix[m.end + 1] - gap_prefix[m.start + 1];
        out.push(Iteration {
            index,
            start_ns: start,
            end_ns: end,
            duration_ns: end - start,
            ops: count,
            inserted_ops: m.inserted,
            interval_to_next_ns: interval,
            h2d_overlap,
            mean_op_gap_ns: if count > 1 {
                gaps as f64 / (count - 1) as f64
            } else {
                0.0
            },
            bytes_in,
        });
    }
    out
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn summarize(iterations: &[Iteration], stream_ops: usize) -> Summary {
    let intervals: Vec<Ns> = iterations
        .iter()
        .filter_map(|i| i.interval_to_next_ns)
        .collect();
    let mut sorted = intervals.clone();
    sorted.sort_unstable();
    let median_interval = if sorted.is_empty() {
        0.0
    } else if sorted.len() % 2 == 1 {
        sorted[sorted.len() / 2] as f64
    } else {
        (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) as f64 / 2.0
    };
    let mean_duration = mean(iterations.iter().map(|i| i.duration_ns as f64)).unwrap_or(0.0);
    let mean_interval = mean(intervals.iter().map(|&v| v as f64)).unwrap_or(0.0);
    let idle_inside: f64 = iterations
        .iter()
        .map(|i| i.mean_op_gap_ns * (i.ops.saturating_sub(1)) as f64)
        .sum();
    let total: f64 = iterations.iter().map(|i| i.duration_ns as f64).sum();
    let ops_in: usize = iterations.iter().map(|i| i.ops).sum();
    Summary {
        iterations: iterations.len(),
        mean_duration_ns: mean_duration,
        mean_interval_ns: mean_interval,
        max_interval_ns: intervals.iter().copied().max().unwrap_or(0),
        median_interval_ns: median_interval,
        mean_h2d_overlap: mean(iterations.iter().filter_map(|i| i.h2d_overlap)).unwrap_or(0.0),
        mean_op_gap_ns: mean(iterations.iter().map(|i| i.mean_op_gap_ns)).unwrap_or(0.0),
        mean_bytes_in: mean(
            iterations
                .iter()
                .filter_map(|i| i.bytes_in.map(|b| b as f64)),
        ),
        busy_in_iterations: if total > 0.0 {
            (1.0 - idle_inside / total).clamp(0.0, 1.0)
        } else {
            0.0
        },
        between_share: if mean_duration + mean_interval > 0.0 && !intervals.is_empty() {
            mean_interval / (mean_duration + mean_interval)
        } else {
            0.0
        },
        coverage: if stream_ops > 0 {
            ops_in as f64 / stream_ops as f64
        } else {
            0.0
        },
    }
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// One finding about a loop, with the numbers behind it. [`Diagnosis::message`] words it;
/// JSON carries the message (`"diagnosis": ["copy-bound: ...", ...]`).
///
/// Rules (thresholds of [`diagnose`]): *copy-bound* or *CPU-bound* when the device waits
/// between iterations for at least 20% of each cycle (copy-bound when host-to-device copies
/// cover at least half of the mean interval); *launch/host-bound* when the main stream is busy
/// less than 70% of each iteration; *device-bound* when neither applies; *irregular* when the
/// longest interval is over 3x the median; *extra ops* when some iterations run ops beyond the
/// pattern; *weak pattern* when iterations hold less than half of the stream's ops.
#[derive(Debug, Clone, PartialEq)]
pub enum Diagnosis {
    /// Host-to-device copies fill the gaps between iterations.
    CopyBound {
        /// Share of the mean interval the copies cover (0..1).
        h2d_overlap: f64,
        mean_interval_ns: f64,
        /// Share of each cycle spent between iterations (0..1).
        between_share: f64,
    },
    /// The device waits on the host between iterations.
    CpuBound {
        mean_interval_ns: f64,
        between_share: f64,
        h2d_overlap: f64,
    },
    /// The main stream idles inside iterations.
    LaunchBound {
        /// Share of each iteration the main stream is busy (0..1).
        busy_in_iterations: f64,
        mean_op_gap_ns: f64,
    },
    /// The main stream is busy and iterations follow each other closely.
    DeviceBound {
        busy_in_iterations: f64,
        between_share: f64,
    },
    /// One interval is far longer than the median (a stall).
    Irregular {
        /// The iteration after which the longest wait comes (its `index`).
        after_iteration: usize,
        max_interval_ns: Ns,
        median_interval_ns: f64,
    },
    /// Some iterations run ops beyond the pattern.
    ExtraOps {
        iterations_with_extra: usize,
        iterations: usize,
        most_extra_ops: usize,
        pattern_len: usize,
    },
    /// The loop is a module's repeated layers inside one step of a trace with at most one
    /// step (inference): not training iterations, and the gaps between them are no stalls.
    LayersInOneStep {
        /// The module class, when the iterations line up with one.
        module: Option<String>,
        iterations: usize,
        /// How many iterations line up with `module`'s instances (`iterations` when all do).
        lined_up: usize,
    },
    /// Iterations hold few of the main stream's ops.
    WeakPattern {
        /// Share of the main stream's ops inside iterations (0..1).
        coverage: f64,
    },
}

impl Diagnosis {
    /// The finding in words, with its numbers.
    pub fn message(&self) -> String {
        match *self {
            Diagnosis::CopyBound {
                h2d_overlap,
                mean_interval_ns,
                between_share,
            } => format!(
                "copy-bound: host-to-device copies fill the gaps between iterations \
                 (they cover {:.0}% of the mean {} interval, {:.0}% of each cycle)",
                100.0 * h2d_overlap,
                ms(mean_interval_ns),
                100.0 * between_share
            ),
            Diagnosis::CpuBound {
                mean_interval_ns,
                between_share,
                h2d_overlap,
            } => format!(
                "CPU-bound: the device waits on the host between iterations (mean interval {}, \
                 {:.0}% of each cycle; copies cover only {:.0}% of it)",
                ms(mean_interval_ns),
                100.0 * between_share,
                100.0 * h2d_overlap
            ),
            Diagnosis::LaunchBound {
                busy_in_iterations,
                mean_op_gap_ns,
            } => format!(
                "launch/host-bound inside iterations: the main stream is idle {:.0}% of each \
                 iteration (mean gap between ops {:.1} us)",
                100.0 * (1.0 - busy_in_iterations),
                mean_op_gap_ns / 1e3
            ),
            Diagnosis::DeviceBound {
                busy_in_iterations,
                between_share,
            } => format!(
                "device-bound: the main stream is busy {:.0}% of each iteration and waits {:.0}% of \
                 each cycle between iterations",
                100.0 * busy_in_iterations,
                100.0 * between_share
            ),
            Diagnosis::Irregular {
                after_iteration,
                max_interval_ns,
                median_interval_ns,
            } => format!(
                "irregular: after iteration {} the device waits {} against a median of {} \
                 (a stall: data loading, checkpointing, garbage collection?)",
                after_iteration,
                ms(max_interval_ns as f64),
                ms(median_interval_ns)
            ),
            Diagnosis::ExtraOps {
                iterations_with_extra,
                iterations,
                most_extra_ops,
                pattern_len,
            } => format!(
                "{iterations_with_extra} of {iterations} iterations run extra ops (up to \
                 {most_extra_ops} beyond the {pattern_len}-op pattern): periodic extra work \
                 such as logging or statistics"
            ),
            Diagnosis::LayersInOneStep {
                ref module,
                iterations,
                lined_up,
            } => match module {
                Some(module) if lined_up < iterations => format!(
                    "layers, not training iterations: {lined_up} of the {iterations} \
                     iterations are the {module} modules of one step, the rest repeat beside \
                     them (gaps between them are the layers' own, not stalls)"
                ),
                Some(module) => format!(
                    "layers, not training iterations: the {iterations} iterations are the \
                     {module} modules of one step (gaps between them are the layers' own, not \
                     stalls)"
                ),
                None => format!(
                    "layers, not training iterations: the {iterations} iterations repeat inside \
                     one step (gaps between them are the blocks' own, not stalls)"
                ),
            },
            Diagnosis::WeakPattern { coverage } => format!(
                "weak pattern: iterations hold only {:.0}% of the main stream's ops",
                100.0 * coverage
            ),
        }
    }
}

impl std::fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl Serialize for Diagnosis {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.message())
    }
}

/// Diagnoses of a loop (rules at [`Diagnosis`]).
fn diagnose(s: &Summary, iterations: &[Iteration], found: &MinedLoop) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    let between = s.between_share;
    if between >= 0.2 {
        if s.mean_h2d_overlap >= 0.5 {
            out.push(Diagnosis::CopyBound {
                h2d_overlap: s.mean_h2d_overlap,
                mean_interval_ns: s.mean_interval_ns,
                between_share: between,
            });
        } else {
            out.push(Diagnosis::CpuBound {
                mean_interval_ns: s.mean_interval_ns,
                between_share: between,
                h2d_overlap: s.mean_h2d_overlap,
            });
        }
    }
    if s.busy_in_iterations < 0.7 {
        out.push(Diagnosis::LaunchBound {
            busy_in_iterations: s.busy_in_iterations,
            mean_op_gap_ns: s.mean_op_gap_ns,
        });
    }
    if out.is_empty() {
        out.push(Diagnosis::DeviceBound {
            busy_in_iterations: s.busy_in_iterations,
            between_share: between,
        });
    }
    if s.median_interval_ns > 0.0 && s.max_interval_ns as f64 > 3.0 * s.median_interval_ns {
        if let Some(worst) = iterations
            .iter()
            .max_by_key(|i| i.interval_to_next_ns.unwrap_or(0))
        {
            out.push(Diagnosis::Irregular {
                after_iteration: worst.index,
                max_interval_ns: s.max_interval_ns,
                median_interval_ns: s.median_interval_ns,
            });
        }
    }
    let noisy = iterations.iter().filter(|i| i.inserted_ops > 0).count();
    if noisy > 0 {
        out.push(Diagnosis::ExtraOps {
            iterations_with_extra: noisy,
            iterations: iterations.len(),
            most_extra_ops: iterations.iter().map(|i| i.inserted_ops).max().unwrap_or(0),
            pattern_len: found.pattern_len,
        });
    }
    if s.coverage < 0.5 {
        out.push(Diagnosis::WeakPattern {
            coverage: s.coverage,
        });
    }
    out
}

/// A `ProfilerStep#N` annotation seen from the device: the main-stream ops launched by the
/// runtime calls inside it (by correlation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepWindow {
    pub name: String,
    pub cpu_start_ns: Ns,
    pub cpu_end_ns: Ns,
    /// First start and last end of the step's ops on the stream.
    pub device_start_ns: Ns,
    pub device_end_ns: Ns,
    pub ops: usize,
}

/// Mined boundaries against `ProfilerStep#N` (ground truth, never input).
///
/// A mined boundary is an iteration's start. It is *within* step j when
/// `device_start(j) <= start < device_end(j)`; each step takes at most one boundary (the first);
/// a boundary in no step, or in an already taken step, is a false positive. *Exact*: the
/// boundary is the step's first op.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCheck {
    pub steps: usize,
    pub mined: usize,
    pub matched: usize,
    pub exact: usize,
    pub precision: f64,
    pub recall: f64,
    pub step_windows: Vec<StepWindow>,
}

/// The device windows of the `ProfilerStep#N` spans of a rank on one stream. Steps that
/// launched nothing on it are dropped (outside the window the kernels cover).
pub fn step_windows(trace: &Trace, rank: RankId, device: i64, stream: i64) -> Vec<StepWindow> {
    let mut steps: Vec<(Ns, Ns, String)> = trace
        .spans
        .iter()
        .filter(|s| {
            let t = trace.track(s.track);
            t.rank == rank && !t.is_device() && trace.str(s.name).starts_with("ProfilerStep#")
        })
        .map(|s| (s.start, s.end, trace.str(s.name).to_string()))
        .collect();
    steps.sort_by_key(|s| s.0);
    let mut step_of: FxHashMap<u64, usize> = FxHashMap::default();
    for span in &trace.spans {
        let t = trace.track(span.track);
        if t.rank != rank || t.is_device() || span.level != Level::AcceleratorApi {
            continue;
        }
        let Some(c) = span.correlation else { continue };
        let k = steps.partition_point(|s| s.0 <= span.start);
        if k > 0 && span.start < steps[k - 1].1 {
            step_of.insert(c, k - 1);
        }
    }
    let mut windows: Vec<Option<(Ns, Ns, usize)>> = vec![None; steps.len()];
    for span in &trace.spans {
        let t = trace.track(span.track);
        if t.rank != rank || !span.level.is_device_op() || span.level == Level::DeviceSync {
            continue;
        }
        if t.kind
            != (TrackKind::DeviceQueue {
                device,
                queue: stream,
            })
        {
            continue;
        }
        let Some(&k) = span.correlation.and_then(|c| step_of.get(&c)) else {
            continue;
        };
        let w = windows[k].get_or_insert((span.start, span.end, 0));
        w.0 = w.0.min(span.start);
        w.1 = w.1.max(span.end);
        w.2 += 1;
    }
    steps
        .into_iter()
        .zip(windows)
        .filter_map(|((cs, ce, name), w)| {
            w.map(|(ds, de, n)| StepWindow {
                name,
                cpu_start_ns: cs,
                cpu_end_ns: ce,
                device_start_ns: ds,
                device_end_ns: de,
                ops: n,
            })
        })
        .collect()
}

/// Compares a device's mined iteration starts (all loops) with its step windows.
pub fn check_against_steps(trace: &Trace, loops: &[&LoopReport]) -> Option<StepCheck> {
    let first = loops.first()?;
    let windows = step_windows(trace, RankId(first.rank_index), first.device, first.stream);
    if windows.is_empty() {
        return None;
    }
    let mut starts: Vec<Ns> = loops
        .iter()
        .flat_map(|l| l.iterations.iter().map(|i| i.start_ns))
        .collect();
    starts.sort_unstable();
    let mut taken = vec![false; windows.len()];
    let (mut matched, mut exact) = (0usize, 0usize);
    for &s in &starts {
        if let Some(k) = windows
            .iter()
            .position(|w| w.device_start_ns <= s && s < w.device_end_ns)
        {
            if !taken[k] {
                taken[k] = true;
                matched += 1;
                if windows[k].device_start_ns == s {
                    exact += 1;
                }
            }
        }
    }
    Some(StepCheck {
        steps: windows.len(),
        mined: starts.len(),
        matched,
        exact,
        precision: if starts.is_empty() {
            0.0
        } else {
            matched as f64 / starts.len() as f64
        },
        recall: matched as f64 / windows.len() as f64,
        step_windows: windows,
    })
}

/// A synthetic kernel sequence with known loops: `warmup` random ops, then `iterations`
/// copies of a random `period`-op body; with probability `noise` an iteration gets 1..=`max_insert`
/// random extra ops at random places. Returns the symbols and each iteration's first index.
pub fn synthetic(
    seed: u64,
    period: usize,
    iterations: usize,
    warmup: usize,
    noise: f64,
    max_insert: usize,
    alphabet: u32,
) -> (Vec<u32>, Vec<usize>) {
    let mut state = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u32
    };
    let alphabet = alphabet.max(2);
    let body: Vec<u32> = (0..period).map(|_| next() % alphabet).collect();
    let mut s: Vec<u32> = Vec::with_capacity(warmup + period * iterations + iterations);
    for _ in 0..warmup {
        s.push(alphabet + next() % alphabet);
    }
    let mut starts = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        starts.push(s.len());
        let noisy = (next() as f64 / (1u64 << 31) as f64) < noise;
        if noisy && max_insert > 0 {
            let count = 1 + (next() as usize) % max_insert;
            let mut at: Vec<usize> = (0..count)
                .map(|_| 1 + (next() as usize) % (period - 1).max(1))
                .collect();
            at.sort_unstable();
            let mut a = 0;
            for (k, &op) in body.iter().enumerate() {
                while a < at.len() && at[a] == k {
                    s.push(2 * alphabet + next() % alphabet);
                    a += 1;
                }
                s.push(op);
            }
        } else {
            s.extend_from_slice(&body);
        }
    }
    (s, starts)
}

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
    // Per stream: each op's (key, instance) pairs, and each instance's op count.
    type Key = (&'static str, String);
    type Keys = Vec<(Key, u32)>;
    /// Per op of a stream its keyed instances, and each instance's op count.
    type StreamKeys = (Vec<Keys>, FxHashMap<u32, usize>);
    let mut keyed: FxHashMap<(u32, i64, i64), StreamKeys> = FxHashMap::default();
    for seq in &report.sequences {
        let id = (seq.rank_index, seq.device, seq.stream);
        if keyed.contains_key(&id) {
            continue;
        }
        let ops = stream_ops.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let mut per_op: Vec<Keys> = Vec::with_capacity(ops.len());
        let mut totals: FxHashMap<u32, usize> = FxHashMap::default();
        for &op in ops {
            let mut keys: Keys = Vec::new();
            // The op's own chain, then the chain of the operation it belongs to (its launch
            // may be on another thread than the annotations: autograd's backward thread).
            let own = h.chain(op).into_iter().skip(1);
            let scoped = operation_of
                .get(&op)
                .map(|&o| h.chain(o))
                .unwrap_or_default();
            for c in own.chain(scoped) {
                if keys.iter().any(|k| k.1 == c) {
                    continue;
                }
                if let Some(k) = lines_up_key(trace, &trace.spans[c as usize]) {
                    *totals.entry(c).or_default() += 1;
                    keys.push((k, c));
                }
            }
            per_op.push(keys);
        }
        keyed.insert(id, (per_op, totals));
    }
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
        let ops = stream_ops.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let (per_op, totals) = &keyed[&id];
        // Per key: the dominant instance of each iteration and its share.
        // Per key, per iteration: (instance, share) of its dominant instance.
        let mut candidates: FxHashMap<Key, Vec<Option<(u32, f64)>>> = FxHashMap::default();
        let n = seq.iterations.len();
        for (j, it) in seq.iterations.iter().enumerate() {
            let lo = ops.partition_point(|&o| trace.spans[o as usize].start < it.start_ns);
            let hi = ops.partition_point(|&o| trace.spans[o as usize].start <= it.end_ns);
            let count = hi.saturating_sub(lo);
            if count == 0 {
                continue;
            }
            let mut by_instance: FxHashMap<(&(&'static str, String), u32), usize> =
                FxHashMap::default();
            for keys in &per_op[lo..hi] {
                for (k, c) in keys {
                    *by_instance.entry((k, *c)).or_default() += 1;
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
            let lo = ops.partition_point(|&o| trace.spans[o as usize].start < it.start_ns);
            let hi = ops.partition_point(|&o| trace.spans[o as usize].start <= it.end_ns);
            inside_ops += hi.saturating_sub(lo);
            for keys in &per_op[lo.min(hi)..hi] {
                let mut seen: Vec<u32> = Vec::new();
                for ((kind, name), c) in keys {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnosis_messages_word_their_numbers() {
        let cases = [
            (
                Diagnosis::CopyBound {
                    h2d_overlap: 0.75,
                    mean_interval_ns: 2_500_000.0,
                    between_share: 0.25,
                },
                "copy-bound: host-to-device copies fill the gaps between iterations (they cover \
                 75% of the mean 2.500 ms interval, 25% of each cycle)",
            ),
            (
                Diagnosis::CpuBound {
                    mean_interval_ns: 1_000_000.0,
                    between_share: 0.5,
                    h2d_overlap: 0.1,
                },
                "CPU-bound: the device waits on the host between iterations (mean interval \
                 1.000 ms, 50% of each cycle; copies cover only 10% of it)",
            ),
            (
                Diagnosis::LaunchBound {
                    busy_in_iterations: 0.6,
                    mean_op_gap_ns: 1_500.0,
                },
                "launch/host-bound inside iterations: the main stream is idle 40% of each \
                 iteration (mean gap between ops 1.5 us)",
            ),
            (
                Diagnosis::DeviceBound {
                    busy_in_iterations: 0.95,
                    between_share: 0.05,
                },
                "device-bound: the main stream is busy 95% of each iteration and waits 5% of \
                 each cycle between iterations",
            ),
            (
                Diagnosis::Irregular {
                    after_iteration: 3,
                    max_interval_ns: 9_000_000,
                    median_interval_ns: 1_000_000.0,
                },
                "irregular: after iteration 3 the device waits 9.000 ms against a median of \
                 1.000 ms (a stall: data loading, checkpointing, garbage collection?)",
            ),
            (
                Diagnosis::ExtraOps {
                    iterations_with_extra: 1,
                    iterations: 5,
                    most_extra_ops: 2,
                    pattern_len: 37,
                },
                "1 of 5 iterations run extra ops (up to 2 beyond the 37-op pattern): periodic \
                 extra work such as logging or statistics",
            ),
            (
                Diagnosis::WeakPattern { coverage: 0.3 },
                "weak pattern: iterations hold only 30% of the main stream's ops",
            ),
        ];
        for (d, text) in cases {
            assert_eq!(d.message(), text);
            assert_eq!(d.to_string(), text);
            assert_eq!(serde_json::to_value(&d).ok(), Some(serde_json::json!(text)));
        }
    }

    /// Device idle gaps: long before each iteration, short elsewhere.
    fn gaps(n: usize, starts: &[usize]) -> Vec<Ns> {
        let mut g = vec![100; n];
        for &k in starts {
            g[k] = 50_000;
        }
        g
    }

    fn opts(i: &[usize]) -> IterationOptions {
        IterationOptions {
            iterations: i.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn exact_periodic_sequence() {
        let (s, starts) = synthetic(1, 50, 20, 0, 0.0, 0, 20);
        for o in [opts(&[20]), opts(&[])] {
            let loops = mine(&s, None, &o);
            assert_eq!(loops.len(), 1, "{o:?}");
            let l = &loops[0];
            assert_eq!(l.pattern_len, 50);
            assert_eq!(l.i, 20);
            let got: Vec<usize> = l.matches.iter().map(|m| m.start).collect();
            assert_eq!(got, starts);
        }
    }

    #[test]
    fn noise_insertions_within_k0_are_matched() {
        // 40 iterations of 100 ops, 30% get 1..=3 inserted ops, 37 ops of warm-up.
        let (s, starts) = synthetic(5, 100, 40, 37, 0.3, 3, 30);
        let o = IterationOptions {
            iterations: vec![40],
            k0: Some(3),
            ..Default::default()
        };
        let g = gaps(s.len(), &starts);
        let loops = mine(&s, Some(&g), &o);
        let l = &loops[0];
        assert_eq!(l.matches.len(), 40);
        let got: Vec<usize> = l.matches.iter().map(|m| m.start).collect();
        assert_eq!(got, starts);
        assert!(l.matches.iter().any(|m| m.inserted > 0));
        assert!(l.matches.iter().all(|m| m.inserted <= 3));
        // Estimated i finds the same loop.
        let est = mine(
            &s,
            Some(&g),
            &IterationOptions {
                k0: Some(3),
                ..Default::default()
            },
        );
        assert_eq!(est[0].matches.len(), 40);
        assert!(est[0].i_estimated);
        // Without timing the phase is a guess, but the loop is still found.
        let blind = mine(&s, None, &o);
        assert!(blind[0].matches.len() >= 38, "{}", blind[0].matches.len());
        assert_eq!(blind[0].pattern_len, 100);
    }

    #[test]
    fn too_many_insertions_are_not_an_iteration() {
        let (mut s, _) = synthetic(9, 60, 10, 0, 0.0, 0, 25);
        // 6 foreign ops inside iteration 4.
        for k in 0..6 {
            s.insert(4 * 60 + 10 + k * 5, 999);
        }
        let o = IterationOptions {
            iterations: vec![10],
            k0: Some(5),
            ..Default::default()
        };
        let l = &mine(&s, None, &o)[0];
        assert_eq!(l.matches.len(), 9);
        let o = IterationOptions {
            iterations: vec![10],
            k0: Some(6),
            ..Default::default()
        };
        assert_eq!(mine(&s, None, &o)[0].matches.len(), 10);
    }

    #[test]
    fn two_loops_train_then_eval() {
        let (train, _) = synthetic(11, 80, 30, 0, 0.0, 0, 40);
        let (eval, _) = synthetic(12, 30, 20, 0, 0.0, 0, 40);
        // eval symbols distinct from train's.
        let mut s = train.clone();
        s.extend(eval.iter().map(|x| x + 1000));
        for o in [opts(&[30, 20]), opts(&[])] {
            let loops = mine(&s, None, &o);
            assert_eq!(loops.len(), 2, "{o:?}");
            assert_eq!((loops[0].pattern_len, loops[0].matches.len()), (80, 30));
            assert_eq!((loops[1].pattern_len, loops[1].matches.len()), (30, 20));
            assert_eq!(loops[1].matches[0].start, 2400);
        }
    }

    #[test]
    fn layers_inside_steps_are_a_nested_loop() {
        // 5 steps of: 10 prologue ops, 6 layers of 10 ops, 8 epilogue ops (all distinct
        // symbols apart from the layers' repeats): the steps, then 30 layers inside them.
        let layer: Vec<u32> = (200..210).collect();
        let mut step: Vec<u32> = (100..110).collect();
        for _ in 0..6 {
            step.extend_from_slice(&layer);
        }
        step.extend(300..308);
        let s: Vec<u32> = step.iter().copied().cycle().take(5 * step.len()).collect();
        let loops = mine(&s, None, &opts(&[]));
        assert_eq!(loops.len(), 2, "{loops:?}");
        assert_eq!((loops[0].pattern_len, loops[0].matches.len()), (78, 5));
        assert_eq!(loops[0].inside, None);
        let inner = &loops[1];
        assert_eq!(inner.inside, Some(0));
        assert_eq!((inner.pattern_len, inner.matches.len()), (10, 30));
        let want: Vec<usize> = (0..5)
            .flat_map(|k| (0..6).map(move |j| k * 78 + 10 + 10 * j))
            .collect();
        let got: Vec<usize> = inner.matches.iter().map(|m| m.start).collect();
        assert_eq!(got, want);
        // Off: no nested loop; a loop too short to hold layers gets none either.
        let off = IterationOptions {
            nested: false,
            ..Default::default()
        };
        assert_eq!(mine(&s, None, &off).len(), 1);
        let short: Vec<u32> = layer.iter().copied().cycle().take(200).collect();
        let loops = mine(&short, None, &opts(&[]));
        assert!(loops.iter().all(|l| l.inside.is_none()), "{loops:?}");
    }

    #[test]
    fn rotation_tie_goes_to_the_largest_gap() {
        // Trace starts 7 ops into an iteration: S = tail(P) P^5. Gaps before each iteration
        // start are large.
        let (full, _) = synthetic(3, 40, 6, 0, 0.0, 0, 15);
        let s = full[33..].to_vec();
        let mut gaps = vec![10; s.len()];
        for k in (7..s.len()).step_by(40) {
            gaps[k] = 5000;
        }
        let l = &mine(&s, Some(&gaps), &opts(&[5]))[0];
        let got: Vec<usize> = l.matches.iter().map(|m| m.start).collect();
        assert_eq!(got, vec![7, 47, 87, 127, 167]);
    }
}
