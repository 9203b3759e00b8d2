//! The replay's tests: answers known by construction, and real traces.

use super::*;
use strato_trace::testing::TraceBuilder;
use strato_trace::OptionalId;

/// One step whose answer is known by construction: `fwd` launches `gemm` (launch-bound,
/// 40 ns after its call) and `relu` (bound by its stream, 5 ns after `gemm`), the thread
/// then waits in `cudaStreamSynchronize` for `relu` (returning 45 ns after it) and runs
/// `opt` after a 10 ns untraced gap.
fn step() -> Trace {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1000);
    b.span(cpu, Level::Backend, "fwd", 0, 100);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
        .correlation(1);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 30, 40)
        .correlation(2);
    b.span(gpu, Level::DeviceKernel, "gemm", 50, 350)
        .correlation(1);
    b.span(gpu, Level::DeviceKernel, "relu", 355, 655)
        .correlation(2);
    b.span(
        cpu,
        Level::AcceleratorApi,
        "cudaStreamSynchronize",
        100,
        700,
    )
    .correlation(3);
    b.span(gpu, Level::DeviceSync, "Stream Sync", 600, 655)
        .correlation(3);
    b.span(cpu, Level::Backend, "opt", 710, 800);
    b.build()
}

fn run(trace: &Trace, changes: &[&str]) -> ReplayReport {
    let changes: Vec<Scale> = changes.iter().map(|c| Scale::parse(c).unwrap()).collect();
    run_changes(trace, &changes)
}

/// Every step of `trace` replayed and predicted with `changes`.
fn run_changes(trace: &Trace, changes: &[Scale]) -> ReplayReport {
    replay(
        trace,
        &CriticalPathOptions::default(),
        ReplayWindows::Steps(None),
        changes,
    )
    .unwrap()
}

/// `trace` replayed without a change (asserting the `simulated` time it gives back), then
/// predicted with `change` (asserting the `matched` ops it selects).
fn replayed_then(trace: &Trace, simulated: Ns, change: Scale, matched: usize) -> ReplayReport {
    assert_eq!(run(trace, &[]).replay[0].simulated_ns, simulated);
    let report = run_changes(trace, &[change]);
    assert_eq!(report.changes[0].matched_ops, matched);
    report
}

fn conserves(w: &PredictedWindow) {
    let kinds: Ns = w.path.by_kind.values().sum();
    assert_eq!(kinds + w.path.before_path_ns, w.predicted_ns, "{w:?}");
}

#[test]
fn the_traced_durations_give_back_the_trace() {
    let report = run(&step(), &[]);
    assert_eq!(report.replay.len(), 1);
    let w = &report.replay[0];
    assert_eq!((w.start_ns, w.measured_ns, w.simulated_ns), (0, 800, 800));
    assert_eq!(w.error_pct, 0.0);
    // Without changes the prediction is the replay.
    assert_eq!(report.predicted.len(), 1);
    assert_eq!(
        (
            report.predicted[0].predicted_ns,
            report.predicted[0].gain_ns
        ),
        (800, 0)
    );
    assert_eq!(report.predicted[0].path, w.path);
}

#[test]
fn a_faster_kernel_moves_what_waits_for_it() {
    // gemm 300 -> 150 ns: relu follows it 5 ns later (its launch, 40 ns after its call,
    // no longer binds), the sync returns 45 ns after relu, opt 10 ns later.
    let report = run(&step(), &["kernel:gemm=0.5"]);
    assert_eq!(report.changes[0].matched_ops, 1);
    let w = &report.predicted[0];
    assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (800, 650, 150));
    conserves(w);
    assert_eq!(w.path.before_path_ns, 0);
    let by = |k: &str| w.path.by_kind[k];
    assert_eq!(
        (by("cpu_op"), by("launch"), by("kernel"), by("idle")),
        (100, 40, 450, 5)
    );
    assert_eq!((by("sync_wait"), by("untraced")), (45, 10));
    // relu's time on the path: it ran 300 ns after waiting 5 ns for its stream.
    let bottleneck = w.path.bottleneck.as_ref().unwrap();
    assert_eq!(
        (bottleneck.name.as_str(), bottleneck.kind, bottleneck.ns),
        ("relu", "kernel", 305)
    );
}

