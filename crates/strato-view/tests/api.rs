//! The view's API on real traces of `../shared/data` (every Kineto file, the 8-rank DLRM job),
//! against brute force over the same trace: every window's level of detail conserves the
//! spans beneath it, lanes cover every track once, a kernel's details name its launch,
//! search walks the spans in order, aggregates add up; and the handler's token and errors.

use std::collections::HashMap;
use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::Value;
use strato_io::ImportOptions;
use strato_trace::{Level, Trace};
use strato_view::api::Params;
use strato_view::{Api, Handler};

fn shared(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(relative)
}

fn load(paths: &[PathBuf]) -> Trace {
    strato_io::import_paths(paths, &ImportOptions::default()).expect("import")
}

/// Every Kineto JSON file of the shared data (not the rank directories' members).
fn kineto_files() -> Vec<PathBuf> {
    let dir = shared("kineto");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("shared data")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{}", dir.display());
    files
}

fn dlrm() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(shared("kineto/param_dlrm8"))
        .expect("dlrm")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

fn params(pairs: &[(&str, String)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect::<HashMap<_, _>>()
}

/// (count, summed durations) of the spans of `lane` overlapping `[t0, t1)` (absolute times).
fn brute(trace: &Trace, lane: u32, t0: i64, t1: i64) -> (u64, i64) {
    let mut n = 0;
    let mut d = 0;
    for s in &trace.spans {
        if s.track.0 == lane && s.start < t1 && (s.end > t0 || (s.start == s.end && s.start >= t0))
        {
            n += 1;
            d += s.end - s.start;
        }
    }
    (n, d)
}

/// (count, summed durations) the range answer shows for each lane.
fn shown(answer: &Value) -> HashMap<u64, (u64, i64)> {
    let mut out = HashMap::new();
    for lane in answer["lanes"].as_array().expect("lanes") {
        let mut n = 0;
        let mut d = 0;
        for row in lane["rows"].as_array().expect("rows") {
            for e in row["events"].as_array().expect("events") {
                n += 1;
                d += e[2].as_i64().expect("end") - e[1].as_i64().expect("start");
            }
            for b in row["buckets"].as_array().expect("buckets") {
                n += b[1].as_u64().expect("count");
                d += b[2].as_i64().expect("busy");
            }
        }
        out.insert(lane["id"].as_u64().expect("id"), (n, d));
    }
    out
}

fn origin(api: &Api) -> i64 {
    api.lanes()["origin_ns"]
        .as_str()
        .expect("origin")
        .parse()
        .expect("number")
}

fn check_window(api: &Api, t0: i64, t1: i64, px: u32) {
    let answer = api
        .range(&params(&[
            ("t0", t0.to_string()),
            ("t1", t1.to_string()),
            ("px", px.to_string()),
        ]))
        .expect("range");
    let o = origin(api);
    let shown = shown(&answer);
    for lane in 0..api.trace().tracks.len() as u32 {
        let want = brute(api.trace(), lane, t0 + o, t1 + o);
        let got = shown.get(&u64::from(lane)).copied().unwrap_or((0, 0));
        assert_eq!(got, want, "lane {lane}, window [{t0}, {t1}) at {px} px");
    }
}

#[test]
fn every_real_trace_conserves_its_spans_at_every_zoom() {
    for file in kineto_files() {
        let api = Api::new(load(std::slice::from_ref(&file)));
        let end = api.lanes()["end_ns"].as_i64().expect("end");
        let lanes = api.lanes();
        // Every track is one lane, once.
        let mut ids: Vec<u64> = lanes["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .map(|l| l["id"].as_u64().expect("id"))
            .collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            (0..api.trace().tracks.len() as u64).collect::<Vec<_>>(),
            "{}",
            file.display()
        );
        // The whole job at 1, 100 and 2,000 px; a tenth; a thousandth in the middle.
        let end = end.max(1);
        for (t0, t1) in [
            (0, end + 1),
            (end / 3, end / 3 + end / 10 + 1),
            (end / 2, end / 2 + end / 1000 + 1),
        ] {
            for px in [1, 100, 2000] {
                check_window(&api, t0, t1, px);
            }
        }
    }
}

fn arbitrary_window() -> impl Strategy<Value = (f64, f64, u32)> {
    (0.0f64..1.0, 0.000_001f64..1.0, 1u32..4000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any window of the DLRM job (8 ranks) at any width conserves every lane's spans.
    #[test]
    fn any_window_of_a_real_job_conserves_its_spans((from, len, px) in arbitrary_window()) {
        static API: std::sync::OnceLock<Api> = std::sync::OnceLock::new();
        let api = API.get_or_init(|| Api::new(load(&dlrm())));
        let end = api.lanes()["end_ns"].as_i64().expect("end").max(1) as f64;
        let t0 = (from * end) as i64 - 1000;
        let t1 = t0 + ((len * end) as i64).max(1);
        check_window(api, t0, t1, px);
    }
}

/// Two ranks, one all-reduce whose end each host waits for; rank 1 arrives late (a slow CPU op
/// before its launch: `late_rank_at_an_all_reduce`), so rank 0's critical path waits for it:
/// the path's late peer carries the edge between the ranks, from rank 1's kernel to rank 0's,
/// at the time rank 1 arrived, placed on the timeline.
#[test]
fn a_late_peers_edge_runs_from_its_kernel_to_the_waiting_ranks() {
    let (trace, kernels) = strato_trace::testing::late_rank_at_an_all_reduce();
    let api = Api::new(trace);
    let answer = api
        .critical_path(&params(&[("step", "whole".to_string())]))
        .expect("critical path");
    let ranks = answer["ranks"].as_array().expect("ranks");
    let late = ranks[0]["late_peers"].as_array().expect("late peers");
    assert_eq!(late.len(), 1, "{answer}");
    let edge = &late[0];
    assert_eq!(edge["peer"], 1);
    assert!(edge["waited_ns"].as_i64().expect("waited") > 500, "{edge}");
    let (from, to) = (&edge["from"], &edge["to"]);
    assert_eq!(from["id"].as_u64(), Some(u64::from(kernels[1].0)), "{edge}");
    assert_eq!(to["id"].as_u64(), Some(u64::from(kernels[0].0)), "{edge}");
    let lane_rank = |lane: &Value| {
        let id = lane.as_u64().expect("lane") as usize;
        api.trace().tracks[id].rank.0
    };
    assert_eq!((lane_rank(&from["lane"]), lane_rank(&to["lane"])), (1, 0));
    // It arrives on rank 0's kernel when rank 1's kernel starts (the clocks aligned).
    let arrived = edge["arrived_ns"].as_i64().expect("arrived");
    assert_eq!(arrived, from["start_ns"].as_i64().expect("start"), "{edge}");
    assert!(to["start_ns"].as_i64().expect("start") < arrived, "{edge}");
    assert!(arrived < to["end_ns"].as_i64().expect("end"), "{edge}");
    // Rank 1 waited for nobody.
    assert!(ranks[1]["late_peers"].as_array().expect("late").is_empty());
}

#[test]
fn a_kernels_details_name_its_launch_and_its_flow() {
    let trace = load(&[shared("kineto/hta_alexnet_trace.json.gz")]);
    let kernel = trace
        .spans
        .iter()
        .position(|s| s.level == Level::DeviceKernel && s.correlation.is_some())
        .expect("a kernel with a correlation");
    let correlation = trace.spans[kernel].correlation;
    let launch = trace
        .spans
        .iter()
        .position(|s| s.level == Level::AcceleratorApi && s.correlation == correlation)
        .expect("its launch");
    let api = Api::new(trace);
    let details = api.event(&kernel.to_string()).expect("details");
    assert_eq!(details["level"], "DeviceKernel");
    let correlated: Vec<u64> = details["correlated"]
        .as_array()
        .expect("correlated")
        .iter()
        .map(|c| c["id"].as_u64().expect("id"))
        .collect();
    assert!(correlated.contains(&(launch as u64)), "{details}");
    // The launch's flow ends on the kernel.
    let launch_details = api.event(&launch.to_string()).expect("launch");
    let flows = launch_details["flows"].as_array().expect("flows");
    assert!(
        flows
            .iter()
            .any(|f| f["to"]["event"]["id"] == kernel as u64),
        "{launch_details}"
    );
    // The launch sits inside the ops that made it.
    let chain = launch_details["chain"].as_array().expect("chain");
    assert!(!chain.is_empty(), "{launch_details}");
    for c in chain {
        assert!(c["start_ns"].as_i64() <= launch_details["start_ns"].as_i64());
        assert!(c["end_ns"].as_i64() >= launch_details["end_ns"].as_i64());
    }
}

#[test]
fn search_walks_the_matching_spans_in_order_both_ways() {
    let api = Api::new(load(&[shared("kineto/hta_alexnet_trace.json.gz")]));
    let o = origin(&api);
    let trace = api.trace();
    let mut want: Vec<(i64, u64)> = trace
        .spans
        .iter()
        .enumerate()
        .filter(|(_, s)| trace.str(s.name).to_lowercase().contains("conv"))
        .map(|(i, s)| (s.start - o, i as u64))
        .collect();
    want.sort_unstable();
    assert!(want.len() > 3);
    // Forward from before the start: each next is the first strictly later start.
    let mut from = -1;
    let mut starts = Vec::new();
    loop {
        let answer = api
            .search(&params(&[("q", "CONV".into()), ("from", from.to_string())]))
            .expect("search");
        let Some(found) = answer["found"].as_object() else {
            break;
        };
        from = found["start_ns"].as_i64().expect("start");
        starts.push(from);
    }
    let mut distinct: Vec<i64> = want.iter().map(|w| w.0).collect();
    distinct.dedup();
    assert_eq!(starts, distinct);
    let last = api
        .search(&params(&[
            ("q", "conv".into()),
            ("from", (i64::MAX / 4).to_string()),
            ("dir", "prev".into()),
        ]))
        .expect("search");
    assert_eq!(
        last["found"]["start_ns"].as_i64(),
        Some(want.last().expect("one").0)
    );
    let none = api
        .search(&params(&[("q", "no such name anywhere".into())]))
        .expect("search");
    assert!(none["found"].is_null());
}

#[test]
fn a_ranges_aggregate_adds_up() {
    let api = Api::new(load(&dlrm()));
    let end = api.lanes()["end_ns"].as_i64().expect("end");
    let (t0, t1) = (end / 4, end / 2);
    let answer = api
        .aggregate(&params(&[("t0", t0.to_string()), ("t1", t1.to_string())]))
        .expect("aggregate");
    let names = answer["names"].as_array().expect("names");
    let listed: (u64, i64) = names.iter().fold((0, 0), |a, n| {
        (
            a.0 + n["count"].as_u64().expect("count"),
            a.1 + n["total_ns"].as_i64().expect("total"),
        )
    });
    let others = &answer["others"];
    assert_eq!(
        listed.0 + others["count"].as_u64().expect("count"),
        answer["count"].as_u64().expect("count")
    );
    assert_eq!(
        listed.1 + others["total_ns"].as_i64().expect("total"),
        answer["total_ns"].as_i64().expect("total")
    );
    // Brute force: clipped time of every overlapping span.
    let o = origin(&api);
    let (a, b) = (t0 + o, t1 + o);
    let mut count = 0u64;
    let mut total = 0i64;
    for s in &api.trace().spans {
        if s.start < b && (s.end > a || (s.start == s.end && s.start >= a)) {
            count += 1;
            total += (s.end.min(b) - s.start.max(a)).max(0);
        }
    }
    assert_eq!(answer["count"].as_u64(), Some(count));
    assert_eq!(answer["total_ns"].as_i64(), Some(total));
    assert!(names.len() <= strato_view::api::AGGREGATE_NAMES);
}

#[test]
fn requests_without_the_token_or_with_bad_parameters_are_refused_with_one_line() {
    let handler = Handler::new(Api::new(load(&[shared(
        "kineto/hta_alexnet_trace.json.gz",
    )])))
    .expect("handler");
    let token = handler.token().to_string();
    assert_eq!(token.len(), 32);
    let status = |target: &str, cookie: Option<&str>| handler.answer("GET", target, cookie).status;
    assert_eq!(status("/api/lanes", None), 401);
    assert_eq!(status("/", None), 401);
    assert_eq!(status("/app.js", None), 401);
    assert_eq!(status("/api/lanes?token=0123", None), 403);
    assert_eq!(
        status(&format!("/api/lanes?token={}", "0".repeat(32)), None),
        403
    );
    assert_eq!(status(&format!("/api/lanes?token={token}"), None), 200);
    let cookie = format!("other=1; strato_view_token={token}");
    assert_eq!(status("/api/lanes", Some(&cookie)), 200);
    assert_eq!(status("/app.js", Some(&cookie)), 200);
    assert_eq!(
        handler.answer("POST", "/api/lanes", Some(&cookie)).status,
        405
    );
    let page = handler.answer("GET", &format!("/?token={token}"), None);
    assert_eq!(page.status, 200);
    assert!(page
        .set_cookie
        .expect("cookie")
        .contains("HttpOnly; SameSite=Strict"));
    for (target, want) in [
        ("/api/range", 400),
        ("/api/range?t0=5&t1=5", 400),
        ("/api/range?t0=0&t1=10&px=0", 400),
        ("/api/range?t0=0&t1=10&px=999999", 400),
        ("/api/range?t0=x&t1=10", 400),
        ("/api/range?t0=0&t1=99999999999999999999999", 400),
        ("/api/range?t0=0&t1=10&lanes=1,99999", 400),
        ("/api/range?t0=0&t1=10&lanes=a", 400),
        ("/api/event/abc", 400),
        ("/api/event/4294967295", 404),
        ("/api/search", 400),
        ("/api/search?q=x&dir=sideways", 400),
        ("/api/aggregate?t0=0", 400),
        ("/../../etc/passwd", 404),
        ("/api/../../etc/passwd", 404),
        ("/api/event/", 400),
        ("/api/collectives", 400),
        ("/api/collectives?t0=3&t1=2", 400),
        ("/api/critical-path?step=-1", 400),
    ] {
        let answer = handler.answer("GET", target, Some(&cookie));
        assert_eq!(answer.status, want, "{target}");
        let body: Value = serde_json::from_slice(&answer.body).expect("json");
        let line = body["error"].as_str().expect("error");
        assert!(!line.is_empty() && !line.contains('\n'), "{target}: {line}");
    }
    assert_eq!(
        status("/api/range?t0=0&t1=10&lanes=1,1,1", Some(&cookie)),
        200
    );
    // One rank: no collective is matched across ranks.
    let one = handler.answer(
        "GET",
        "/api/collectives?t0=0&t1=1000000000000",
        Some(&cookie),
    );
    let one: Value = serde_json::from_slice(&one.body).expect("json");
    assert_eq!(one["collectives"], serde_json::json!([]));
}

#[test]
fn the_page_is_served_from_the_binary_and_loads_nothing_from_elsewhere() {
    let handler = Handler::new(Api::new(load(&[shared(
        "kineto/hta_alexnet_trace.json.gz",
    )])))
    .expect("handler");
    let cookie = format!("strato_view_token={}", handler.token());
    for (path, kind) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
    ] {
        let answer = handler.answer("GET", path, Some(&cookie));
        assert_eq!(answer.status, 200);
        assert!(answer.content_type.starts_with(kind));
        let text = String::from_utf8(answer.body).expect("utf-8");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{path} refers elsewhere"
        );
        assert!(
            !text.contains("innerHTML"),
            "{path}: text from the trace must go in as text"
        );
    }
}

