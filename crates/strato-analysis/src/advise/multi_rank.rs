//! Rules `stragglers` and `exposed-communication`: the multi-rank slot.
//!
//! These rules consume what a cross-rank analysis found, through [`MultiRankEvidence`]; they
//! do not compare ranks themselves. [`super::CrossRankEvidence`] implements the trait from the
//! collectives analysis (steps aligned across ranks, collective waits) and from the
//! communication kernels against computation of each rank.
//!
//! - `stragglers` compares ranks: with a single rank (or without the evidence) it reports
//!   `evaluated: false` with a note saying so.
//! - `exposed-communication` needs no peer (a rank's communication kernels against its own
//!   computation): it is evaluated on any trace the evidence was computed for, single-rank
//!   included; without evidence it is not evaluated.
//!
//! The two never claim the same time: the part of a collective kernel spent waiting for the
//! last member to arrive ([`PeerWait`], from the collectives analysis' per-member wait) is the
//! straggler's finding — it names the waiting rank, the late peer and the collective — and
//! `exposed-communication` judges only the transfer part (the kernel after its wait): a rank
//! waiting for a late peer is not told to overlap its communication with compute.

use serde::{Deserialize, Serialize};
use strato_trace::Ns;

use super::{human, Draft, Evidence, JobClock};

/// Rule id of the straggler rule.
pub const STRAGGLER_ID: &str = "stragglers";
/// Rule id of the exposed-communication rule.
pub const EXPOSED_ID: &str = "exposed-communication";

/// One rank that was slower than the others in one step (or window).
#[derive(Debug, Clone, PartialEq)]
pub struct StragglerObservation {
    pub rank: i64,
    /// The step (or window) index the analysis aligned across ranks.
    pub step: usize,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// This rank's time for the step minus the median over ranks.
    pub excess_ns: Ns,
    /// The median step time over ranks.
    pub median_ns: Ns,
}

/// Communication on one rank that no computation overlapped.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposedCommunication {
    pub rank: i64,
    /// The collective (kernel) name.
    pub name: String,
    /// Exposed (not overlapped) intervals of the transfer part (waits for late peers left
    /// out).
    pub intervals: Vec<(Ns, Ns)>,
    /// The collective's whole time (waiting + transfer, exposed or overlapped).
    pub total_ns: Ns,
    /// The part of `total_ns` spent waiting for a late peer ([`PeerWait`]): the straggler
    /// rule's, not judged here. 0 when unknown (single rank, unmatched collective).
    pub waiting_ns: Ns,
}

/// Time one rank's collective kernels spent waiting for one late peer (the last member to
/// arrive), per collective name.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerWait {
    /// The rank that waited.
    pub rank: i64,
    /// The late peer it waited for.
    pub peer: i64,
    /// The collective (kernel) name.
    pub name: String,
    /// How many of its collectives waited for that peer.
    pub count: usize,
    /// The waits (the head of each kernel, up to the peer's arrival), on the waiting rank's
    /// clock.
    pub intervals: Vec<(Ns, Ns)>,
    /// Their total.
    pub wait_ns: Ns,
}

/// What the cross-rank analyses provide to the advice rules.
pub trait MultiRankEvidence {
    /// Whether ranks could be compared (two or more in the input). When `false` the straggler
    /// rule is not evaluated (it says so) and [`Self::stragglers`] is not consulted.
    fn compares_ranks(&self) -> bool {
        true
    }
    /// Every straggling (rank, step) the analysis found, any excess.
    fn stragglers(&self) -> Vec<StragglerObservation>;
    /// Exposed communication per (rank, collective).
    fn exposed_communication(&self) -> Vec<ExposedCommunication>;
    /// Waits for late peers per (waiting rank, peer, collective); empty when the analysis
    /// could not tell (one rank, collectives not matched).
    fn peer_waits(&self) -> Vec<PeerWait> {
        Vec::new()
    }
}

/// Thresholds of [`stragglers`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StragglerConfig {
    pub enabled: bool,
    /// A rank is a straggler in a step when it took this much longer than the median (percent).
    pub min_excess_pct: f64,
}

