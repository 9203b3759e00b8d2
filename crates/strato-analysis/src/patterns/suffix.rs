//! Suffix structures over integer sequences (kernel-name symbols), all linear in the length:
//! the suffix array by SA-IS (Nong, Zhang & Chan 2009; the formulation of the AtCoder Library),
//! the LCP array by Kasai et al., a bottom-up walk over the LCP intervals (the internal nodes of
//! the suffix tree, Abouelhoda et al. 2004) carrying each node's occurrence count and first/last
//! position, and longest-common-extension queries through a block range-minimum structure.
//!
//! Memory for n symbols: SA 4n + rank 4n + LCP 4n bytes + the RMQ blocks (about n/8 bytes),
//! plus SA-IS's transient working set (about 12n bytes, freed before it returns). Nothing here
//! is O(n^2) in time or space; the only non-constant factor is the `log(n/64)` levels of the
//! block sparse table.

/// Suffix array of `s` (symbols `0..=upper`) by SA-IS. `SA[k]` = start of the k-th smallest
/// suffix. Linear time.
pub fn suffix_array(s: &[u32], upper: u32) -> Vec<u32> {
    let s: Vec<i32> = s.iter().map(|&c| c as i32).collect();
    sa_is(&s, upper as usize)
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

fn sa_naive(s: &[i32]) -> Vec<i32> {
    let mut sa: Vec<i32> = (0..s.len() as i32).collect();
    sa.sort_by(|&a, &b| s[a as usize..].cmp(&s[b as usize..]));
    sa
}

fn sa_is(s: &[i32], upper: usize) -> Vec<i32> {
    let n = s.len();
    match n {
        0 => return Vec::new(),
        1 => return vec![0],
        2 => return if s[0] < s[1] { vec![0, 1] } else { vec![1, 0] },
        _ if n < 10 => return sa_naive(s),
        _ => {}
    }
    let mut sa = vec![-1i32; n];
    let mut ls = vec![false; n];
    for i in (0..n - 1).rev() {
        ls[i] = if s[i] == s[i + 1] {
            ls[i + 1]
        } else {
            s[i] < s[i + 1]
        };
    }
    let mut sum_l = vec![0i32; upper + 1];
    let mut sum_s = vec![0i32; upper + 1];
    for i in 0..n {
        if !ls[i] {
            sum_s[s[i] as usize] += 1;
        } else if (s[i] as usize) < upper {
            sum_l[s[i] as usize + 1] += 1;
        }
    }
    for i in 0..=upper {
        sum_s[i] += sum_l[i];
        if i < upper {
            sum_l[i + 1] += sum_s[i];
        }
    }
    let induce = |sa: &mut Vec<i32>, lms: &[i32]| {
        sa.iter_mut().for_each(|v| *v = -1);
        let mut buf = sum_s.clone();
        for &d in lms {
            if d as usize == n {
                continue;
            }
            let c = s[d as usize] as usize;
            sa[buf[c] as usize] = d;
            buf[c] += 1;
        }
        buf.copy_from_slice(&sum_l);
        let c = s[n - 1] as usize;
        sa[buf[c] as usize] = (n - 1) as i32;
        buf[c] += 1;
        for i in 0..n {
            let v = sa[i];
            if v >= 1 && !ls[v as usize - 1] {
                let c = s[v as usize - 1] as usize;
                sa[buf[c] as usize] = v - 1;
                buf[c] += 1;
            }
        }
        buf.copy_from_slice(&sum_l);
        for i in (0..n).rev() {
            let v = sa[i];
            if v >= 1 && ls[v as usize - 1] {
                let c = s[v as usize - 1] as usize + 1;
                buf[c] -= 1;
                sa[buf[c] as usize] = v - 1;
            }
        }
    };
    let mut lms_map = vec![-1i32; n + 1];
    let mut lms: Vec<i32> = Vec::new();
    for i in 1..n {
        if !ls[i - 1] && ls[i] {
            lms_map[i] = lms.len() as i32;
            lms.push(i as i32);
        }
    }
    let m = lms.len();
    induce(&mut sa, &lms);
    if m > 0 {
        let mut sorted_lms: Vec<i32> = Vec::with_capacity(m);
        for &v in &sa {
            if v >= 0 && lms_map[v as usize] != -1 {
                sorted_lms.push(v);
            }
        }
        let mut rec_s = vec![0i32; m];
        let mut rec_upper = 0i32;
        rec_s[lms_map[sorted_lms[0] as usize] as usize] = 0;
        for i in 1..m {
            let (mut l, mut r) = (sorted_lms[i - 1] as usize, sorted_lms[i] as usize);
            let end_l = if (lms_map[l] as usize) + 1 < m {
                lms[lms_map[l] as usize + 1] as usize
            } else {
                n
            };
            let end_r = if (lms_map[r] as usize) + 1 < m {
                lms[lms_map[r] as usize + 1] as usize
            } else {
                n
            };
            let mut same = true;
            if end_l - l != end_r - r {
                same = false;
            } else {
                while l < end_l {
                    if s[l] != s[r] {
                        break;
                    }
                    l += 1;
                    r += 1;
                }
                if l == n || s[l] != s[r] {
                    same = false;
                }
            }
            if !same {
                rec_upper += 1;
            }
            rec_s[lms_map[sorted_lms[i] as usize] as usize] = rec_upper;
        }
        drop(lms_map);
        let rec_sa = sa_is(&rec_s, rec_upper as usize);
        drop(rec_s);
        for i in 0..m {
            sorted_lms[i] = lms[rec_sa[i] as usize];
        }
        induce(&mut sa, &sorted_lms);
    }
    sa
}

/// Rank (inverse suffix array): `rank[SA[k]] = k`.
pub fn rank_of(sa: &[u32]) -> Vec<u32> {
    let mut rank = vec![0u32; sa.len()];
    for (k, &p) in sa.iter().enumerate() {
        rank[p as usize] = k as u32;
    }
    rank
}

/// LCP array by Kasai et al.: `lcp[k]` = longest common prefix of suffixes `SA[k-1]` and
/// `SA[k]`; `lcp[0] = 0`. Linear time.
pub fn lcp_array(s: &[u32], sa: &[u32], rank: &[u32]) -> Vec<u32> {
    let n = s.len();
    let mut lcp = vec![0u32; n];
    let mut h = 0usize;
    for i in 0..n {
        let r = rank[i] as usize;
        if r == 0 {
            h = 0;
            continue;
        }
        let j = sa[r - 1] as usize;
        while i + h < n && j + h < n && s[i + h] == s[j + h] {
            h += 1;
        }
        lcp[r] = h as u32;
        h = h.saturating_sub(1);
    }
    lcp
}

/// An internal node of the suffix tree as an LCP interval: the suffixes `SA[lb..=rb]` share a
/// prefix of length `lcp`; the node spells the strings of lengths `parent_lcp+1..=lcp` that
/// start at those `rb-lb+1` positions, the first at `first` and the last at `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub lcp: u32,
    pub parent_lcp: u32,
    pub lb: u32,
    pub rb: u32,
    pub first: u32,
    pub last: u32,
    /// Second smallest and second largest occurrence (equal to `last` / `first` when there are
    /// two): `min(second - first, last - penultimate)` bounds the closest pair from above.
    pub second: u32,
    pub penultimate: u32,
}

