//! One test per section on a constructed trace whose answer is known, rendered through
//! [`ReportInput::from_analyzed`] as `strato report` does; the real files are checked end to
//! end by the CLI tests (`crates/strato-cli/tests/report_diff.rs`).
//!
//! The trace: one process (pid 1) whose thread runs `ITERATIONS` operations `step` of 9 µs,
//! one every 10 µs; each step launches three kernels on device 0 stream 7: `gemm` (2 µs),
//! `relu` (2 µs) and `softmax` (1 µs), back to back from 1 µs into the step. So the window is
//! `ITERATIONS` * 10 µs - 1 µs, the device is busy 5 µs per step, the kernel ranking is
//! gemm = relu > softmax, and the device loop has `ITERATIONS` iterations of 3 ops.

use strato_analysis::analyzed::Analyzed;
use strato_trace::OptionalId;
use strato_trace::{Level, Ns, Rank, RankId, Span, Trace, TrackIndexHandle, TrackKind};

use super::*;
use crate::svg::fmt_ns;
use crate::{PartError, ReportOptions};

const ITERATIONS: i64 = 6;
const STEP_NS: Ns = 10_000;

/// Spans on thread (1, 1) and device queue (0, 7) of one rank.
struct Builder {
    trace: Trace,
    index: TrackIndexHandle,
    correlation: u64,
}

impl Builder {
    fn new() -> Builder {
        let mut trace = Trace::default();
        trace.add_rank(Rank {
            rank: Some(0),
            world_size: None,
            source: "constructed.json".into(),
            format: "test".into(),
            host: None,
            metadata: strato_trace::metadata::SourceMetadata::None,
            notes: Default::default(),
        });
        Builder {
            trace,
            index: TrackIndexHandle::default(),
            correlation: 0,
        }
    }

    fn span(&mut self, kind: TrackKind, name: &str, level: Level, se: (Ns, Ns), c: Option<u64>) {
        let track = self.trace.track_for(&mut self.index, RankId(0), kind);
        let name = self.trace.intern(name);
        let category = self.trace.intern("test");
        self.trace.spans.push(Span {
            track,
            start: se.0,
            end: se.1,
            name,
            category,
            level,
            correlation: c.into(),
            external_id: OptionalId::NONE,
            args: None,
        });
    }

    fn cpu(&mut self, name: &str, level: Level, se: (Ns, Ns)) {
        self.cpu_of(1, name, level, se);
    }

    fn cpu_of(&mut self, pid: i64, name: &str, level: Level, se: (Ns, Ns)) {
        self.span(TrackKind::Thread { pid, tid: pid }, name, level, se, None);
    }

    /// A launch at `at` (100 ns) and its kernel at `se`.
    fn kernel(&mut self, name: &str, at: Ns, se: (Ns, Ns)) {
        self.correlation += 1;
        let c = Some(self.correlation);
        let thread = TrackKind::Thread { pid: 1, tid: 1 };
        self.span(
            thread,
            "cudaLaunchKernel",
            Level::AcceleratorApi,
            (at, at + 100),
            c,
        );
        let queue = TrackKind::DeviceQueue {
            device: 0,
            queue: 7,
        };
        self.span(queue, name, Level::DeviceKernel, se, c);
    }
}

/// The trace described in the module docs, with `kernels` per step (a prefix of gemm, relu,
/// softmax).
fn trace(kernels: usize) -> Trace {
    trace_with(kernels, |_| {})
}

/// [`trace`] with more spans added by `more`.
fn trace_with(kernels: usize, more: impl FnOnce(&mut Builder)) -> Trace {
    let mut b = Builder::new();
    more(&mut b);
    for i in 0..ITERATIONS {
        let t = i * STEP_NS;
        b.cpu("step", Level::Operation, (t, t + 9_000));
        let plan = [("gemm", 2_000), ("relu", 2_000), ("softmax", 1_000)];
        let mut start = t + 1_000;
        for (k, (name, len)) in plan.into_iter().take(kernels).enumerate() {
            b.kernel(name, t + 200 * k as Ns, (start, start + len));
            start += len;
        }
    }
    b.trace
}

