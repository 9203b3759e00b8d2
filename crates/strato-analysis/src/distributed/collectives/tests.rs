//! Synthetic jobs whose answer is known by construction: a rank late by design (and why),
//! skewed clocks, a missing peer, matching by (group, seq), and conservation of kernel time.

use super::*;
use strato_trace::testing::{rank as test_rank, TraceBuilder};
use strato_trace::{Level, Ns, RankId, Trace};

const US: Ns = 1_000;

/// One collective of a synthetic job: per rank, (launch start, kernel start, kernel end) on
/// the true clock, before the rank's clock skew is added.
struct Planned {
    kernel: &'static str,
    args: Option<String>,
    per_rank: Vec<(Ns, Ns, Ns)>,
}

/// Builds a job of `ranks.len()` ranks; rank `r`'s clock reads true time + `skew[r]`.
/// `busy` adds, per rank, CPU ops `(name, level, start, end)` on the launching thread and
/// device kernels `(name, start, end)` on the collective's device (true clock).
#[allow(clippy::type_complexity)]
fn job(
    world: Option<i64>,
    ranks: &[i64],
    skew: &[Ns],
    plan: &[Planned],
    cpu_busy: &[(usize, &str, Level, Ns, Ns)],
    device_busy: &[(usize, &str, Ns, Ns)],
) -> Trace {
    let mut b = TraceBuilder::new();
    let mut correlation = 1;
    for (ri, &job_rank) in ranks.iter().enumerate() {
        let mut r = test_rank(Some(job_rank), &format!("rank{job_rank}"));
        r.world_size = world;
        b.rank(r);
        let cpu = b.thread(100 + job_rank, 1);
        let gpu = b.queue(job_rank, 20);
        let compute = b.queue(job_rank, 7);
        let s = skew[ri];
        for &(r, name, level, start, end) in cpu_busy {
            if r == ri {
                b.span(cpu, level, name, start + s, end + s);
            }
        }
        for &(r, name, start, end) in device_busy {
            if r == ri {
                b.span(compute, Level::DeviceKernel, name, start + s, end + s);
            }
        }
        for p in plan {
            let Some(&(launch, start, end)) = p.per_rank.get(ri) else {
                continue;
            };
            b.span(
                cpu,
                Level::Backend,
                "record_param_comms",
                launch - 2 * US + s,
                launch + 3 * US + s,
            );
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                launch + s,
                launch + US + s,
            )
            .correlation(correlation);
            let k = b
                .span(gpu, Level::DeviceKernel, p.kernel, start + s, end + s)
                .correlation(correlation);
            if let Some(a) = &p.args {
                k.args(a);
            }
            correlation += 1;
        }
    }
    b.build()
}

const ALL_REDUCE: &str =
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";
const SEND_RECV: &str =
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)";

/// Three all-reduces on 4 ranks; in the second, rank 2 launches 500 us late because its CPU is
/// in `load_batch` (a data-loading op) until then. Every kernel ends at the same true time.
fn late_rank_job(skew: &[Ns]) -> Trace {
    let mut plan = Vec::new();
    for i in 0..3 {
        let t0 = 1_000 * US * (i + 1);
        let per_rank = (0..4)
            .map(|r| {
                let late = if i == 1 && r == 2 { 500 * US } else { 0 };
                let arrive = t0 + r * 10 * US + late;
                (arrive - 5 * US, arrive, t0 + 800 * US)
            })
            .collect();
        plan.push(Planned {
            kernel: ALL_REDUCE,
            args: Some(
                r#"{"Collective name":"allreduce","In msg nelems":1048576,"Out msg nelems":1048576,"dtype":"Float","Group size":4}"#
                    .into(),
            ),
            per_rank,
        });
    }
    job(
        Some(4),
        &[0, 1, 2, 3],
        skew,
        &plan,
        &[(2, "load_batch", Level::Operation, 1_900 * US, 2_515 * US)],
        &[],
    )
}