#[test]
fn ops_select_the_kernels_they_launch_and_cpu_ops_their_own_time() {
    let under_fwd = run(&step(), &["op:fwd=0.5"]);
    assert_eq!(under_fwd.changes[0].matched_ops, 2);
    assert_eq!(under_fwd.predicted[0].predicted_ns, 500);
    let opt = run(&step(), &["cpu:opt=0.5"]);
    assert_eq!(opt.changes[0].matched_ops, 1);
    assert_eq!(opt.predicted[0].predicted_ns, 755);
    // Changes compose: gemm gone and opt halved.
    let both = run(&step(), &["kernel:gemm=0", "cpu:opt=0.5"]);
    let w = &both.predicted[0];
    conserves(w);
    // relu starts at max(call 30 + 40, gemm's end 50 + 5) = 70, ends 370; the sync
    // returns at 415, opt runs 425..470.
    assert_eq!(w.predicted_ns, 470);
    // A change that selects nothing changes nothing.
    let none = run(&step(), &["kernel:conv=0.1"]);
    assert_eq!(none.changes[0].matched_ops, 0);
    assert_eq!(none.predicted[0].gain_ns, 0);
}

/// Twice the link bandwidth: the all-reduce's transfer (410..700 on both ranks, after rank
/// 1 arrives) takes 145 ns instead of 290, both ranks end at 555; the wait is unchanged.
#[test]
fn faster_links_shorten_the_collectives_transfer_not_the_wait() {
    let (trace, options) = late_peer();
    let change = Scale::link_bandwidth(2.0).unwrap();
    assert_eq!(change.text, "link-bw=2");
    let r = replay(&trace, &options, ReplayWindows::Steps(None), &[change]).unwrap();
    assert_eq!(r.changes[0].matched_ops, 2);
    let got: Vec<(i64, Ns, Ns)> = (r.predicted.iter())
        .map(|w| (w.rank, w.baseline_ns, w.predicted_ns))
        .collect();
    assert_eq!(got, [(0, 700, 555), (1, 700, 555)]);
    r.predicted.iter().for_each(conserves);
    // Rank 0 still waits 300 ns for rank 1.
    let waited: Ns = (r.predicted[0].path.peer_waits.iter())
        .map(|p| p.waited_ns)
        .sum();
    assert_eq!(waited, 300);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(Scale::link_bandwidth(bad).is_err(), "{bad}");
    }
}

/// One stream shared by compute and communication, every launch early: gemm1 (300 ns),
/// an all-reduce (200), gemm2 (300), a second all-reduce (500), back to back (1300 ns).
fn shared_stream() -> Trace {
    one_stream(&[
        (Level::DeviceKernel, "gemm1", 50, 350),
        (Level::DeviceKernel, "ncclKernel_AllReduce", 350, 550),
        (Level::DeviceKernel, "gemm2", 550, 850),
        (Level::DeviceKernel, "ncclKernel_AllReduce", 850, 1350),
    ])
}

/// One step (0..1500) whose device ops `ops` run on one stream, the i-th launched at
/// 10 x i (`cudaLaunchKernel`, or `cudaMemcpyAsync` for a copy; 10 ns each).
fn one_stream(ops: &[(Level, &str, Ns, Ns)]) -> Trace {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1500);
    for (i, &(level, name, start, end)) in ops.iter().enumerate() {
        let (c, at) = (i as u64 + 1, 10 * (i as Ns + 1));
        let call = if level == Level::DeviceCopy {
            "cudaMemcpyAsync"
        } else {
            "cudaLaunchKernel"
        };
        b.span(cpu, Level::AcceleratorApi, call, at, at + 10)
            .correlation(c);
        b.span(gpu, level, name, start, end).correlation(c);
    }
    b.build()
}

#[test]
fn overlapped_communication_leaves_compute_and_keeps_its_own_order() {
    let report = replayed_then(&shared_stream(), 1350, Scale::overlap_comm(), 2);
    // gemm1 and gemm2 back to back (50..650); the first all-reduce starts at its launch
    // (with the typical 40 ns delay: 20 + 40 = 60, 60..260), the second behind it
    // (260..760, not at its own launch, 80), which ends the step.
    let w = &report.predicted[0];
    assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (1350, 760, 590));
    conserves(w);
    let by = |k: &str| w.path.by_kind[k];
    assert_eq!((by("kernel"), by("idle")), (700, 0));
    assert_eq!(
        w.path.bottleneck.as_ref().map(|b| (b.name.as_str(), b.ns)),
        Some(("ncclKernel_AllReduce", 500))
    );
    // Compute alone changes nothing.
    let report = run(&shared_stream(), &["kernel:gemm=1"]);
    assert_eq!(report.predicted[0].predicted_ns, 1350);
}