fn input(trace: &Trace) -> ReportInput {
    let options = ReportOptions {
        title: "constructed <trace>".into(),
        generator: "strato test".into(),
        parallel: false,
    };
    ReportInput::from_analyzed(&Analyzed::new(trace), &options, &mut ())
}

/// One section's HTML and its "has data" flag.
fn section(write: WriteSection, input: &ReportInput) -> (String, bool) {
    let mut h = Html::new();
    let has = write(&mut h, input);
    (h.finish(), has)
}

#[test]
fn overview_counts_the_constructed_trace() {
    let t = trace(3);
    let mut h = Html::new();
    overview::overview(&mut h, &input(&t));
    let html = h.finish();
    // 6 steps, 18 launches, 18 kernels.
    assert_eq!(t.spans.len(), 6 + 2 * 18);
    assert!(html.contains("<section>"), "{html}");
    assert!(html.contains("constructed.json"), "{html}");
}

#[test]
fn breakdown_shows_the_operation_and_conserves_the_window() {
    let t = trace(3);
    let input = input(&t);
    let report = input.breakdown.as_ref().expect("breakdown");
    let p = &report.processes[0];
    assert_eq!(p.window_ns, ITERATIONS * STEP_NS - 1_000);
    assert_eq!(p.rows.iter().map(|r| r.time_ns).sum::<Ns>(), p.window_ns);
    let (html, has) = section(breakdown::breakdown, &input);
    assert!(has);
    assert!(html.contains("id=\"breakdown\""), "{html}");
    assert!(html.contains("step"), "{html}");
    assert!(html.contains(&fmt_ns(p.window_ns as f64)), "{html}");
}

#[test]
fn transitions_count_python_to_the_accelerator_api() {
    let t = trace(3);
    let (html, has) = section(transitions::transitions, &input(&t));
    // Every launch (18) is a transition from the operation (read as Python) to the API, all
    // under `step`.
    assert!(has, "{html}");
    assert!(html.contains("18 in all"), "{html}");
    assert!(
        html.contains("Python → accelerator API") || html.contains("→"),
        "{html}"
    );
}

#[test]
fn processes_need_two_processes() {
    let t = trace(3);
    let (html, has) = section(processes::processes, &input(&t));
    assert!(!has && html.contains("Single-process profile"), "{html}");
    // A second process (pid 2) whose only operation covers 5 µs: its window is 5 µs of CPU.
    let t = trace_with(3, |b| b.cpu_of(2, "load", Level::Operation, (0, 5_000)));
    let input = input(&t);
    let report = input.breakdown.as_ref().expect("breakdown");
    let windows: Vec<(i64, Ns)> = report
        .processes
        .iter()
        .map(|p| (p.pid, p.window_ns))
        .collect();
    assert!(windows.contains(&(2, 5_000)), "{windows:?}");
    let (html, has) = section(processes::processes, &input);
    assert!(has, "{html}");
    assert!(html.contains("pid 1") && html.contains("pid 2"), "{html}");
}

#[test]
fn utilization_reports_the_device_busy_time() {
    let t = trace(3);
    let input = input(&t);
    let (html, has) = section(utilization::utilization, &input);
    assert!(has, "{html}");
    assert!(html.contains("id=\"utilization\""), "{html}");
    // 5 µs of kernels per step.
    assert!(
        html.contains(&fmt_ns((5_000 * ITERATIONS) as f64)),
        "{html}"
    );
}

#[test]
fn kernels_rank_by_device_time() {
    let t = trace(3);
    let (html, has) = section(kernels::kernels, &input(&t));
    assert!(has);
    let (g, r, s) = (
        html.find("gemm").expect("gemm"),
        html.find("relu").expect("relu"),
        html.find("softmax").expect("softmax"),
    );
    assert!(
        g.min(r) < s,
        "softmax (1 µs) ranks after gemm and relu (2 µs each)"
    );
    assert!(
        html.contains(&fmt_ns((2_000 * ITERATIONS) as f64)),
        "{html}"
    );
}

#[test]
fn roofline_says_why_without_costs() {
    // No FLOP or byte counts and no known device: nothing to place under a roof.
    let t = trace(3);
    let (html, has) = section(roofline::roofline, &input(&t));
    assert!(html.contains("id=\"roofline\""), "{html}");
    assert!(!has && html.contains("class=\"absent\""), "{html}");
}

