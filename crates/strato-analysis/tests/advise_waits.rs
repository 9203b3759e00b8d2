//! Waiting for a late peer is the straggler's finding, not exposed communication (issue 28),
//! on the 8 real DLRM ranks: every collective kernel splits into its wait (from the
//! collectives analysis' per-member wait) and its transfer, the exposed intervals lie in the
//! transfer only, and the straggler finding names who waited for it and in which collective.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::path::PathBuf;

use strato_analysis::advise::{self, AdviseConfig, MultiRankEvidence};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::device_time::gpu_time::{intersection_length, length, merge};
use strato_io::{import_paths, ImportOptions};

#[test]
fn dlrm_waits_are_split_from_transfer_and_named_in_the_straggler_finding() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/kineto/param_dlrm8");
    if !dir.exists() {
        eprintln!("skipping param_dlrm8: not present");
        return;
    }
    let trace = import_paths(&[dir], &ImportOptions::default()).expect("import");
    assert_eq!(trace.ranks.len(), 8);
    let evidence = advise::CrossRankEvidence::from_trace(&trace);
    let waits = evidence.peer_waits();
    assert!(
        !waits.is_empty(),
        "complete collectives wait for their last member"
    );
    let exposed = evidence.exposed_communication();
    let mut waited_total = 0;
    for c in &exposed {
        // The wait of (rank, collective) is the sum of its waits for every peer.
        let of_it: Vec<_> = waits
            .iter()
            .filter(|w| w.rank == c.rank && w.name == c.name)
            .collect();
        let waited: i64 = of_it.iter().map(|w| w.wait_ns).sum();
        assert_eq!(c.waiting_ns, waited, "rank {} {}", c.rank, c.name);
        waited_total += waited;
        // Exposed time is transfer only: never inside a wait, never more than the transfer.
        let exposed = merge(c.intervals.iter().copied());
        let wait_intervals = merge(of_it.iter().flat_map(|w| w.intervals.iter().copied()));
        assert_eq!(
            intersection_length(&exposed, &wait_intervals),
            0,
            "{}",
            c.name
        );
        assert!(length(&exposed) <= c.total_ns - c.waiting_ns, "{}", c.name);
        assert!(c.waiting_ns <= c.total_ns);
    }
    assert!(waited_total > 0);
    // The rules: the straggler finding names the ranks that waited for it (evidence
    // `waited_for` on their own ranks) and the collective; no exposed-communication finding
    // judges a wait.
    let config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    let report = advise::advise(&Analyzed::new(&trace), &config, Some(&evidence));
    let stragglers: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule == "stragglers")
        .collect();
    assert!(!stragglers.is_empty());
    for f in &stragglers {
        assert!(f.message.contains("waited"), "{}", f.message);
        assert!(f.message.contains("ncclKernel"), "{}", f.message);
        let named: Vec<_> = f
            .evidence
            .iter()
            .filter(|e| e.kind == "waited_for")
            .collect();
        assert!(!named.is_empty(), "{}", f.message);
        for e in named {
            assert!(
                e.name.starts_with(&format!("rank {} waited", e.rank)),
                "{}",
                e.name
            );
        }
    }
    for f in report
        .findings
        .iter()
        .filter(|f| f.rule == "exposed-communication")
    {
        assert!(f.message.contains("of transfer"), "{}", f.message);
    }
}