#[test]
fn a_rank_late_by_design_is_named_with_what_its_cpu_was_doing() {
    let trace = late_rank_job(&[0, 0, 0, 0]);
    let report = collectives(&trace, &CollectivesOptions::default());
    assert_eq!(report.instances.len(), 3);
    assert!(report
        .instances
        .iter()
        .all(|i| i.complete && i.members.len() == 4));
    let second = &report.instances[1];
    assert_eq!(second.last_rank, Some(RankId(2)));
    // Arrivals: 2000, 2010, 2520, 2030 us: waits to 2520.
    let waits: Vec<Ns> = second.members.iter().map(|m| m.wait_ns.unwrap()).collect();
    assert_eq!(waits, vec![520 * US, 510 * US, 0, 490 * US]);
    assert_eq!(second.transfer_ns, Some((2_800 - 2_520) * US));
    // 4 MiB all-reduce: algbw = bytes / transfer; busbw = algbw x 2(n-1)/n.
    let algbw = 4_194_304.0 / (280.0 * US as f64);
    assert!((second.algbw_gbps.unwrap() - algbw).abs() < 1e-9);
    assert!((second.busbw_gbps.unwrap() - algbw * 1.5).abs() < 1e-9);
    // Rank 3 arrives last in the other two (by 10 us steps).
    let r2 = &report.ranks[2];
    assert_eq!(r2.last_arrivals, 1);
    assert_eq!(r2.imposed_wait_ns, Some((520 + 510 + 490) * US));
    assert_eq!(report.worst_rank, Some(2));
    let worst = &report.stragglers[0];
    assert_eq!((worst.instance, worst.rank), (1, RankId(2)));
    assert_eq!(worst.lateness_ns, 490 * US);
    let cause = &worst.cause;
    assert_eq!(cause.verdict, StragglerVerdict::LateLaunch);
    assert_eq!(cause.cpu_op.as_deref(), Some("load_batch"));
    assert_eq!(cause.cpu_level, Some(Level::Operation));
    assert_eq!(cause.launch_delay_ns, Some(515 * US));
    assert_eq!(cause.device_busy_ns, 0);
    assert!(!report.clock.aligned);
}

#[test]
fn kernel_time_is_conserved_per_member_and_per_rank() {
    let trace = late_rank_job(&[0, 0, 0, 0]);
    let report = collectives(&trace, &CollectivesOptions::default());
    for inst in &report.instances {
        for m in &inst.members {
            let wait = m.wait_ns.unwrap();
            let after = m.end - inst.last_arrival.unwrap();
            assert_eq!(wait + after, m.end - m.start);
        }
    }
    for r in &report.ranks {
        assert_eq!(
            r.wait_ns.unwrap() + r.transfer_part_ns.unwrap(),
            r.kernel_ns
        );
    }
    let (w0, w1) = report.window.unwrap();
    assert_eq!((w0, w1), (1_000 * US, 3_800 * US));
}

#[test]
fn skewed_clocks_are_aligned_from_the_symmetric_collectives() {
    // Rank 1 reads 7 ms ahead, rank 3 3 ms behind: the answer must not change.
    let skewed = late_rank_job(&[0, 7_000 * US, 0, -3_000 * US]);
    let plain = late_rank_job(&[0, 0, 0, 0]);
    let a = collectives(&skewed, &CollectivesOptions::default());
    let b = collectives(&plain, &CollectivesOptions::default());
    assert!(a.clock.aligned);
    assert_eq!(a.clock.ranks[1].offset_ns, Some(-7_000 * US));
    assert_eq!(a.clock.ranks[3].offset_ns, Some(3_000 * US));
    assert!(a.clock.ranks[1].shifted && a.clock.ranks[3].shifted);
    assert!(!a.clock.ranks[2].shifted);
    for (x, y) in a.instances.iter().zip(&b.instances) {
        assert_eq!(x.last_rank, y.last_rank);
        let wx: Vec<_> = x.members.iter().map(|m| (m.start, m.wait_ns)).collect();
        let wy: Vec<_> = y.members.iter().map(|m| (m.start, m.wait_ns)).collect();
        assert_eq!(wx, wy);
    }
    // The cause is looked up on the late rank's own clock.
    assert_eq!(a.stragglers[0].cause.cpu_op.as_deref(), Some("load_batch"));
    // Without alignment rank 1 would look 7 ms late in every instance.
    assert_eq!(a.ranks[1].last_arrivals, 0);
}