/// The lanes carry each level's colour from the palette the report draws with (issue 30
/// item 6: a stratum keeps its colour in the viewer and the report), one per level, in the
/// levels' order; the page has no palette of its own.
#[test]
fn lanes_give_each_level_the_report_colour() {
    let api = Api::new(load(&[shared("kineto/hta_nccl_data.json.gz")]));
    let lanes = api.lanes();
    let levels = lanes["levels"].as_array().expect("levels");
    let colours = lanes["level_colours"].as_array().expect("level_colours");
    assert_eq!(levels.len(), colours.len());
    for (name, colour) in levels.iter().zip(colours) {
        let level = Level::parse(name.as_str().expect("name")).expect("a level");
        assert_eq!(colour, strato_analysis::palette::level(level));
    }
    let app = include_str!("../src/assets/app.js");
    assert!(
        !app.contains("#E69F00', '#56B4E9'"),
        "app.js holds its own palette"
    );
    assert!(app.contains("meta.level_colours"));
}

/// A job whose rank 3 recorded its clock 1000 s ahead (ranks on hosts whose clocks differ) is
/// viewed on the job's one clock, as every cross-rank analysis reads it: each event where the
/// job recorded on one clock has it (within the collectives' alignment error), the moved lanes
/// and their events saying how far they were moved.
#[test]
fn a_rank_whose_clock_is_ahead_is_viewed_on_the_jobs_clock() {
    const AHEAD: i64 = 1_000_000_000_000;
    const ALIGNMENT_ERROR: i64 = 1_000_000;
    let job = load(&dlrm());
    let on_one_clock = Api::new(job.clone());
    let mut ahead = job;
    let late = ahead
        .ranks
        .iter()
        .position(|r| r.rank == Some(3))
        .expect("rank 3") as u32;
    let moved: Vec<i64> = (ahead.tracks.iter())
        .map(|t| if t.rank.0 == late { AHEAD } else { 0 })
        .collect();
    strato_view::overlays::onto_job_clock(&mut ahead, &moved);
    let viewed = Api::new(ahead);

    let extent = |api: &Api| (origin(api), api.lanes()["end_ns"].as_i64().expect("end"));
    let ((o1, e1), (o2, e2)) = (extent(&on_one_clock), extent(&viewed));
    assert!((o1 - o2).abs() < ALIGNMENT_ERROR && (e1 - e2).abs() < ALIGNMENT_ERROR);
    let spans = (on_one_clock.trace().spans.iter()).zip(&viewed.trace().spans);
    for (a, b) in spans {
        assert!((a.start - b.start).abs() < ALIGNMENT_ERROR, "{a:?} {b:?}");
        assert_eq!(a.duration(), b.duration());
    }
    // The lanes of rank 3 (and only they) were moved back by about 1000 s, and say so.
    let shift_of = |api: &Api| -> HashMap<u64, i64> {
        (api.lanes()["lanes"].as_array().expect("lanes").iter())
            .map(|l| {
                let id = l["id"].as_u64().expect("id");
                (id, l["clock_shift_ns"].as_i64().unwrap_or(0))
            })
            .collect()
    };
    let (before, after) = (shift_of(&on_one_clock), shift_of(&viewed));
    for (lane, track) in viewed.trace().tracks.iter().enumerate() {
        let extra = after[&(lane as u64)] - before[&(lane as u64)];
        if track.rank.0 == late {
            assert!(
                (extra + AHEAD).abs() < ALIGNMENT_ERROR,
                "lane {lane}: {extra}"
            );
        } else {
            assert!(extra.abs() < ALIGNMENT_ERROR, "lane {lane}: {extra}");
        }
    }
    // An event of rank 3 gives its shift: its recorded start is its start less the shift.
    let kernel = (viewed.trace().spans.iter())
        .position(|s| viewed.trace().tracks[s.track.0 as usize].rank.0 == late)
        .expect("a span of rank 3");
    let details = viewed.event(&kernel.to_string()).expect("event");
    let shift = details["clock_shift_ns"].as_i64().expect("shift");
    assert!((shift + AHEAD).abs() < ALIGNMENT_ERROR, "{shift}");
    // Every window still conserves the spans beneath it.
    let end = e2;
    check_window(&viewed, 0, end, 500);
    check_window(&viewed, end / 3, end / 2, 300);
}

