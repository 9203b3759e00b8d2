//! Issue 28, "wrong answers without a word": device work under categories we do not know,
//! sums of long durations, HTA's window on ROCm traces, advice that contradicts the other
//! analyses. Small Kineto files written by each test (the answer known by construction) and the
//! real traces of `../shared/data`, run through the built `strato` binary as a user would.

use std::path::{Path, PathBuf};

use crate::common::{data, json_ok, kineto_file, run, s};

/// An MTIA-style trace: a runtime call and three device events of `cat` on device 0, stream 5
/// (`args.device` + `args.stream`), 10 us each, 10 us apart.
fn accelerator_trace(dir: &Path, cat: &str) -> PathBuf {
    let mut events = vec![
        r#"{"ph":"X","cat":"mtia_runtime","name":"runFunction - job_prep_and_submit_for_execution","pid":10,"tid":11,"ts":0,"dur":5,"args":{"correlation":1}}"#.to_owned(),
    ];
    for k in 0..3 {
        events.push(format!(
            r#"{{"ph":"X","cat":"{cat}","name":"fc_{k}","pid":1,"tid":5,"ts":{},"dur":10,"args":{{"device":0,"stream":5,"correlation":{}}}}}"#,
            10 + 20 * k,
            1 + k
        ));
    }
    kineto_file(dir, &format!("{cat}.json"), &events)
}

#[test]
fn mtia_device_events_are_device_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = accelerator_trace(dir.path(), "mtia_ccp_events");
    let (report, _) = json_ok(&["gpu-time", s(&path), "--json"]);
    let r = &report["ranks"][0];
    // Three 10 us events over [10, 60) us: 30 us busy, 20 us idle, by construction.
    assert_eq!(r["device_events"], 3);
    assert_eq!(r["kernel_time_us"].as_f64(), Some(50.0));
    assert_eq!(r["idle_us"].as_f64(), Some(20.0));
    assert!(r["note"].is_null(), "{r}");
    assert!(r.get("warning").is_none(), "{r}");
}

