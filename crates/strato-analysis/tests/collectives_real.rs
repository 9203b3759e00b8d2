//! Collectives on the 8 real DLRM ranks (`../shared/data/kineto/param_dlrm8`), varied as a
//! real job could vary: one rank's clock skewed by milliseconds (the answer must not change),
//! a rank missing (every instance incomplete, nothing guessed), and conservation of kernel
//! time per member and per rank. The counts and last ranks are checked independently by the
//! CLI test's Python script (`crates/strato-cli/tests/cli/collectives.rs`).

use std::path::PathBuf;

use strato_analysis::distributed::collectives::{
    collectives, CollectivesOptions, CollectivesReport,
};
use strato_io::ImportOptions;
use strato_trace::{Ns, RankId, Trace};

fn rank_files() -> Option<Vec<PathBuf>> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/kineto/param_dlrm8");
    if !dir.exists() {
        eprintln!("skipping: shared data not found");
        return None;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    Some(files)
}

fn import(files: &[PathBuf]) -> Trace {
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    strato_io::import_paths(files, &options).expect("import")
}

fn run(trace: &Trace) -> CollectivesReport {
    collectives(trace, &CollectivesOptions::default())
}

#[test]
fn kernel_time_is_conserved_on_the_real_ranks() {
    let Some(files) = rank_files() else { return };
    let report = run(&import(&files));
    assert_eq!(report.instances.len(), 8);
    for inst in &report.instances {
        assert!(inst.complete);
        let last = inst.last_arrival.unwrap();
        for m in &inst.members {
            let wait = m.wait_ns.unwrap();
            assert!(wait >= 0 && wait <= m.end - m.start);
            if inst.clamped_waits == 0 {
                assert_eq!(wait + (m.end - last), m.end - m.start);
            }
        }
    }
    for r in &report.ranks {
        assert_eq!(
            r.wait_ns.unwrap() + r.transfer_part_ns.unwrap(),
            r.kernel_ns
        );
    }
    let waits: Ns = report.ranks.iter().map(|r| r.wait_ns.unwrap()).sum();
    let imposed: Ns = report
        .ranks
        .iter()
        .map(|r| r.imposed_wait_ns.unwrap())
        .sum();
    assert_eq!(waits, imposed);
}

#[test]
fn a_rank_with_a_skewed_clock_gets_the_same_answer() {
    let Some(files) = rank_files() else { return };
    let plain = run(&import(&files));
    for skew in [5_000_000, -37_000_000] {
        let mut trace = import(&files);
        // Rank 3's host reads `skew` ns ahead: every one of its spans moves.
        let rank3: Vec<bool> = trace.tracks.iter().map(|t| t.rank == RankId(3)).collect();
        for s in &mut trace.spans {
            if rank3[s.track.0 as usize] {
                s.start += skew;
                s.end += skew;
            }
        }
        let skewed = run(&trace);
        let clock = &skewed.clock.ranks[3];
        assert!(clock.shifted, "{clock:?}");
        let error = skewed.clock.max_error_ns.unwrap();
        assert!(
            (clock.offset_ns.unwrap() + skew).abs() <= error,
            "{clock:?}"
        );
        for (a, b) in skewed.instances.iter().zip(&plain.instances) {
            assert_eq!(a.last_rank, b.last_rank);
            for (x, y) in a.members.iter().zip(&b.members) {
                assert_eq!(x.rank, y.rank);
                assert!((x.start - y.start).abs() <= error);
            }
        }
        assert_eq!(
            skewed.stragglers.first().map(|s| s.rank),
            plain.stragglers.first().map(|s| s.rank)
        );
    }
}

#[test]
fn a_missing_rank_leaves_every_instance_incomplete() {
    let Some(mut files) = rank_files() else {
        return;
    };
    files.remove(5);
    let report = run(&import(&files));
    assert_eq!(report.instances.len(), 8);
    for inst in &report.instances {
        assert!(!inst.complete);
        assert_eq!((inst.group_size, inst.members.len()), (8, 7));
        assert!(
            inst.last_rank.is_none() && inst.transfer_ns.is_none() && inst.busbw_gbps.is_none()
        );
    }
    assert!(report.stragglers.is_empty() && report.worst_rank.is_none());
}