#[test]
fn iterations_find_the_loop_and_its_diagnosis() {
    let t = trace(3);
    let input = input(&t);
    let report = &input.iterations.as_ref().expect("iterations").report;
    let main = &report.sequences[0];
    assert_eq!(main.pattern_len, 3);
    assert_eq!(main.iterations.len() as i64, ITERATIONS);
    let (html, has) = section(iterations::iterations, &input);
    assert!(has);
    for d in &main.diagnosis {
        assert!(html.contains(&esc_capped(&d.message())), "{html}");
    }
}

#[test]
fn memory_says_why_without_allocations() {
    let t = trace(3);
    let (html, has) = section(memory::memory, &input(&t));
    assert!(html.contains("id=\"memory\""), "{html}");
    assert!(!has && html.contains("class=\"absent\""), "{html}");
}

#[test]
fn diff_shows_the_added_kernel() {
    let (a, b) = (trace(2), trace(3));
    let mut input = input(&b);
    let side = crate::baseline_side(&Analyzed::new(&a));
    drop(a);
    input.add_baseline(
        ("a.json", side.as_ref()),
        ("b.json", &Analyzed::new(&b)),
        &mut (),
    );
    let d = input.diff.as_ref().expect("diff");
    let added: Vec<&str> = d.added_kernels().map(|k| k.name.as_str()).collect();
    assert_eq!(added, vec!["softmax"]);
    assert_eq!(d.b.device_time_ns - d.a.device_time_ns, 1_000 * ITERATIONS);
    let mut h = Html::new();
    diff::diff_section(&mut h, d);
    let html = h.finish();
    assert!(
        html.contains("softmax") && html.contains("a.json"),
        "{html}"
    );
}

#[test]
fn a_failed_analysis_is_said_in_its_section() {
    let t = trace(3);
    let mut input = input(&t);
    input.kernels = crate::guarded("kernel statistics", || panic!("boom"));
    assert_eq!(
        input.kernels.as_ref().err(),
        Some(&PartError::Panicked {
            analysis: "kernel statistics",
            message: "boom".into()
        })
    );
    let (html, has) = section(kernels::kernels, &input);
    assert!(!has);
    assert!(html.contains(
        "The kernel statistics analysis failed on this profile (a bug; please report it): boom"
    ));
}

#[test]
fn the_page_lists_every_section_and_escapes_the_title() {
    let t = trace(3);
    let page = document(&input(&t));
    assert!(page.contains("constructed &lt;trace&gt;"));
    for (id, _, _) in SECTIONS {
        assert!(page.contains(&format!("href=\"#{id}\"")), "{id}");
    }
    assert!(page.contains(CSS));
}

#[test]
fn distributed_says_why_without_collectives() {
    // The constructed trace has kernels but none of NCCL/RCCL: the section says so (the real
    // multi-rank files are checked through the CLI: tests/cli/collectives.rs).
    let (html, has) = section(distributed::distributed, &input(&trace(3)));
    assert!(!has);
    assert!(html.contains("No collective"), "{html}");
}

#[test]
fn findings_open_the_page_and_link_to_their_evidence() {
    let t = trace(3);
    let report = input(&t);
    let html = super::document(&report);
    let findings = html.find("id=\"findings\"").expect("findings section");
    let overview = html.find("id=\"overview\"").expect("overview section");
    assert!(findings < overview, "the page opens with the findings");
    let advice = report.advice.as_ref().expect("advice ran");
    for f in &advice.findings {
        assert!(html.contains(&format!("{}: ", f.rule)), "{}", f.rule);
        for e in &f.evidence {
            let (id, _) = super::findings::evidence_section(&e.kind);
            assert!(html.contains(&format!("<a href=\"#{id}\">")), "{id}");
        }
    }
    if advice.findings.is_empty() {
        assert!(html.contains("No findings at or above"));
    }
}