#[test]
fn unknown_device_categories_are_counted_and_never_called_idle() {
    let dir = tempfile::tempdir().unwrap();
    let path = accelerator_trace(dir.path(), "npu_task");
    let (code, out, err) = run(&["gpu-time", s(&path)]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("idle throughout"), "{out}");
    assert!(out.contains("unknown, not idle"), "{out}");
    assert!(
        out.contains(
            "warning: 3 events that look like device work were left unclassified (npu_task 3)"
        ),
        "{out}"
    );
    let (report, _) = json_ok(&["gpu-time", s(&path), "--json"]);
    let r = &report["ranks"][0];
    assert_eq!(r["device_events"], 0);
    assert_eq!(r["unclassified_device_like_events"]["npu_task"], 3);
    assert!(r["warning"].as_str().unwrap().contains("--level-map"));
    // `info` lists the count as a warning (3 of 4 events, and it would at any share).
    let (code, info, _) = run(&["info", s(&path)]);
    assert_eq!(code, 0);
    let line = info
        .lines()
        .find(|l| l.contains("unclassified_device_like_events:npu_task"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(line.contains('3') && line.contains("[warning]"), "{line}");
    // Naming the category makes it device work, and the warning goes.
    let map = dir.path().join("map.json");
    std::fs::write(
        &map,
        r#"[{"format":"kineto","category":"npu_task","level":"DeviceKernel"}]"#,
    )
    .unwrap();
    let (report, _) = json_ok(&["--level-map", s(&map), "gpu-time", s(&path), "--json"]);
    let r = &report["ranks"][0];
    assert_eq!(
        (r["device_events"].as_u64(), r["idle_us"].as_f64()),
        (Some(3), Some(20.0))
    );
    assert!(r.get("warning").is_none(), "{r}");
}

#[test]
fn an_unknown_category_at_a_device_queue_is_device_like() {
    // No stream arg, but placed at a (pid, tid) that is already a device queue, beside a
    // kernel: counted too; and host events of unknown categories are not.
    let dir = tempfile::tempdir().unwrap();
    let path = kineto_file(
        dir.path(),
        "placed.json",
        &[
            r#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"device":0,"stream":7}}"#.into(),
            r#"{"ph":"X","cat":"dsp_op","name":"d","pid":0,"tid":7,"ts":5,"dur":1}"#.into(),
            r#"{"ph":"X","cat":"my_host_thing","name":"h","pid":42,"tid":42,"ts":5,"dur":1}"#.into(),
        ],
    );
    let (report, _) = json_ok(&["gpu-time", s(&path), "--json"]);
    let r = &report["ranks"][0];
    assert_eq!(r["device_events"], 1);
    assert_eq!(
        r["unclassified_device_like_events"],
        serde_json::json!({"dsp_op": 1})
    );
}

/// A trace of spans of about 2^62 ns (146 years): valid (inside +-4e18 ns) but their sum
/// passes `i64`. Two kernels of 4.6e18 ns on two streams, one launch each, one short kernel.
fn long_spans(dir: &Path) -> PathBuf {
    // 2^62 ns = 4611686018427387.904 us; starts at -2e18 ns so ends stay in range.
    let long = "4611686018427387.904";
    let events = [
        format!(
            r#"{{"ph":"X","cat":"kernel","name":"long_a","pid":0,"tid":7,"ts":-2000000000000000,"dur":{long},"args":{{"device":0,"stream":7,"correlation":1}}}}"#
        ),
        format!(
            r#"{{"ph":"X","cat":"kernel","name":"long_b","pid":0,"tid":8,"ts":-2000000000000000,"dur":{long},"args":{{"device":0,"stream":8,"correlation":2}}}}"#
        ),
        r#"{"ph":"X","cat":"kernel","name":"short","pid":0,"tid":7,"ts":0,"dur":1,"args":{"device":0,"stream":9,"correlation":3}}"#.to_owned(),
        r#"{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":-2000000000000001,"dur":0.5,"args":{"correlation":1}}"#.to_owned(),
        r#"{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":-2000000000000001,"dur":0.5,"args":{"correlation":2}}"#.to_owned(),
    ];
    kineto_file(dir, "long.json", &events)
}

#[test]
fn sums_of_long_spans_never_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let path = long_spans(dir.path());
    let p = s(&path);
    let long: i128 = 1 << 62;
    // kernels: the exact device time passes i64: the total saturates, never goes negative,
    // and the shares (from the exact sums) still add up to 1.
    let (k, _) = json_ok(&["kernels", p, "--json", "--top", "0"]);
    let r = &k["ranks"][0];
    assert_eq!(r["device_time_ns"].as_i64(), Some(i64::MAX), "{r}");
    let rows = r["kernels"].as_array().unwrap();
    let a = rows.iter().find(|k| k["name"] == "long_a").unwrap();
    assert_eq!(a["total_ns"].as_i64().map(i128::from), Some(long));
    let share: f64 = rows.iter().map(|k| k["share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 1e-9, "{share}");
    assert!((a["share"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    let (code, text, err) = run(&["kernels", p]);
    assert_eq!(code, 0, "{err}");
    // No negative number anywhere (`->` in the legend is not one).
    let negative = |w: &str| {
        w.strip_prefix('-')
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    };
    assert!(!text.split_whitespace().any(negative), "{text}");
    // gpu-time: the union is 2^62 ns, so nothing is idle.
    let (g, _) = json_ok(&["gpu-time", p, "--json"]);
    let r = &g["ranks"][0];
    assert!(r["idle_us"].as_f64().unwrap() >= 0.0);
    assert!(r["kernel_time_us"].as_f64().unwrap() > 4.6e15);
    // util: bounded in time and memory over a 146-year window.
    let (u, _) = json_ok(&["util", p, "--json"]);
    let d = &u["devices"][0];
    let sampled = d["sampled"].as_array().unwrap();
    assert!(sampled
        .iter()
        .all(|x| x["sampled_pct"].as_f64().unwrap() <= 100.0 + 1e-9));
    assert!(d["true_busy_pct"].as_f64().unwrap() > 99.0);
    // advise: every rule runs over the long spans without a wrapped or overflowing sum.
    let (code, out, err) = run(&["advise", p, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("_ns\":-"), "{out}");
    // report: written, no abort.
    let html = dir.path().join("long.html");
    let (code, _, err) = run(&["report", p, "-o", s(&html)]);
    assert_eq!(code, 0, "{err}");
    assert!(html.exists());
    // The shipped SQL analysis: the same totals, never negative.
    let (code, out, err) = run(&["sql", "--analysis", "kernel_stats", p, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("\"total_ns\":-"), "{out}");
}

/// HTA 0.5.0 (`holistictraceanalysis`, pandas 2.1) run on the ROCm Kineto traces: its
/// temporal breakdown. ROCm traces carry a GPU-side copy of each `ProfilerStep#N`
/// (`gpu_user_annotation`, no stream arg), which HTA counts among its CPU events: its cut-off
/// is the later of the two starts.
#[test]
fn hta_window_matches_hta_on_rocm_traces() {
    let expected = [
        // (file, kernel_time_us, idle %, compute %, non-compute %, comm/comp overlap %)
        (
            "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz",
            56517.0,
            2.73,
            30.11,
            67.16,
            Some(22.45),
        ),
        (
            "kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz",
            6868.0,
            77.24,
            22.76,
            0.0,
            None,
        ),
    ];
    for (file, kernel_us, idle, compute, non_compute, overlap) in expected {
        let (report, _) = json_ok(&["gpu-time", s(&data(file)), "--window", "hta", "--json"]);
        let r = &report["ranks"][0];
        assert_eq!(r["kernel_time_us"].as_f64(), Some(kernel_us), "{file}");
        for (key, want) in [
            ("idle_pct", idle),
            ("compute_pct", compute),
            ("non_compute_pct", non_compute),
        ] {
            let got = r[key].as_f64().unwrap();
            assert!(
                (got - want).abs() < 0.005,
                "{file} {key}: {got} vs HTA {want}"
            );
        }
        match overlap {
            Some(o) => {
                let got = r["comm_comp_overlap_pct"].as_f64().unwrap();
                assert!((got - o).abs() < 0.005, "{file} overlap: {got} vs HTA {o}");
            }
            None => assert!(r["comm_comp_overlap_pct"].is_null(), "{file}"),
        }
    }
    // HTA keeps 2,685 device events of the ResNet trace (1,790 with the CPU step's cut-off).
    let (report, _) = json_ok(&[
        "gpu-time",
        s(&data(
            "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz",
        )),
        "--window",
        "hta",
        "--json",
    ]);
    assert_eq!(report["ranks"][0]["device_events"], 2685);
}