#[test]
fn send_recv_alone_leaves_clocks_alone_and_sizes_unknown() {
    let plan = vec![Planned {
        kernel: SEND_RECV,
        args: None,
        per_rank: vec![(0, 10 * US, 50 * US), (0, 30 * US, 50 * US)],
    }];
    let trace = job(Some(2), &[0, 1], &[0, 5_000 * US], &plan, &[], &[]);
    let report = collectives(&trace, &CollectivesOptions::default());
    assert!(!report.clock.aligned);
    assert_eq!(report.clock.max_error_ns, None);
    assert!(report.clock.note.contains("no symmetric collective"));
    let inst = &report.instances[0];
    assert_eq!(inst.kind, CollectiveKind::SendRecv);
    assert_eq!(
        (inst.bytes, inst.algbw_gbps, inst.busbw_gbps),
        (None, None, None)
    );
    assert!(inst.complete);
}

#[test]
fn a_missing_peer_makes_instances_incomplete_not_dropped() {
    // World of 4, ranks 0, 1 and 3 in the input.
    let plan: Vec<Planned> = (0..2)
        .map(|i| Planned {
            kernel: ALL_REDUCE,
            args: None,
            per_rank: (0..3)
                .map(|r| {
                    let t = 100 * US * (i + 1) + r * US;
                    (t - US, t, 100 * US * (i + 1) + 60 * US)
                })
                .collect(),
        })
        .collect();
    let trace = job(Some(4), &[0, 1, 3], &[0, 0, 0], &plan, &[], &[]);
    let report = collectives(&trace, &CollectivesOptions::default());
    assert_eq!(report.instances.len(), 2);
    for inst in &report.instances {
        assert!(!inst.complete);
        assert_eq!(inst.group_size, 4);
        assert_eq!(inst.members.len(), 3);
        assert_eq!((inst.last_rank, inst.transfer_ns), (None, None));
        assert!(inst.members.iter().all(|m| m.wait_ns.is_none()));
    }
    assert!(report
        .ranks
        .iter()
        .all(|r| r.wait_ns.is_none() && r.imposed_wait_ns.is_none()));
    assert!(report.stragglers.is_empty());
}

#[test]
fn group_and_seq_match_calls_issued_in_different_orders() {
    // Two groups; rank 1 issues group "b" first. Order-based matching would pair them wrong.
    let args = |g: &str, seq: i64| {
        Some(format!(
            r#"{{"Collective name":"allreduce","Process Group Name":"{g}","Process Group Ranks":"[0, 1]","Seq":{seq},"In msg nelems":256,"dtype":"BFloat16"}}"#
        ))
    };
    let plan = vec![
        Planned {
            kernel: ALL_REDUCE,
            args: args("a", 7),
            per_rank: vec![(0, 10 * US, 40 * US), (0, 60 * US, 90 * US)],
        },
        Planned {
            kernel: ALL_REDUCE,
            args: args("b", 3),
            per_rank: vec![(0, 50 * US, 90 * US), (0, 20 * US, 40 * US)],
        },
    ];
    let trace = job(None, &[0, 1], &[0, 0], &plan, &[], &[]);
    let report = collectives(&trace, &CollectivesOptions::default());
    assert_eq!(report.instances.len(), 2);
    for inst in &report.instances {
        assert_eq!(inst.matched_by, MatchBy::GroupSeq);
        assert!(inst.complete);
        assert_eq!(inst.bytes, Some(512));
        let expected = match inst.group.as_deref() {
            Some("a") => (7, RankId(1)),
            Some("b") => (3, RankId(0)),
            g => panic!("group {g:?}"),
        };
        assert_eq!((inst.seq.unwrap(), inst.last_rank.unwrap()), expected);
    }
}