#[test]
fn the_report_is_served_with_links_back_into_the_page() {
    let handler =
        Handler::new(Api::new(load(&dlrm())).titled("param_dlrm8".into())).expect("handler");
    let token = handler.token().to_string();
    assert_eq!(handler.answer("GET", "/report", None).status, 401);
    let answer = handler.answer("GET", &format!("/report?token={token}"), None);
    assert_eq!(answer.status, 200);
    assert!(answer.content_type.starts_with("text/html"));
    // Its inline style and SVG only: no script, nothing fetched.
    assert_eq!(answer.policy, strato_view::server::REPORT_POLICY);
    let html = String::from_utf8(answer.body).expect("utf-8");
    assert!(html.contains("<title>param_dlrm8") || html.contains("param_dlrm8"));
    assert!(!html.contains("<script"));
    let page = format!("/?token={token}#");
    let links: Vec<&str> = html
        .split("<a class=\"view\" href=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').expect("closed")])
        .collect();
    assert!(links.iter().all(|l| l.starts_with(&page)), "{links:?}");
    // Times since the view's origin, as the page takes them: inside the job's extent.
    let end = handler.api().lanes()["end_ns"].as_i64().expect("end");
    let mut ranges = 0;
    for link in &links {
        let fragment = link[page.len()..].replace("&amp;", "&");
        let fields: std::collections::HashMap<String, String> =
            form_urlencoded::parse(fragment.as_bytes())
                .into_owned()
                .collect();
        if let Some(mark) = fields.get("mark") {
            let (a, b) = mark.split_once(',').expect("a,b");
            let (a, b): (i64, i64) = (a.parse().unwrap(), b.parse().unwrap());
            assert!(0 <= a && a <= b && b <= end, "{link}");
            ranges += 1;
        }
    }
    for section in ["findings", "critical-path", "kernels", "distributed"] {
        let at = html.find(&format!("id=\"{section}\"")).expect(section);
        let next = html[at..].find("</section>").expect("closed") + at;
        assert!(
            html[at..next].contains("class=\"view\""),
            "{section} has no link"
        );
    }
    assert!(ranges > 8, "{ranges} ranges");
    // Asked again: the same page, kept.
    let again = handler.answer("GET", &format!("/report?token={token}"), None);
    assert_eq!(String::from_utf8(again.body).unwrap(), html);
}

#[test]
fn a_baseline_is_stacked_under_the_run_with_its_steps_lined_up_and_diffed() {
    use strato_analysis::analyzed::Analyzed;
    use strato_analysis::compare::registration::{Diff, DiffOutput, DiffSettings};
    use strato_analysis::paths::critical_path::rank_steps;
    use strato_analysis::registry::Comparison;
    let files = dlrm();
    // The run: DLRM rank 0. The baseline: rank 1, its clock 5 s later than rank 0's.
    let run = load(&files[..1]);
    let mut base = load(&files[1..2]);
    base.shift_tracks(&vec![5_000_000_000; base.tracks.len()]);
    let alone = Api::new(run.clone());
    let api = Api::with_baseline(run.clone(), base.clone(), "worker1".into());
    let lanes = api.lanes();

    // The first step both have starts at the same time in the view.
    let b = &lanes["baseline"];
    let step = b["aligned_step"].as_u64().expect("a step in common");
    let steps = rank_steps(api.trace());
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0][&step].0, steps[1][&step].0);
    assert_eq!(
        b["shift_ns"].as_i64().unwrap(),
        rank_steps(&run)[0][&step].0 - rank_steps(&base)[0][&step].0
    );
    assert_eq!(b["steps_aligned"].as_u64(), Some(1));

    // Every lane of both, the run's first, the baseline's marked, under the same rank.
    let all = lanes["lanes"].as_array().unwrap();
    assert_eq!(all.len(), run.tracks.len() + base.tracks.len());
    let marked: Vec<bool> = all
        .iter()
        .map(|l| l["baseline"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(marked.iter().filter(|&&m| m).count(), base.tracks.len());
    assert!(
        marked.windows(2).all(|w| w[0] <= w[1]),
        "baseline lanes under the run's"
    );
    // Its events are on the timeline: the whole view at 1,000 px shows every span once.
    assert_eq!(spans_shown(&api), run.spans.len() + base.spans.len());

    // The overlays are the run's alone.
    let rules = |a: &Api| -> Vec<(String, i64)> {
        a.findings().expect("findings")["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["rule"].as_str().unwrap().to_owned(),
                    f["time_ns"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(rules(&api), rules(&alone));
    let path = |a: &Api| {
        let p = a
            .critical_path(&params(&[("step", step.to_string())]))
            .expect("path");
        p["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["length_ns"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(path(&api), path(&alone));
    assert_eq!(path(&api).len(), 1);

    // The diff is `strato diff BASELINE RUN`'s.
    let settings = DiffSettings::default();
    let a = Diff::side(&Analyzed::new(&base), &settings).unwrap();
    let b = Diff::side(&Analyzed::new(&run), &settings).unwrap();
    let DiffOutput::Runs(want) =
        Diff::compare("worker1", &a, "strato view", &b, &settings).unwrap()
    else {
        panic!("a diff of runs")
    };
    let got = api.diff().expect("diff");
    assert_eq!(got["window"], serde_json::to_value(&want.window).unwrap());
    assert_eq!(
        got["operations_total"].as_u64(),
        Some(want.operations.len() as u64)
    );
    let first = &got["operations"][0];
    assert_eq!(first["operation"], want.operations[0].operation.as_str());
    assert_eq!(
        first["delta_ns"].as_i64(),
        Some(want.operations[0].delta.delta_ns)
    );
    // Without a baseline there is none.
    assert_eq!(alone.diff().unwrap_err().status, 404);

    // Two ranks a side: rank by rank, the run's lanes then the baseline's.
    let api = Api::with_baseline(load(&files[..2]), load(&files[2..4]), "workers 2-3".into());
    let lanes = api.lanes();
    let mut order: Vec<u64> = lanes["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["rank_index"].as_u64().unwrap())
        .collect();
    order.dedup();
    assert_eq!(order, [0, 2, 1, 3]);
}

#[test]
fn a_graph_launch_lists_what_it_replayed_and_the_capture_sits_under_its_thread() {
    use strato_analysis::cross_stack::graphs::attribute_graphs;
    let dir = shared("kineto/tracelens");
    let replay = load(&[dir.join("vllm_decode_full_graph_execution.json.gz")]);
    let capture = load(&[dir.join("vllm_decode_full_graph_capture_rank_0.pt.trace.json.gz")]);
    let (trace, coverage) = attribute_graphs(replay.clone(), &capture, "capture").expect("graphs");
    // One launch replayed 421 device ops (docs/analyses/graphs.md); the trace's 13 others
    // (device-to-device copies) were launched by their own calls.
    assert_eq!(
        (coverage.graph_kernels, coverage.graph_kernels_mapped),
        (421, 421)
    );
    let launch_of = |api: &Api| -> Value {
        let found = api
            .search(&params(&[
                ("q", "GraphLaunch".into()),
                ("from", "0".into()),
                ("dir", "next".into()),
            ]))
            .expect("search");
        let id = found["found"]["id"].as_u64().expect("a graph launch");
        api.event(&id.to_string()).expect("event")
    };
    for (api, attributed) in [(Api::new(trace), true), (Api::new(replay), false)] {
        // Every op the launch replayed, attributed to its capture or not.
        let launch = launch_of(&api);
        assert_eq!(
            launch["replayed_total"].as_u64(),
            Some(coverage.graph_kernels as u64),
            "attributed: {attributed}"
        );
        let replayed = launch["replayed"].as_array().unwrap();
        assert_eq!(
            replayed.len(),
            coverage.graph_kernels.min(strato_view::api::REPLAYED_LIMIT)
        );
        assert!(replayed
            .windows(2)
            .all(|w| w[0]["start_ns"].as_i64() <= w[1]["start_ns"].as_i64()));
        let lanes = api.lanes();
        let all = lanes["lanes"].as_array().unwrap();
        for op in replayed {
            let lane = all.iter().find(|l| l["id"] == op["lane"]).unwrap();
            assert_eq!(lane["kind"], "device");
        }
        if attributed {
            // A mapped op's details lead to its captured launch on the graph-capture lane,
            // which comes after the process's own threads.
            let op = api
                .event(&replayed[0]["id"].to_string())
                .expect("replayed op");
            let from = op["flows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["category"] == "graph_node")
                .expect("a graph_node flow")["from"]["lane"]
                .clone();
            let at = |id: &Value| all.iter().position(|l| &l["id"] == id).unwrap();
            let capture_lane = &all[at(&from)];
            assert!(capture_lane["name"]
                .as_str()
                .unwrap()
                .starts_with("graph capture"));
            let own_thread = all
                .iter()
                .position(|l| l["kind"] == "thread" && l["group"] == capture_lane["group"])
                .unwrap();
            assert!(own_thread < at(&from), "the capture lane under the thread");
        }
    }
}

#[test]
fn a_baseline_without_a_common_step_lines_up_its_first_step_or_its_first_event() {
    use strato_trace::testing::TraceBuilder;
    use strato_view::api::align_baseline;
    // Steps numbered from `first`, 1,000 ns apart from `at`; no step at all when `first` is
    // None (the first event then starts at `at`).
    let run_of = |first: Option<u64>, at: i64| {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        for k in 0..3 {
            let t = at + 1_000 * k;
            if let Some(n) = first {
                b.span(
                    cpu,
                    Level::Operation,
                    &format!("ProfilerStep#{}", n + k as u64),
                    t,
                    t + 900,
                );
            }
            b.span(cpu, Level::Backend, "aten::mm", t + 10, t + 500);
        }
        b.build()
    };
    let of = |a: strato_view::api::Alignment| (a.first_shift(), a.first_step, a.steps);
    // Step numbers in common (6 and 7): each starts together.
    let a = align_baseline(&run_of(Some(5), 0), &run_of(Some(6), 7_000));
    assert_eq!(of(a), (-6_000, Some(6), 2));
    // None in common: the steps paired in order.
    let a = align_baseline(&run_of(Some(1), 0), &run_of(Some(100), 7_000));
    let how = a.aligned_on.clone();
    assert_eq!(of(a), (-7_000, None, 3));
    assert!(
        how.contains("ProfilerStep#1") && how.contains("ProfilerStep#100"),
        "{how}"
    );
    // A run without steps: the first events start together.
    let a = align_baseline(&run_of(None, 0), &run_of(Some(3), 7_000));
    // The run's first event (aten::mm) at 10, the baseline's (its first step) at 7,000.
    assert_eq!(of(a), (10 - 7_000, None, 0));
    // Viewed: the baseline's first step starts where the run's does.
    let api = Api::with_baseline(run_of(Some(1), 0), run_of(Some(100), 7_000), "b".into());
    let steps = strato_analysis::paths::critical_path::rank_steps(api.trace());
    assert_eq!(steps[0][&1].0, steps[1][&100].0);
}

#[test]
fn each_step_of_a_slower_baseline_starts_with_the_run_s_and_keeps_its_durations() {
    use strato_analysis::paths::critical_path::rank_steps;
    use strato_trace::testing::TraceBuilder;
    // Three steps numbered 1-3, `every` ns apart from `at`, each `long` ns, with a launch 10 ns in
    // and the kernel it launches (same correlation) 50 ns in.
    let run_of = |at: i64, every: i64, long: i64| {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        for k in 0..3 {
            let t = at + every * k;
            b.span(
                cpu,
                Level::Operation,
                &format!("ProfilerStep#{}", k + 1),
                t,
                t + long,
            );
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                t + 10,
                t + long / 2,
            )
            .correlation(100 + k as u64);
            b.span(gpu, Level::DeviceKernel, "gemm", t + 50, t + long - 5)
                .correlation(100 + k as u64);
        }
        b.build()
    };
    // The run: steps of 900 ns every 1,000 ns. The baseline: 1,400 ns every 1,500, 7 us later.
    let (run, base) = (run_of(0, 1_000, 900), run_of(7_000, 1_500, 1_400));
    let a = strato_view::api::align_baseline(&run, &base);
    assert_eq!(a.steps, 3);
    assert_eq!(a.shift_range(), (-8_000, -7_000));
    let api = Api::with_baseline(run.clone(), base.clone(), "slower".into());
    // Every step starts together.
    let steps = rank_steps(api.trace());
    for n in 1..=3 {
        assert_eq!(steps[0][&n].0, steps[1][&n].0, "step {n}");
    }
    // Each baseline event keeps its duration and its place in its step; its details say how
    // far it moved (from its recorded start).
    let first = run.spans.len();
    for (i, recorded) in base.spans.iter().enumerate() {
        let shown = &api.trace().spans[first + i];
        assert_eq!(shown.duration(), recorded.duration());
        let step = (recorded.start - 7_000) / 1_500;
        assert_eq!(shown.start, recorded.start - 7_000 - 500 * step, "span {i}");
        let details = api.event(&(first + i).to_string()).expect("details");
        assert_eq!(
            details["clock_shift_ns"].as_i64(),
            Some(shown.start - recorded.start)
        );
        assert_eq!(
            details["aligned_shift_ns"].as_i64(),
            Some(shown.start - recorded.start)
        );
    }
    // The run's events did not move and say nothing of an alignment.
    let details = api.event("0").expect("details");
    assert!(details.get("aligned_shift_ns").is_none());
    let lanes = api.lanes();
    assert_eq!(lanes["baseline"]["steps_aligned"], 3);
    assert_eq!(
        lanes["baseline"]["shift_range_ns"],
        serde_json::json!([-8_000, -7_000])
    );
    // The whole view shows every span once.
    assert_eq!(spans_shown(&api), run.spans.len() + base.spans.len());
}

#[test]
fn two_ranks_of_a_real_job_line_up_step_by_step() {
    use strato_analysis::paths::critical_path::rank_steps;
    // HTA's sampled job: rank 0 as the run, rank 1 as the baseline (steps 551 and 552).
    let (test, base) = (
        load(&[shared("kineto/hta_trace_filter/sampled_rank-0.json.gz")]),
        load(&[shared("kineto/hta_trace_filter/sampled_rank-1.json.gz")]),
    );
    let api = Api::with_baseline(test.clone(), base.clone(), "rank 1".into());
    let steps = rank_steps(api.trace());
    let common: Vec<u64> = (steps[0].keys())
        .filter(|n| steps[1].contains_key(n))
        .copied()
        .collect();
    assert_eq!(common, [551, 552]);
    let lanes = api.lanes();
    assert_eq!(lanes["baseline"]["steps_aligned"], 2);
    // The runs' first steps last differently: one shift could not line up both.
    let range = &lanes["baseline"]["shift_range_ns"];
    assert_ne!(range[0], range[1], "{range}");
    for n in &common {
        assert_eq!(steps[0][n].0, steps[1][n].0, "ProfilerStep#{n}");
    }
    // Each baseline span keeps its duration; its details give its move from its recording.
    let first = test.spans.len();
    for (i, recorded) in base.spans.iter().enumerate().step_by(97) {
        let shown = &api.trace().spans[first + i];
        assert_eq!(shown.duration(), recorded.duration(), "span {i}");
        let details = api.event(&(first + i).to_string()).expect("details");
        assert_eq!(
            details["clock_shift_ns"].as_i64().unwrap_or(0),
            shown.start - recorded.start,
            "span {i}"
        );
    }
}

/// The spans the whole view shows, exact or counted in buckets (each once).
fn spans_shown(api: &Api) -> usize {
    let end = api.lanes()["end_ns"].as_i64().expect("end");
    let answer = api
        .range(&params(&[
            ("t0", "0".into()),
            ("t1", (end + 1).to_string()),
        ]))
        .expect("range");
    let shown: u64 = answer["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .flat_map(|l| l["rows"].as_array().expect("rows"))
        .map(|r| {
            r["events"].as_array().expect("events").len() as u64
                + r["buckets"]
                    .as_array()
                    .map_or(0, |b| b.iter().filter_map(|x| x[1].as_u64()).sum())
        })
        .sum();
    shown as usize
}