#[test]
fn module_icicle_is_as_wide_as_device_time() {
    // Each step's thread span is also `nn.Module: Net_0`; the first half of each step is
    // `nn.Module: Block_<i % 2>` (launches at +0, +200, +400 ns are inside it).
    let t = trace_with(3, |b| {
        for i in 0..ITERATIONS {
            let t = i * STEP_NS;
            b.cpu("nn.Module: Net_0", Level::Python, (t, t + 9_000));
            b.cpu(
                &format!("nn.Module: Block_{}", i % 2),
                Level::Python,
                (t, t + 4_500),
            );
        }
    });
    let input = input(&t);
    let r = input.modules.as_ref().unwrap();
    // 5 us of kernels per step, all launched under Block inside Net.
    assert_eq!(r.device_ns_in_modules, ITERATIONS as Ns * 5_000);
    assert_eq!(r.device_ns_outside_modules, 0);
    let (html, has) = section(modules::modules, &input);
    assert!(has);
    // Net spans the full width; Block (its only child, all of its device time) too.
    assert!(
        html.contains("<rect x=\"0\" y=\"0\" width=\"999.5\""),
        "{html}"
    );
    assert!(
        html.contains("<rect x=\"0\" y=\"22\" width=\"999.5\""),
        "{html}"
    );
    assert!(html.contains(">Block<"), "{html}");
    assert!(html.contains("2 instances"), "{html}");
    // Without module spans the section says why.
    let (html, has) = section(modules::modules, &super::tests::input(&trace(3)));
    assert!(!has && html.contains("nn.Module"), "{html}");
}

/// The constructed trace has no ProfilerStep: one window per rank, the whole trace; its
/// kernels are on the path (the launches wait for nothing, the kernels run back to back).
#[test]
fn critical_path_section_composes_the_whole_trace_without_steps() {
    let t = trace(3);
    let inp = input(&t);
    let windows = inp.critical_path.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].step, "whole trace");
    let w = &windows[0].ranks[0].window;
    assert_eq!(
        w.by_kind.values().sum::<Ns>() + w.before_path_ns + w.after_path_ns,
        w.window_ns
    );
    let (html, has) = section(critical_path::critical_path, &inp);
    assert!(has);
    assert!(
        html.contains("whole trace: no ProfilerStep annotation"),
        "{html}"
    );
    assert!(html.contains("Operations with the most critical-path time"));
    assert!(html.contains("softmax"), "{html}");
    // No span at all: the section says why.
    let empty = input(&Builder::new().trace);
    let (html, has) = section(critical_path::critical_path, &empty);
    assert!(!has, "{html}");
}

/// The replay of the constructed trace (no steps: the whole trace, one window per rank) gives
/// the trace back: the kernels run back to back after launches that wait for nothing, so the
/// simulation ends where the trace does. The section shows the window and its error.
#[test]
fn replay_section_gives_the_constructed_trace_back() {
    let t = trace(3);
    let inp = input(&t);
    let report = inp
        .replay
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap();
    assert_eq!(report.replay.len(), 1);
    let w = &report.replay[0];
    assert_eq!(w.step, "whole trace");
    assert!(w.measured_ns > 0);
    assert_eq!(w.simulated_ns, w.measured_ns, "{w:?}");
    let (html, has) = section(replay::replay, &inp);
    assert!(has, "{html}");
    assert!(html.contains("median error"), "{html}");
    assert!(html.contains("whole trace"), "{html}");
    // No span at all: the section says why.
    let empty = input(&Builder::new().trace);
    let (html, has) = section(replay::replay, &empty);
    assert!(!has, "{html}");
}

/// The page draws with the one palette every front end shares (issue 30 item 6): the
/// breakdown's resources, the critical path's parts and the data's series in
/// `strato_analysis::palette`'s colours, and none of the Tableau colours the report used
/// before (not colour-blind safe, and not the viewer's).
#[test]
fn the_page_draws_with_the_shared_palette() {
    use strato_analysis::palette;
    let t = trace(3);
    let html = crate::render(&input(&t));
    let lower = html.to_ascii_lowercase();
    for tableau in [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#1f77b4", "#2ca02c",
    ] {
        assert!(!lower.contains(tableau), "{tableau} drawn");
    }
    for (what, colour) in [
        ("CPU", palette::CPU),
        ("device", palette::DEVICE),
        ("CPU op on the path", palette::path::CPU_OP),
        ("compute kernel on the path", palette::path::COMPUTE_KERNEL),
        ("first series", palette::series(0)),
    ] {
        assert!(html.contains(colour), "{what} ({colour}) not drawn");
    }
}