/// One stream shared by compute and copies, every launch early: gemm1 (300 ns), a
/// host-to-device copy (200), gemm2 (300), a device-to-host copy (500), gemm3 (100), back
/// to back (50..1450).
fn copies_on_the_compute_stream() -> Trace {
    one_stream(&[
        (Level::DeviceKernel, "gemm1", 50, 350),
        (
            Level::DeviceCopy,
            "Memcpy HtoD (Pinned -> Device)",
            350,
            550,
        ),
        (Level::DeviceKernel, "gemm2", 550, 850),
        (
            Level::DeviceCopy,
            "Memcpy DtoH (Device -> Pinned)",
            850,
            1350,
        ),
        (Level::DeviceKernel, "gemm3", 1350, 1450),
    ])
}

#[test]
fn overlapped_copies_leave_compute_and_keep_their_data() {
    let report = replayed_then(
        &copies_on_the_compute_stream(),
        1450,
        Scale::overlap_copies(),
        2,
    );
    // The host-to-device copy starts at its launch (20, with the typical 40 ns delay:
    // 60..260) and gemm2 no longer waits for it: it follows gemm1 (350..650). The
    // device-to-host copy still waits for gemm2, whose result it copies (650..1150), and
    // gemm3 no longer waits for it (650..750): the copy ends the step.
    let w = &report.predicted[0];
    assert_eq!(
        (w.baseline_ns, w.predicted_ns, w.gain_ns),
        (1450, 1150, 300)
    );
    conserves(w);
    assert_eq!(
        w.path.bottleneck.as_ref().map(|b| (b.name.as_str(), b.ns)),
        Some(("Memcpy DtoH (Device -> Pinned)", 500))
    );
    // A trace without such copies: nothing matched, and the change says why.
    let report = run_changes(&shared_stream(), &[Scale::overlap_copies()]);
    assert_eq!(report.changes[0].matched_ops, 0);
    assert!(report.changes[0]
        .note
        .as_deref()
        .is_some_and(|n| n.contains("no host-to-device copy")));
    assert_eq!(report.predicted[0].gain_ns, 0);
}

#[test]
fn overlapped_communication_stops_waiting_for_compute_across_streams() {
    // The all-reduce's stream waits for an event recorded after k1 on the compute
    // stream; the thread then waits for the device.
    let trace = super::super::tests::event_wait_trace(
        (Level::Operation, "ProfilerStep#1", 1000),
        "ncclKernel_AllReduce",
    );
    let report = run_changes(&trace, &[Scale::overlap_comm()]);
    assert_eq!(report.changes[0].matched_ops, 1);
    // The all-reduce runs at its launch (26 + 20: k1's launch delay, the typical one),
    // 46..136, beside k1; the synchronisation now returns after k1 (500), with the
    // typical synchronisation delay (50 ns, the all-reduce's end to the call's end).
    let w = &report.predicted[0];
    assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (650, 550, 100));
    conserves(w);
    assert_eq!(w.path.bottleneck.as_ref().unwrap().name, "k1");
}

/// A forward whose three short kernels (10 ns each) wait for the host: each launched
/// 400 ns after the one before (framework work between launches), 50 ns after its call,
/// the last 250 ns after (a launch queue that filled). The step ends with the last kernel,
/// at 1160 ns.
fn host_bound() -> Trace {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 2000);
    b.span(cpu, Level::Backend, "fwd", 0, 1000);
    for (i, (at, delay)) in [(100, 50), (500, 50), (900, 250)].into_iter().enumerate() {
        let c = i as u64 + 1;
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", at, at + 10)
            .correlation(c);
        b.span(gpu, Level::DeviceKernel, "k", at + delay, at + delay + 10)
            .correlation(c);
    }
    b.build()
}

