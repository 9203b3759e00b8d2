//! Mining a symbol sequence for its loops ([`mine`]): the pattern search on the suffix
//! structures, the approximate matches (DeepProf's Algorithm 1 with longest-common-extension
//! jumps), further loops in what is left and nested loops inside each loop's iterations; and
//! synthetic sequences with known loops ([`synthetic`]) to test it on. Works on integer
//! symbols only: the trace is read elsewhere.

use serde::Serialize;
use strato_trace::Ns;

use crate::patterns::suffix::{for_each_node, lcp_array, rank_of, suffix_array, Lce};

/// Options of [`iterations`](super::iterations) and [`mine`].
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