impl Default for StragglerConfig {
    fn default() -> Self {
        StragglerConfig {
            enabled: true,
            min_excess_pct: 10.0,
        }
    }
}

/// Thresholds of [`exposed_communication`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExposedConfig {
    pub enabled: bool,
    /// A collective is reported when at least this share of its time is exposed (percent).
    pub min_exposed_pct: f64,
}

impl Default for ExposedConfig {
    fn default() -> Self {
        ExposedConfig {
            enabled: true,
            min_exposed_pct: 20.0,
        }
    }
}

const MISSING: &str = "needs two or more ranks in the input";
const NO_EXPOSURE: &str = "needs the exposure evidence (communication against computation)";

/// The straggler rule: one draft per straggling rank.
/// Its intervals on the job's clock (`clock`), its evidence on the straggler's.
pub fn stragglers(
    evidence: Option<&dyn MultiRankEvidence>,
    config: &StragglerConfig,
    clock: &JobClock,
) -> Result<Vec<Draft>, String> {
    let evidence = evidence
        .filter(|e| e.compares_ranks())
        .ok_or_else(|| MISSING.to_owned())?;
    let mut by_rank: std::collections::BTreeMap<i64, Vec<StragglerObservation>> =
        Default::default();
    for o in evidence.stragglers() {
        if o.median_ns > 0 && super::pct(o.excess_ns, o.median_ns) >= config.min_excess_pct {
            by_rank.entry(o.rank).or_default().push(o);
        }
    }
    // Who waited for each straggler, in which collective: the longest waits first.
    let mut waits_for: std::collections::BTreeMap<i64, Vec<PeerWait>> = Default::default();
    for w in evidence.peer_waits() {
        if w.wait_ns > 0 && by_rank.contains_key(&w.peer) {
            waits_for.entry(w.peer).or_default().push(w);
        }
    }
    Ok(by_rank
        .into_iter()
        .map(|(rank, mut list)| {
            list.sort_by_key(|o| std::cmp::Reverse(o.excess_ns));
            let excess: Ns = list.iter().map(|o| o.excess_ns).fold(0, Ns::saturating_add);
            let mut waits = waits_for.remove(&rank).unwrap_or_default();
            waits.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.rank.cmp(&b.rank)));
            let mut evidence: Vec<Evidence> = list
                .iter()
                .map(|o| Evidence {
                    kind: "step".into(),
                    rank,
                    start_ns: o.start_ns,
                    end_ns: o.end_ns,
                    name: format!(
                        "step {}: {} over the median {}",
                        o.step,
                        human(o.excess_ns),
                        human(o.median_ns)
                    ),
                })
                .collect();
            // Each waiting rank's longest wait for this one, beside the steps.
            evidence.extend(waits.iter().filter_map(|w| {
                let &(start, end) = w.intervals.iter().max_by_key(|(s, e)| e - s)?;
                Some(Evidence {
                    kind: "waited_for".into(),
                    rank: w.rank,
                    start_ns: start,
                    end_ns: end,
                    name: format!(
                        "rank {} waited {} in all for rank {rank} in `{}` ({} calls)",
                        w.rank,
                        human(w.wait_ns),
                        w.name,
                        w.count
                    ),
                })
            }));
            let waited = match waits.first() {
                None => "the other ranks wait for it at the next collective".to_owned(),
                Some(top) => {
                    let total = waits
                        .iter()
                        .fold(0 as Ns, |t, w| t.saturating_add(w.wait_ns));
                    format!(
                        "the other ranks waited {} for it in collectives, the most rank {} \
                         ({} in `{}`)",
                        human(total),
                        top.rank,
                        human(top.wait_ns),
                        top.name
                    )
                }
            };
            Draft {
                // At stake: the tail of each slow step beyond the median.
                intervals: clock.job_rank_intervals(
                    rank,
                    list.iter()
                        .map(|o| ((o.end_ns - o.excess_ns).max(o.start_ns), o.end_ns))
                        .collect(),
                ),
                evidence,
                message: format!(
                    "Rank {rank} was a straggler in {} steps ({} beyond the median in all); \
                     {waited}.",
                    list.len(),
                    human(excess)
                ),
                advice: "Find what differs on this rank (its own gpu-idle and host-sync \
                         findings, data loading, a slower device or host): balance the work \
                         or the input across ranks."
                    .into(),
            }
        })
        .collect())
}