#[test]
fn a_graph_launch_takes_the_regions_host_work_off_its_kernels() {
    let run_with = |change: Scale| run_changes(&host_bound(), &[change]);
    for change in [Scale::graph_launch("fwd"), Scale::graph_launch("")] {
        let report = run_with(change.clone());
        assert_eq!(report.changes[0].matched_ops, 3, "{change:?}");
        // fwd costs nothing, and its kernels are submitted at its start: each after the
        // typical launch delay (50 ns, not the last one's 250), back to back, 50..80.
        let w = &report.predicted[0];
        assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (1160, 80, 1080));
        conserves(w);
        let by = |k: &str| w.path.by_kind[k];
        assert_eq!((by("kernel"), by("launch"), by("cpu_op")), (30, 50, 0));
        assert_eq!(w.path.before_path_ns, 0);
    }
    // A region the trace does not have changes nothing.
    let report = run_with(Scale::graph_launch("bwd"));
    assert_eq!(report.changes[0].matched_ops, 0);
    assert_eq!(report.predicted[0].predicted_ns, 1160);
}

/// `step()` with two module calls on the CPU thread (Python-level spans, not graph ops):
/// `Attn` around gemm's launch only, `Block` around both launches.
fn step_with_modules() -> Trace {
    let mut t = step();
    let cpu = t.spans[1].track;
    for (name, start, end) in [("nn.Module: Block_0", 2, 95), ("nn.Module: Attn_0", 5, 25)] {
        let name = t.strings.intern(name);
        let category = t.strings.intern("python_function");
        t.spans.push(strato_trace::Span {
            track: cpu,
            start,
            end,
            name,
            category,
            level: Level::Python,
            correlation: OptionalId::NONE,
            external_id: OptionalId::NONE,
            args: None,
        });
    }
    t
}

#[test]
fn modules_select_the_kernels_launched_inside_their_calls() {
    let t = step_with_modules();
    // Attn launched gemm only: as gemm's own change (800 -> 650).
    let attn = run(&t, &["module:Attn=0.5"]);
    assert_eq!(attn.changes[0].matched_ops, 1);
    let by_kernel = run(&t, &["kernel:gemm=0.5"]);
    assert_eq!(attn.predicted[0].predicted_ns, 650);
    assert_eq!(attn.predicted[0].path, by_kernel.predicted[0].path);
    conserves(&attn.predicted[0]);
    // Block launched both, as fwd did (the enclosing call's change reaches the inner one's
    // launches too).
    let block = run(&t, &["module:Block=0.5"]);
    assert_eq!(block.changes[0].matched_ops, 2);
    assert_eq!(block.predicted[0].predicted_ns, 500);
    // Nested selected calls: each launch is counted once per change.
    let both = run(&t, &["module:Block=1", "module:Attn=0.5"]);
    assert_eq!(
        (both.changes[0].matched_ops, both.changes[1].matched_ops),
        (2, 1)
    );
    assert_eq!(both.predicted[0].predicted_ns, 650);
    // A class with no call, and the instance's full name, select nothing.
    for change in ["module:Mlp=0.5", "module:Attn_0=0.5"] {
        let none = run(&t, &[change]);
        assert_eq!(none.changes[0].matched_ops, 0, "{change}");
        assert_eq!(none.predicted[0].gain_ns, 0, "{change}");
    }
    // Without a module change nothing of them is read, and the CPU ops are unchanged.
    assert_eq!(run(&t, &["cpu:opt=0.5"]).predicted[0].predicted_ns, 755);
}

#[test]
fn a_removed_synchronisation_lets_the_host_run_ahead() {
    // Without its wait the sync costs its 45 ns return (the median binding sync latency),
    // opt runs 155..245, and the step ends when relu does (655).
    let trace = step();
    let changes = [Scale::no_sync("")];
    let report = replay(
        &trace,
        &CriticalPathOptions::default(),
        ReplayWindows::Steps(None),
        &changes,
    )
    .unwrap();
    assert_eq!(report.changes[0].matched_ops, 1);
    let w = &report.predicted[0];
    conserves(w);
    assert_eq!((w.predicted_ns, w.gain_ns), (655, 145));
    // Only the synchronisations under an op: none is under fwd.
    let under_fwd = replay(
        &trace,
        &CriticalPathOptions::default(),
        ReplayWindows::Steps(None),
        &[Scale::no_sync("fwd")],
    )
    .unwrap();
    assert_eq!(under_fwd.changes[0].matched_ops, 0);
    assert_eq!(under_fwd.predicted[0].gain_ns, 0);
}

