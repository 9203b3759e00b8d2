//! A baseline lined up with the run step by step (`strato view A --baseline B`, issue 30 item
//! 5): which of its steps pairs with which of the run's (common step numbers, else in order,
//! else the first events), and how far each stretch of its timeline moves ([`Alignment`]).
//! Pure over two traces; the API ([`crate::api`]) applies it when the baseline joins the view.

use strato_trace::{Ns, Trace};

/// How a baseline's times move to line up with the run's ([`align_baseline`]): stretch by
/// stretch, each stretch one of its steps (to the next step's start) moved so that it starts
/// with the run's step it is paired with. A step's events move together, so its durations and
/// gaps are the recorded ones; a baseline step longer than the run's then runs into its next
/// step's stretch, on rows of their own in the same lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alignment {
    /// `(from, shift)`, sorted by `from`, a time on the baseline's clock: what starts at or after
    /// `from` (and before the next stretch) moves by `shift`; the first stretch also moves what
    /// starts before it.
    pub stretches: Vec<(Ns, Ns)>,
    /// The first step number both runs have (`None`: their steps were paired in order, or
    /// their first events lined up).
    pub first_step: Option<u64>,
    /// How many steps start together (0: the first events do).
    pub steps: usize,
    /// How the steps were paired, in words.
    pub aligned_on: String,
}

impl Alignment {
    /// How far an event of the baseline that starts at `t` (its clock) moves.
    pub fn shift_at(&self, t: Ns) -> Ns {
        self.stretches[self.stretch_at(t)].1
    }

    /// The stretch an event of the baseline that starts at `t` (its clock) moves with.
    pub fn stretch_at(&self, t: Ns) -> usize {
        let i = self.stretches.partition_point(|&(from, _)| from <= t);
        i.saturating_sub(1)
    }

    /// The first stretch's move (the whole baseline's, when it is one stretch).
    pub fn first_shift(&self) -> Ns {
        self.stretches[0].1
    }

    /// The smallest and largest move.
    pub fn shift_range(&self) -> (Ns, Ns) {
        let shifts = self.stretches.iter().map(|&(_, s)| s);
        (shifts.clone().min().unwrap_or(0), shifts.max().unwrap_or(0))
    }

    /// Moves every event of `baseline` by [`Alignment::shift_at`] its start (a flow's end by
    /// its own time); returns each span's stretch, in span order (4 bytes a span).
    pub fn apply(&self, baseline: &mut Trace) -> Vec<u32> {
        let mut moved = Vec::with_capacity(baseline.spans.len());
        for s in &mut baseline.spans {
            let stretch = self.stretch_at(s.start);
            let shift = self.stretches[stretch].1;
            s.start = s.start.saturating_add(shift);
            s.end = s.end.saturating_add(shift);
            moved.push(stretch as u32);
        }
        for i in &mut baseline.instants {
            i.ts = i.ts.saturating_add(self.shift_at(i.ts));
        }
        for c in &mut baseline.counters {
            c.ts = c.ts.saturating_add(self.shift_at(c.ts));
        }
        for f in &mut baseline.flows {
            for end in [&mut f.from, &mut f.to].into_iter().flatten() {
                end.ts = end.ts.saturating_add(self.shift_at(end.ts));
            }
        }
        moved
    }
}

/// How to move `baseline`'s times so that its steps start with `run`'s ([`Alignment`]), read
/// from each run's first rank with `ProfilerStep#N` annotations (both on their job clocks):
/// - each step number both have: the baseline's step starts with the run's;
/// - none in common: their steps paired in order of start (first with first, ...);
/// - either without steps: the first events start together (one stretch).
///
/// A baseline step the run does not have moves with the step before it.
pub fn align_baseline(run: &Trace, baseline: &Trace) -> Alignment {
    let first_steps = |t: &Trace| {
        strato_analysis::paths::critical_path::rank_steps(t)
            .into_iter()
            .find(|steps| !steps.is_empty())
            .unwrap_or_default()
    };
    let (a, b) = (first_steps(run), first_steps(baseline));
    // (the baseline step's start, the run step's start), by the baseline's start.
    let stretches_of = |mut pairs: Vec<(Ns, Ns)>| {
        pairs.sort_unstable();
        pairs
            .into_iter()
            .map(|(from, to)| (from, to - from))
            .collect::<Vec<_>>()
    };
    let common: Vec<u64> = b.keys().filter(|n| a.contains_key(n)).copied().collect();
    if let (Some(&first), Some(&last)) = (common.first(), common.last()) {
        let pairs = common.iter().map(|n| (b[n].0, a[n].0)).collect();
        let aligned_on = if common.len() == 1 {
            format!("ProfilerStep#{first} starts together in both runs")
        } else {
            format!(
                "each of the {} step numbers both runs have (ProfilerStep#{first} to \
                 #{last}) starts together",
                common.len()
            )
        };
        return Alignment {
            stretches: stretches_of(pairs),
            first_step: Some(first),
            steps: common.len(),
            aligned_on,
        };
    }
    let by_start = |steps: &std::collections::BTreeMap<u64, (Ns, Ns)>| {
        let mut v: Vec<(Ns, u64)> = steps.iter().map(|(n, (s, _))| (*s, *n)).collect();
        v.sort_unstable();
        v
    };
    let (sa, sb) = (by_start(&a), by_start(&b));
    if let (Some(&(_, na)), Some(&(_, nb))) = (sa.first(), sb.first()) {
        let pairs: Vec<(Ns, Ns)> = sb.iter().zip(&sa).map(|(b, a)| (b.0, a.0)).collect();
        let steps = pairs.len();
        return Alignment {
            stretches: stretches_of(pairs),
            first_step: None,
            steps,
            aligned_on: format!(
                "no step number in common: the steps are paired in order ({steps}), the run's \
                 ProfilerStep#{na} with the baseline's ProfilerStep#{nb}"
            ),
        };
    }
    let first = |t: &Trace| t.spans.iter().map(|s| s.start).min().unwrap_or(0);
    Alignment {
        stretches: vec![(Ns::MIN, first(run) - first(baseline))],
        first_step: None,
        steps: 0,
        aligned_on: "a run without steps: the first events start together".to_owned(),
    }
}