#[test]
fn a_rank_queued_behind_its_own_kernels_is_device_busy() {
    // Rank 1 launches in time but its device runs `big_gemm` until 400 us.
    let plan = vec![Planned {
        kernel: ALL_REDUCE,
        args: None,
        per_rank: vec![(90 * US, 100 * US, 500 * US), (50 * US, 400 * US, 500 * US)],
    }];
    let trace = job(
        Some(2),
        &[0, 1],
        &[0, 0],
        &plan,
        &[],
        &[(1, "big_gemm", 0, 400 * US)],
    );
    let report = collectives(&trace, &CollectivesOptions::default());
    let s = &report.stragglers[0];
    assert_eq!(s.rank, RankId(1));
    assert_eq!(s.cause.verdict, StragglerVerdict::DeviceBusy);
    assert_eq!(s.cause.device_op.as_deref(), Some("big_gemm"));
    assert_eq!(s.cause.device_busy_ns, 300 * US);
    assert_eq!(s.imposed_wait_ns, 300 * US);
}

#[test]
fn names_say_their_kind() {
    use CollectiveKind::*;
    for (name, kind) in [
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)",
            Some(AllReduce),
        ),
        (
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
            Some(ReduceScatter),
        ),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", Some(SendRecv)),
        ("nccl:all_to_all", Some(AllToAll)),
        ("_allgather_base", Some(AllGather)),
        ("broadcast", Some(Broadcast)),
        ("ncclDevKernel_Generic", None),
        ("c10d::barrier", None),
    ] {
        assert_eq!(CollectiveKind::from_name(name), kind, "{name}");
    }
    assert!(is_collective_kernel("ncclDevKernel_Generic"));
    assert!(!is_collective_kernel("volta_sgemm_128x64_nn"));
    // Any case of the prefix, the HTA substring anywhere, nothing shorter than the prefix.
    for name in ["NCCL_x", "Rccl", "rcclKernel", "void ncclKernel_AllReduce"] {
        assert!(is_collective_kernel(name), "{name}");
    }
    for name in [
        "ncc",
        "",
        "nc\u{e9}l",
        "xnccl",
        "ncclkernel_lower_is_not_the_substring",
    ] {
        assert_eq!(
            is_collective_kernel(name),
            name.starts_with("nccl"),
            "{name}"
        );
    }
    assert_eq!(AllReduce.busbw_factor(8), Some(1.75));
    assert_eq!(AllGather.busbw_factor(8), Some(0.875));
    assert_eq!(dtype_size("c10::BFloat16"), Some(2));
    assert_eq!(dtype_size("long int"), Some(8));
    assert_eq!(dtype_size("mystery"), None);
}

#[test]
fn ranks_reporting_different_sizes_for_one_collective_are_said_to_disagree() {
    // Two ranks, two all-reduces; in the second, rank 1 says twice rank 0's elements.
    let mut b = TraceBuilder::new();
    for (job_rank, second) in [(0_i64, 1_048_576_u64), (1, 2_097_152)] {
        let mut r = test_rank(Some(job_rank), &format!("rank{job_rank}"));
        r.world_size = Some(2);
        b.rank(r);
        let gpu = b.queue(job_rank, 20);
        for (i, nelems) in [(0_i64, 1_048_576_u64), (1, second)] {
            let start = 100 * US * (i + 1);
            b.span(gpu, Level::DeviceKernel, ALL_REDUCE, start, start + 50 * US)
                .args(&format!(
                    r#"{{"Collective name":"allreduce","In msg nelems":{nelems},"dtype":"Float","Group size":2}}"#
                ));
        }
    }
    let report = collectives(&b.build(), &CollectivesOptions::default());
    assert_eq!(report.instances.len(), 2);
    assert_eq!(report.instances[0].bytes_disagree, None);
    assert_eq!(report.instances[0].bytes, Some(4 * 1_048_576));
    assert_eq!(
        report.instances[1].bytes_disagree,
        Some((4 * 1_048_576, 4 * 2_097_152))
    );
}