/// The exposed-communication rule: one draft per (rank, collective) above the threshold.
/// Its intervals on the job's clock (`clock`), its evidence on the rank's.
pub fn exposed_communication(
    evidence: Option<&dyn MultiRankEvidence>,
    config: &ExposedConfig,
    clock: &JobClock,
) -> Result<Vec<Draft>, String> {
    let evidence = evidence.ok_or_else(|| NO_EXPOSURE.to_owned())?;
    Ok(evidence
        .exposed_communication()
        .into_iter()
        .filter_map(|c| {
            let exposed = crate::device_time::gpu_time::length(
                &crate::device_time::gpu_time::merge(c.intervals.iter().copied()),
            );
            // Judged against the transfer part only: waits for late peers are the stragglers'.
            let transfer = c.total_ns - c.waiting_ns;
            if transfer <= 0 || super::pct(exposed, transfer) < config.min_exposed_pct {
                return None;
            }
            let waited = if c.waiting_ns > 0 {
                format!(
                    " (besides {} waiting for late peers: see stragglers)",
                    human(c.waiting_ns)
                )
            } else {
                String::new()
            };
            Some(Draft {
                evidence: c
                    .intervals
                    .iter()
                    .map(|&(a, b)| Evidence {
                        kind: "communication".into(),
                        rank: c.rank,
                        start_ns: a,
                        end_ns: b,
                        name: format!("{} not overlapped", c.name),
                    })
                    .collect(),
                message: format!(
                    "On rank {}, {} of {} of transfer in `{}` ({:.0}%) overlapped no \
                     computation{waited}.",
                    c.rank,
                    human(exposed),
                    human(transfer),
                    c.name,
                    super::pct(exposed, transfer)
                ),
                intervals: clock.job_rank_intervals(c.rank, c.intervals),
                advice: "Overlap communication with computation: bucket gradients so \
                         all-reduce starts during backward (DDP bucket_cap_mb), prefetch \
                         parameters (FSDP forward/backward_prefetch), or reduce the volume."
                    .into(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl MultiRankEvidence for Fixed {
        fn stragglers(&self) -> Vec<StragglerObservation> {
            vec![
                StragglerObservation {
                    rank: 3,
                    step: 0,
                    start_ns: 0,
                    end_ns: 120,
                    excess_ns: 20,
                    median_ns: 100,
                },
                StragglerObservation {
                    rank: 1,
                    step: 0,
                    start_ns: 0,
                    end_ns: 105,
                    excess_ns: 5,
                    median_ns: 100,
                },
            ]
        }
        fn exposed_communication(&self) -> Vec<ExposedCommunication> {
            vec![
                ExposedCommunication {
                    rank: 0,
                    name: "ncclAllReduce".into(),
                    intervals: vec![(10, 40)],
                    total_ns: 50,
                    waiting_ns: 0,
                },
                ExposedCommunication {
                    rank: 1,
                    name: "ncclAllReduce".into(),
                    intervals: vec![(10, 15)],
                    total_ns: 50,
                    waiting_ns: 0,
                },
            ]
        }
    }

    #[test]
    fn without_the_analysis_the_rules_say_so() {
        assert!(stragglers(None, &Default::default(), &JobClock::default()).is_err());
        assert!(exposed_communication(None, &Default::default(), &JobClock::default()).is_err());
    }

    /// One rank: exposure is evaluated, stragglers are not.
    struct SingleRank;
    impl MultiRankEvidence for SingleRank {
        fn compares_ranks(&self) -> bool {
            false
        }
        fn stragglers(&self) -> Vec<StragglerObservation> {
            Fixed.stragglers()
        }
        fn exposed_communication(&self) -> Vec<ExposedCommunication> {
            Fixed.exposed_communication()
        }
    }

    #[test]
    fn a_single_rank_evaluates_exposure_only() {
        assert_eq!(
            stragglers(Some(&SingleRank), &Default::default(), &JobClock::default()).unwrap_err(),
            MISSING
        );
        let e = exposed_communication(Some(&SingleRank), &Default::default(), &JobClock::default())
            .unwrap();
        assert_eq!(e.len(), 1);
    }

    /// Rank 0's all-reduce: 100 ns, of which 90 waited for rank 3 (the straggler) and 10
    /// transferred, exposed whole.
    struct LatePeer;
    impl MultiRankEvidence for LatePeer {
        fn stragglers(&self) -> Vec<StragglerObservation> {
            vec![StragglerObservation {
                rank: 3,
                step: 1,
                start_ns: 0,
                end_ns: 200,
                excess_ns: 90,
                median_ns: 110,
            }]
        }
        fn exposed_communication(&self) -> Vec<ExposedCommunication> {
            vec![ExposedCommunication {
                rank: 0,
                name: "ncclAllReduce".into(),
                intervals: vec![(90, 100)],
                total_ns: 100,
                waiting_ns: 90,
            }]
        }
        fn peer_waits(&self) -> Vec<PeerWait> {
            vec![PeerWait {
                rank: 0,
                peer: 3,
                name: "ncclAllReduce".into(),
                count: 1,
                intervals: vec![(0, 90)],
                wait_ns: 90,
            }]
        }
    }

    #[test]
    fn waiting_for_a_late_peer_is_the_stragglers_finding_not_exposure() {
        let s = stragglers(Some(&LatePeer), &Default::default(), &JobClock::default()).unwrap();
        assert_eq!(s.len(), 1);
        assert!(
            s[0].message.starts_with("Rank 3 was a straggler"),
            "{}",
            s[0].message
        );
        assert!(
            s[0].message.contains("the most rank 0") && s[0].message.contains("ncclAllReduce"),
            "{}",
            s[0].message
        );
        let waited = &s[0].evidence[1];
        assert_eq!(
            (
                waited.kind.as_str(),
                waited.rank,
                waited.start_ns,
                waited.end_ns
            ),
            ("waited_for", 0, 0, 90)
        );
        // The transfer part (10 ns) is exposed whole: 100 % of it, and the message says the
        // wait is the stragglers'.
        let e = exposed_communication(Some(&LatePeer), &Default::default(), &JobClock::default())
            .unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].intervals, vec![(90, 100)]);
        assert!(e[0].message.contains("of transfer"), "{}", e[0].message);
        assert!(e[0].message.contains("see stragglers"), "{}", e[0].message);
        // All of it waiting: nothing left to judge.
        struct AllWait;
        impl MultiRankEvidence for AllWait {
            fn stragglers(&self) -> Vec<StragglerObservation> {
                Vec::new()
            }
            fn exposed_communication(&self) -> Vec<ExposedCommunication> {
                vec![ExposedCommunication {
                    rank: 0,
                    name: "ncclAllReduce".into(),
                    intervals: vec![],
                    total_ns: 100,
                    waiting_ns: 100,
                }]
            }
        }
        assert!(
            exposed_communication(Some(&AllWait), &Default::default(), &JobClock::default())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn thresholds_select_the_observations() {
        let s = stragglers(Some(&Fixed), &Default::default(), &JobClock::default()).unwrap();
        assert_eq!(s.len(), 1, "5% excess is below the 10% default");
        assert_eq!(s[0].intervals, vec![(100, 120)]);
        let e =
            exposed_communication(Some(&Fixed), &Default::default(), &JobClock::default()).unwrap();
        assert_eq!(e.len(), 1, "10% exposed is below the 20% default");
        assert_eq!(e[0].intervals, vec![(10, 40)]);
    }
}