/// Three steps known by construction, each `prepare` (100 ns), a launch whose kernel runs
/// 300 ns from 40 ns after the call's start, and a `cudaStreamSynchronize` that returns
/// 10 ns after the kernel; the next step starts 10 ns (untraced) after that.
fn synced_steps() -> Trace {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    for k in 0..3i64 {
        let at = 460 * k;
        let (launch, sync) = (2 * k as u64 + 1, 2 * k as u64 + 2);
        b.span(
            cpu,
            Level::Operation,
            &format!("ProfilerStep#{}", k + 1),
            at,
            at + 460,
        );
        b.span(cpu, Level::Backend, "prepare", at, at + 100);
        b.span(
            cpu,
            Level::AcceleratorApi,
            "cudaLaunchKernel",
            at + 100,
            at + 110,
        )
        .correlation(launch);
        b.span(gpu, Level::DeviceKernel, "gemm", at + 140, at + 440)
            .correlation(launch);
        b.span(
            cpu,
            Level::AcceleratorApi,
            "cudaStreamSynchronize",
            at + 110,
            at + 450,
        )
        .correlation(sync);
        b.span(gpu, Level::DeviceSync, "Stream Sync", at + 430, at + 440)
            .correlation(sync);
    }
    b.build()
}

fn across(trace: &Trace, only: Option<u64>, changes: &[Scale]) -> ReplayReport {
    replay(
        trace,
        &CriticalPathOptions::default(),
        ReplayWindows::Across(only),
        changes,
    )
    .unwrap()
}

#[test]
fn steps_read_across_the_whole_trace_give_it_back_and_add_up() {
    let report = across(&synced_steps(), None, &[]);
    let got: Vec<(String, Ns, Ns)> = (report.replay.iter())
        .map(|w| (w.step.clone(), w.measured_ns, w.simulated_ns))
        .collect();
    // Step 1 from its start to its sync's return (450); each next one from the previous
    // end to its own (460): they add up to the first start to the last end (1370).
    assert_eq!(
        got,
        [
            ("ProfilerStep#1".to_owned(), 450, 450),
            ("ProfilerStep#2".to_owned(), 460, 460),
            ("ProfilerStep#3".to_owned(), 460, 460),
        ]
    );
    assert!(report.replay.iter().all(|w| w.error_pct == 0.0));
    for w in &report.predicted {
        conserves(w);
    }
    // One step asked: its row alone, the same figures.
    let only = across(&synced_steps(), Some(2), &[]);
    assert_eq!(only.replay.len(), 1);
    assert_eq!(
        (only.replay[0].number, only.replay[0].measured_ns),
        (2, 460)
    );
}

#[test]
fn a_removed_step_end_sync_carries_into_the_next_steps() {
    // Without their waits the syncs cost their 10 ns return: the host runs a step every
    // 130 ns (prepare, launch, sync, the untraced 10 ns) while each kernel waits for the
    // previous one (a stream gap that never bound costs nothing). Kernels: 140..440,
    // 440..740, 740..1040. Steps, end to end: 440, 300, 300 (the device's pace).
    let trace = synced_steps();
    let report = across(&trace, None, &[Scale::no_sync("")]);
    assert_eq!(report.changes[0].matched_ops, 3);
    let got: Vec<(Ns, Ns)> = (report.predicted.iter())
        .map(|w| (w.baseline_ns, w.predicted_ns))
        .collect();
    assert_eq!(got, [(450, 440), (460, 300), (460, 300)]);
    for w in &report.predicted {
        conserves(w);
    }
    // What the later steps waited on: the kernels, back to back.
    assert_eq!(report.predicted[2].path.by_kind["kernel"], 300);
    // Step by step, each graph alone, the host's head start is lost at each step's end:
    // every step ends with its kernel, 10 ns earlier.
    let alone = run_changes(&trace, &[Scale::no_sync("")]);
    let got: Vec<Ns> = alone.predicted.iter().map(|w| w.predicted_ns).collect();
    assert_eq!(got, [440, 440, 440]);
}