impl Node {
    /// The smaller of the first and the last gap between consecutive occurrences.
    pub fn end_gap(&self) -> usize {
        (self.second - self.first).min(self.last - self.penultimate) as usize
    }

    /// Number of occurrences.
    pub fn count(&self) -> usize {
        (self.rb - self.lb + 1) as usize
    }
}

/// Calls `visit` on every internal node with `lcp > 0` (bottom-up, children before parents).
/// Linear time; the stack holds at most one entry per distinct LCP value on a root path.
pub fn for_each_node(sa: &[u32], lcp: &[u32], mut visit: impl FnMut(Node)) {
    /// Two smallest and two largest positions of a set.
    #[derive(Clone, Copy)]
    struct Ends {
        lo: (u32, u32),
        hi: (u32, u32),
    }
    impl Ends {
        fn leaf(p: u32) -> Self {
            Ends {
                lo: (p, u32::MAX),
                hi: (p, 0),
            }
        }
        fn merge(self, o: Ends) -> Ends {
            let mut lo = [self.lo.0, self.lo.1, o.lo.0, o.lo.1];
            lo.sort_unstable();
            let mut hi = [self.hi.0, self.hi.1, o.hi.0, o.hi.1];
            hi.sort_unstable_by(|a, b| b.cmp(a));
            Ends {
                lo: (lo[0], lo[1]),
                hi: (hi[0], hi[1]),
            }
        }
    }
    let n = sa.len();
    if n < 2 {
        return;
    }
    let empty = Ends {
        lo: (u32::MAX, u32::MAX),
        hi: (0, 0),
    };
    // (lcp, lb, ends)
    let mut stack: Vec<(u32, u32, Ends)> = vec![(0, 0, empty)];
    for i in 1..=n {
        let cur = if i < n { lcp[i] } else { 0 };
        let (mut lb, mut ends) = ((i - 1) as u32, Ends::leaf(sa[i - 1]));
        while let Some(&(top_lcp, top_lb, top_ends)) = stack.last() {
            if cur >= top_lcp {
                break;
            }
            stack.pop();
            let e = top_ends.merge(ends);
            let parent = stack.last().map_or(0, |t| t.0).max(cur);
            visit(Node {
                lcp: top_lcp,
                parent_lcp: parent,
                lb: top_lb,
                rb: (i - 1) as u32,
                first: e.lo.0,
                last: e.hi.0,
                second: e.lo.1,
                penultimate: e.hi.1,
            });
            lb = top_lb;
            ends = e;
        }
        match stack.last_mut() {
            Some(top) if top.0 == cur => top.2 = top.2.merge(ends),
            _ => stack.push((cur, lb, ends)),
        }
    }
}