/// The fragment of a viewer link's `href` as a map (the link's page checked first).
fn fragment_of(href: &str, page: &str) -> std::collections::HashMap<String, String> {
    let (at, fragment) = href.split_once('#').expect("a fragment");
    assert_eq!(at, page, "{href}");
    form_urlencoded::parse(fragment.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Every viewer link's `href` in `html` (the report escapes `&` in attributes).
fn view_links(html: &str) -> Vec<String> {
    html.split("<a class=\"view\" href=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').expect("closed")].replace("&amp;", "&"))
        .collect()
}

#[test]
fn served_by_the_viewer_the_sections_link_to_their_evidence_and_a_file_has_no_link() {
    let t = trace_with(3, |b| {
        // A host stall: advise's host-sync finding, with evidence on rank 0.
        for i in 0..ITERATIONS {
            let t = i * STEP_NS;
            b.cpu(
                "cudaDeviceSynchronize",
                Level::AcceleratorApi,
                (t + 6_000, t + 8_500),
            );
        }
    });
    let mut report = input(&t);
    let plain = super::document(&report);
    assert!(view_links(&plain).is_empty() && !plain.contains("strato-view"));

    let origin = report.info.info.start_ns.expect("a start");
    let page = "/?token=abc".to_owned();
    report.viewer = Some(crate::ViewerLinks {
        page: page.clone(),
        origin_ns: origin,
    });
    let html = super::document(&report);
    let links = view_links(&html);
    let advice = report.advice.as_ref().expect("advice ran");
    assert!(!advice.findings.is_empty(), "the stalls are a finding");
    // One link per finding and one per evidence range, each zoomed around its range (times
    // since the origin), the range marked, on its rank, with the findings listed.
    let evidence: Vec<_> = advice.findings.iter().flat_map(|f| &f.evidence).collect();
    let finding_links: Vec<_> = links
        .iter()
        .map(|l| fragment_of(l, &page))
        .filter(|f| f.contains_key("findings"))
        .collect();
    assert_eq!(finding_links.len(), advice.findings.len() + evidence.len());
    for e in &evidence {
        let mark = format!("{},{}", e.start_ns - origin, e.end_ns - origin);
        let f = finding_links
            .iter()
            .find(|f| f["mark"] == mark)
            .unwrap_or_else(|| panic!("no link marks {mark}"));
        let (t0, t1): (i64, i64) = (f["t0"].parse().unwrap(), f["t1"].parse().unwrap());
        assert!(t0 < e.start_ns - origin && t1 > e.end_ns - origin, "{f:?}");
        assert_eq!(f["rank"], e.rank.to_string());
    }
    // Each step's critical path, with its step number.
    let paths: Vec<_> = links
        .iter()
        .map(|l| fragment_of(l, &page))
        .filter(|f| f.contains_key("path"))
        .collect();
    let windows = report.critical_path.as_ref().unwrap().as_ref().unwrap();
    let numbers: Vec<String> = windows
        .iter()
        .flat_map(|s| s.ranks.iter().map(move |_| s.number))
        .map(|n| {
            if n == 0 {
                "whole".into()
            } else {
                n.to_string()
            }
        })
        .collect();
    assert_eq!(
        paths.iter().map(|f| f["path"].clone()).collect::<Vec<_>>(),
        numbers
    );
    // Each iteration, and each ranked kernel by name.
    let iterations: usize = report
        .iterations
        .as_ref()
        .unwrap()
        .report
        .sequences
        .iter()
        .map(|l| l.iterations.len())
        .sum();
    assert!(iterations > 0);
    let ranges = links
        .iter()
        .map(|l| fragment_of(l, &page))
        .filter(|f| {
            f.contains_key("mark") && !f.contains_key("findings") && !f.contains_key("path")
        })
        .count();
    assert_eq!(ranges, iterations);
    for kernel in ["gemm", "relu", "softmax"] {
        assert!(links.contains(&format!("{page}#q={kernel}")), "{kernel}");
    }
    // Beyond the links, the page is the file's.
    assert!(html.len() > plain.len());
}