#[test]
fn changes_are_parsed_with_their_errors_named() {
    let scale = Scale::parse("op:aten::mm=0.5").unwrap();
    assert_eq!(scale.selector, Selector::Op("aten::mm".into()));
    assert_eq!(scale.factor, 0.5);
    let module = Scale::parse("module:Qwen2Attention=0.67").unwrap();
    assert_eq!(module.selector, Selector::Module("Qwen2Attention".into()));
    for (bad, says) in [
        ("gemm=0.5", "not KIND:NAME=FACTOR"),
        ("kernel:gemm", "not KIND:NAME=FACTOR"),
        ("kernel:gemm=-1", "finite number >= 0"),
        ("kernel:gemm=inf", "finite number >= 0"),
        ("layer:Attention=0.5", "no selector kind \"layer\""),
        ("category:tensor=0.5", "no category \"tensor\""),
        ("kernel:=0.5", "no name after kernel:"),
    ] {
        let err = Scale::parse(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

/// The names of the events on the critical path of the first step's first rank.
fn first_step_path(trace: &Trace) -> Vec<String> {
    let steps =
        super::super::critical_path_steps(trace, &CriticalPathOptions::default(), None).unwrap();
    (steps[0].ranks[0].path.events.iter())
        .map(|e| e.name.to_string())
        .collect()
}

/// A training step on two threads, known by construction: the main thread's forward
/// (`fwd`, 0..100) hands off to the autograd thread's backward (150..400), whose end
/// releases the main thread's optimizer (`opt`, 450..500); the main thread's 100..450 is an
/// untraced gap.
fn two_threads() -> Trace {
    let mut b = TraceBuilder::new();
    let main = b.thread(1, 1);
    let autograd = b.thread(1, 2);
    b.span(main, Level::Operation, "ProfilerStep#1", 0, 500);
    b.span(main, Level::Backend, "fwd", 0, 100);
    b.span(
        autograd,
        Level::Backend,
        "autograd::engine::evaluate_function: MulBackward0",
        150,
        400,
    );
    b.span(main, Level::Backend, "opt", 450, 500);
    b.build()
}

#[test]
fn the_backward_thread_is_linked_to_the_main_thread() {
    let trace = two_threads();
    // The critical path runs through both threads.
    let names = first_step_path(&trace);
    assert_eq!(
        names,
        [
            "fwd",
            "autograd::engine::evaluate_function: MulBackward0",
            "opt"
        ]
    );
    // A backward twice as fast moves the optimizer 125 ns earlier: the hand-off and the
    // return keep their 50 ns, the main thread's gap was waiting, not work.
    let report = run(
        &trace,
        &["cpu:autograd::engine::evaluate_function: MulBackward0=0.5"],
    );
    let w = &report.predicted[0];
    conserves(w);
    assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (500, 375, 125));
    assert_eq!(w.path.by_kind["sync_wait"], 100);
    assert_eq!(w.path.by_kind["cpu_op"], 100 + 125 + 50);
    // A faster forward moves everything after it.
    let fwd = run(&trace, &["cpu:fwd=0.5"]);
    assert_eq!(fwd.predicted[0].predicted_ns, 450);
}

/// A step of a recorded Python program (operations only, no framework op), known by
/// construction: the main thread's `act` (0..100) hands one `env_step` to each of two
/// worker threads (`env-0` 110..410, `env-1` 115..715: the slow one) and waits in an
/// untraced gap; `learn` (720..820) runs when both are back.
fn worker_pool(with_backend_op: bool) -> Trace {
    worker_pool_and(with_backend_op, |_, _| {})
}

/// [`worker_pool`] with what `more` adds (given the builder and the main thread).
fn worker_pool_and(
    with_backend_op: bool,
    more: impl FnOnce(&mut TraceBuilder, strato_trace::TrackId),
) -> Trace {
    let mut b = TraceBuilder::new();
    let main = b.thread(1, 1);
    let env0 = b.thread(1, 2);
    let env1 = b.thread(1, 3);
    b.trace_mut().tracks[env0.0 as usize].name = Some("env-0".into());
    b.trace_mut().tracks[env1.0 as usize].name = Some("env-1".into());
    b.span(main, Level::Operation, "ProfilerStep#1", 0, 820);
    b.span(main, Level::Operation, "act", 0, 100);
    b.span(env0, Level::Operation, "env_step", 110, 410);
    b.span(env1, Level::Operation, "env_step", 115, 715);
    b.span(main, Level::Operation, "learn", 720, 820);
    if with_backend_op {
        // A framework op anywhere on the rank: its CPU work is read at the framework's
        // levels, as in a Kineto trace (operations are annotations there).
        b.span(main, Level::Backend, "aten::add", 900, 910);
    }
    more(&mut b, main);
    b.build()
}

#[test]
fn a_recorded_python_program_replays_its_operations_across_its_threads() {
    let trace = worker_pool(false);
    let report = run(&trace, &[]);
    assert_eq!(report.replay.len(), 1);
    let w = &report.replay[0];
    assert_eq!((w.measured_ns, w.simulated_ns), (820, 820));
    // The critical path runs act -> the slow worker's env_step -> learn.
    let names = first_step_path(&trace);
    assert_eq!(names, ["act", "env_step", "learn"]);
    // The slow worker as fast as the other (`thread:env-1=0.5`): its env_step takes 300
    // ns and ends at 415; learn starts when both workers are back: env-1's return keeps
    // its 5 ns, env-0's the typical hand-off latency (the median of the binding ones:
    // 10, 15 and 5 ns): 420. The main thread's gap was waiting, not work.
    let even = run(&trace, &["thread:env-1=0.5"]);
    assert_eq!(even.changes[0].matched_ops, 1);
    let p = &even.predicted[0];
    conserves(p);
    assert_eq!((p.baseline_ns, p.predicted_ns, p.gain_ns), (820, 520, 300));
    // An operation made faster: act at half its time moves everything after it.
    let act = run(&trace, &["cpu:act=0.5"]);
    assert_eq!(act.predicted[0].predicted_ns, 770);
    // The fast worker made faster buys nothing: the slow one binds.
    let fast = run(&trace, &["thread:env-0=0.5"]);
    assert_eq!(fast.predicted[0].gain_ns, 0);
    // A thread name nobody has selects nothing.
    assert_eq!(run(&trace, &["thread:env-9=0.5"]).changes[0].matched_ops, 0);
    // With a framework op on the rank, operations are annotations: not in the graph ...
    let mut trace = worker_pool(true);
    let framework = run(&trace, &["cpu:act=0.5"]);
    assert_eq!(framework.changes[0].matched_ops, 0);
    // ... unless the rank is a stratoscope recording, whose operations are the program's
    // own work (a native call inside one is one of its CPU ops): the same answers.
    trace.ranks[0].format = strato_trace::SourceFormat::Strato;
    let recorded = run(&trace, &["thread:env-1=0.5"]);
    assert_eq!(recorded.predicted[0].gain_ns, 300);
    assert_eq!(run(&trace, &["cpu:act=0.5"]).changes[0].matched_ops, 1);
}

/// [`worker_pool`] with the main thread's hand-off and wait inside an operation of its own
/// (`with operation("rollout"): pool.map(env_step, envs)`): `rollout` 100..720 holds no
/// child, or (`with_child`) a `prepare` at 100..105 before the hand-off.
fn worker_pool_inside_an_op(with_child: bool) -> Trace {
    worker_pool_and(false, |b, main| {
        b.span(main, Level::Operation, "rollout", 100, 720);
        if with_child {
            b.span(main, Level::Operation, "prepare", 100, 105);
        }
    })
}

#[test]
fn a_main_thread_that_waits_inside_its_op_hands_off_to_its_workers() {
    for with_child in [false, true] {
        let trace = worker_pool_inside_an_op(with_child);
        let report = run(&trace, &[]);
        let w = &report.replay[0];
        assert_eq!((w.measured_ns, w.simulated_ns), (820, 820));
        // The path runs from the main thread's op into the slow worker and back: the op's
        // own time while the workers ran was waiting, not the main thread's work.
        let names = first_step_path(&trace);
        let expected: &[&str] = if with_child {
            &["act", "rollout", "prepare", "env_step", "learn"]
        } else {
            &["act", "rollout", "env_step", "learn"]
        };
        assert_eq!(names, expected, "with a child: {with_child}");
        // The slow worker as fast as the other: the step gains its 300 ns, as when the
        // main thread waited between its ops.
        let even = run(&trace, &["thread:env-1=0.5"]);
        let p = &even.predicted[0];
        conserves(p);
        assert_eq!(p.gain_ns, 300, "with a child: {with_child}");
    }
}

/// Two ranks meet at one collective; rank 1 launches it 300 ns later than rank 0.
fn late_peer() -> (Trace, CriticalPathOptions) {
    let mut b = TraceBuilder::new();
    let mut kernels = Vec::new();
    for (r, late) in [(0i64, 0), (1, 300)] {
        b.rank(strato_trace::testing::rank(Some(r), "r"));
        let cpu = b.thread(10 + r, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 2000);
        b.span(cpu, Level::Backend, "step", 0, 100 + late);
        b.span(
            cpu,
            Level::AcceleratorApi,
            "cudaLaunchKernel",
            90 + late,
            100 + late,
        )
        .correlation(1);
        kernels.push(
            b.span(
                gpu,
                Level::DeviceKernel,
                "ncclKernel_AllReduce",
                110 + late,
                700,
            )
            .correlation(1)
            .id(),
        );
    }
    let options = CriticalPathOptions {
        collectives: Some(vec![super::super::CollectiveInstance {
            members: (0..2)
                .map(|r| super::super::CollectiveMember {
                    rank: RankId(r),
                    span: kernels[r as usize],
                })
                .collect(),
        }]),
        ..Default::default()
    };
    (b.build(), options)
}

#[test]
fn a_rank_waiting_for_a_late_peer_names_it() {
    let (trace, options) = late_peer();
    let report = replay(&trace, &options, ReplayWindows::Steps(None), &[]).unwrap();
    let rank0 = &report.replay[0];
    assert_eq!((rank0.rank, rank0.error_pct), (0, 0.0));
    assert_eq!(
        rank0.path.peer_waits,
        [PeerWait {
            peer: 1,
            collective: "ncclKernel_AllReduce".into(),
            waited_ns: 300
        }]
    );
    assert!(report.replay[1].path.peer_waits.is_empty());
    // Evening the late rank's CPU (its `step` as fast as rank 0's) removes the wait.
    let even = replay(
        &trace,
        &options,
        ReplayWindows::Steps(None),
        &[Scale::parse("cpu:step=0.25").unwrap()],
    )
    .unwrap();
    assert!(even.predicted[0]
        .path
        .peer_waits
        .iter()
        .all(|p| p.waited_ns < 300));
}

/// Evening the straggler: rank 1 (last at the one collective) arrives with the median
/// member (the lower median of two: rank 0, at 110 ns), so the all-reduce's transfer
/// (290 ns) starts at 110 instead of 410 and ends at 400 on both ranks; rank 1's own work
/// before it is unchanged (its window ends at its kernel's start, 410). Evening rank 0,
/// which was not late, or a rank the job does not have changes nothing.
#[test]
fn an_evened_straggler_arrives_with_the_median_member() {
    let (trace, options) = late_peer();
    let run =
        |change: Scale| replay(&trace, &options, ReplayWindows::Steps(None), &[change]).unwrap();
    let even = run(Scale::even_straggler(None));
    assert_eq!(even.changes[0].change, "even-straggler");
    assert_eq!(even.changes[0].matched_ops, 1);
    let got: Vec<(i64, Ns, Ns, Ns)> = even
        .predicted
        .iter()
        .map(|w| (w.rank, w.baseline_ns, w.predicted_ns, w.gain_ns))
        .collect();
    assert_eq!(got, [(0, 700, 400, 300), (1, 700, 410, 290)]);
    for w in &even.predicted {
        conserves(w);
        assert!(w.path.peer_waits.iter().all(|p| p.waited_ns == 0), "{w:?}");
    }
    assert_eq!(
        run(Scale::even_straggler(Some(1))).predicted,
        even.predicted
    );
    for label in [0, 5] {
        let none = run(Scale::even_straggler(Some(label)));
        assert!(
            none.predicted.iter().all(|w| w.gain_ns == 0),
            "rank {label}"
        );
        assert_eq!(none.changes[0].matched_ops, usize::from(label == 0));
    }
}