const BLOCK: usize = 64;

/// Longest common extension of two suffixes in O(BLOCK) time (range minimum over the LCP array
/// with a sparse table over block minima).
#[derive(Debug)]
pub struct Lce {
    rank: Vec<u32>,
    lcp: Vec<u32>,
    table: Vec<Vec<u32>>,
}

impl Lce {
    /// Builds the structure from a suffix array's rank and LCP arrays.
    pub fn new(rank: Vec<u32>, lcp: Vec<u32>) -> Self {
        let blocks = lcp.len().div_ceil(BLOCK);
        let mut table = Vec::new();
        let base: Vec<u32> = lcp
            .chunks(BLOCK)
            .map(|c| c.iter().copied().min().unwrap_or(0))
            .collect();
        table.push(base);
        let mut width = 1usize;
        while width * 2 <= blocks {
            let prev = &table[table.len() - 1];
            let next: Vec<u32> = (0..blocks + 1 - width * 2)
                .map(|b| prev[b].min(prev[b + width]))
                .collect();
            table.push(next);
            width *= 2;
        }
        Lce { rank, lcp, table }
    }

    fn range_min(&self, lo: usize, hi: usize) -> u32 {
        // min of lcp[lo..=hi]
        let (bl, bh) = (lo / BLOCK, hi / BLOCK);
        if bh <= bl + 1 {
            return self.lcp[lo..=hi].iter().copied().min().unwrap_or(0);
        }
        let mut best = self.lcp[lo..(bl + 1) * BLOCK]
            .iter()
            .copied()
            .min()
            .unwrap_or(u32::MAX);
        best = best.min(
            self.lcp[bh * BLOCK..=hi]
                .iter()
                .copied()
                .min()
                .unwrap_or(u32::MAX),
        );
        let (a, b) = (bl + 1, bh - 1);
        let span = b - a + 1;
        let level = (usize::BITS - 1 - span.leading_zeros()) as usize;
        let row = &self.table[level];
        best.min(row[a]).min(row[b + 1 - (1 << level)])
    }

    /// Length of the longest common prefix of the suffixes starting at `a` and `b`.
    pub fn lce(&self, a: usize, b: usize, n: usize) -> usize {
        if a == b {
            return n - a;
        }
        let (ra, rb) = (self.rank[a] as usize, self.rank[b] as usize);
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.range_min(lo + 1, hi) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_sa(s: &[u32]) -> Vec<u32> {
        let mut sa: Vec<u32> = (0..s.len() as u32).collect();
        sa.sort_by(|&a, &b| s[a as usize..].cmp(&s[b as usize..]));
        sa
    }

    fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    #[test]
    fn sa_is_matches_naive_on_random_and_periodic() {
        let mut seed = 7u64;
        for round in 0..200 {
            let n = (lcg(&mut seed) % 300) as usize;
            let sigma = 1 + lcg(&mut seed) % if round % 2 == 0 { 3 } else { 40 };
            let s: Vec<u32> = if round % 5 == 0 {
                (0..n).map(|i| (i % 7) as u32 % sigma).collect()
            } else {
                (0..n).map(|_| lcg(&mut seed) % sigma).collect()
            };
            let sa = suffix_array(&s, sigma);
            assert_eq!(sa, naive_sa(&s), "round {round} n {n}");
            let rank = rank_of(&sa);
            let lcp = lcp_array(&s, &sa, &rank);
            for k in 1..n {
                let (a, b) = (sa[k - 1] as usize, sa[k] as usize);
                let l = s[a..]
                    .iter()
                    .zip(&s[b..])
                    .take_while(|(x, y)| x == y)
                    .count();
                assert_eq!(lcp[k] as usize, l);
            }
            let lce = Lce::new(rank, lcp);
            for _ in 0..50 {
                if n == 0 {
                    break;
                }
                let a = (lcg(&mut seed) as usize) % n;
                let b = (lcg(&mut seed) as usize) % n;
                let l = s[a..]
                    .iter()
                    .zip(&s[b..])
                    .take_while(|(x, y)| x == y)
                    .count();
                assert_eq!(lce.lce(a, b, n), l);
            }
        }
    }

    #[test]
    fn nodes_of_banana() {
        // b a n a n a -> 1 0 2 0 2 0
        let s = [1u32, 0, 2, 0, 2, 0];
        let sa = suffix_array(&s, 2);
        let rank = rank_of(&sa);
        let lcp = lcp_array(&s, &sa, &rank);
        let mut nodes = Vec::new();
        for_each_node(&sa, &lcp, |n| nodes.push(n));
        // "a" x3 (first 1, last 5), "ana" x2 (1, 3), "na" x2 (2, 4)
        let mut seen: Vec<(u32, u32, usize, u32, u32)> = nodes
            .iter()
            .map(|n| (n.lcp, n.parent_lcp, n.count(), n.first, n.last))
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![(1, 0, 3, 1, 5), (2, 0, 2, 2, 4), (3, 1, 2, 1, 3)]
        );
    }
}
