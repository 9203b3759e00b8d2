//! Hostile configuration files, paths and inputs outside SQL (issue 28): each case a user met
//! (or could meet) is one clear error line naming the file, exit 2, fast — never a spin, an
//! unbounded read, a silent acceptance, a traceback, a stack overflow or an input destroyed by
//! an output written over it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{data, run, s, shared_data, strato_command, strato_env, text};

/// A small real Kineto trace (2 ranks of an HTA test job; fixtures/README.md).
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/kineto/hta_trace_filter/sampled_rank-0.json.gz")
}

/// `strato args` must fail with exit 2 and one stderr line holding every one of `needles`,
/// within `limit`; returns that line.
fn refused_within(args: &[&str], needles: &[&str], limit: Duration) -> String {
    let started = Instant::now();
    let (code, _, err) = run(args);
    let took = started.elapsed();
    assert_eq!(code, 2, "strato {args:?}: exit {code}, stderr {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "strato {args:?}: not one line: {err}"
    );
    for needle in needles {
        assert!(
            err.contains(needle),
            "strato {args:?}: {needle:?} not in {err}"
        );
    }
    assert!(took < limit, "strato {args:?} took {took:?}");
    err
}

fn refused(args: &[&str], needles: &[&str]) -> String {
    refused_within(args, needles, Duration::from_secs(60))
}

#[test]
fn config_files_are_read_with_a_size_limit() {
    let trace = fixture();
    // Each read 3 GB (and more) before: now 1 MiB at most, in well under a second.
    let quick = Duration::from_secs(20);
    for args in [
        vec!["advise", s(&trace), "--rules", "/dev/zero"],
        vec!["ops", s(&trace), "--device-spec", "/dev/zero"],
        vec!["info", s(&trace), "--level-map", "/dev/zero"],
    ] {
        refused_within(
            &args,
            &["/dev/zero: ", "larger than the limit of 1 MiB"],
            quick,
        );
    }
    // A regular file one byte over the limit is refused the same way; a directory too.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("rules.toml");
    let mut text = "# padding\n".repeat((1 << 20) / 10);
    text.push_str("floor_pct = 1\n");
    std::fs::write(&big, &text).unwrap();
    assert!(text.len() > 1 << 20);
    refused(
        &["advise", s(&trace), "--rules", s(&big)],
        &[s(&big), "the rules file is larger than the limit of 1 MiB"],
    );
    refused(
        &["ops", s(&trace), "--device-spec", s(dir.path())],
        &[s(dir.path()), "is a directory, not the device spec"],
    );
}

#[test]
fn rule_parameters_outside_their_ranges_are_refused() {
    let trace = fixture();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // This one made `advise` spin for ever.
        (
            "[low_util]\nchunks = 9223372036854775807\n",
            "low_util.chunks must be in [1, 100000], got 9223372036854775807",
        ),
        (
            "[low_util]\nchunks = 0\n",
            "low_util.chunks must be in [1, 100000]",
        ),
        (
            "[gpu_idle]\nmin_gap_us = 1e300\n",
            "gpu_idle.min_gap_us must be a duration in [0, 86400000000] us",
        ),
        (
            "[small_copies]\nmax_bytes = 9223372036854775807\n",
            "small_copies.max_bytes must be in [0, 1099511627776]",
        ),
        (
            "[launch_bound]\nmin_kernels = 9223372036854775807\n",
            "launch_bound.min_kernels must be at most 1000000000",
        ),
        (
            "floor_pct = nan\n",
            "floor_pct must be a percentage in [0, 100]",
        ),
        ("[low_util]\nchunkz = 3\n", "unknown field `chunkz`"),
    ];
    for (k, (toml, message)) in cases.iter().enumerate() {
        let rules = dir.path().join(format!("rules-{k}.toml"));
        std::fs::write(&rules, toml).unwrap();
        refused_within(
            &["advise", s(&trace), "--rules", s(&rules)],
            &[s(&rules), message],
            Duration::from_secs(20),
        );
    }
    // The largest chunk count accepted runs, and the rule reports on that many chunks.
    let rules = dir.path().join("max.toml");
    std::fs::write(&rules, "all = true\n[low_util]\nchunks = 100000\n").unwrap();
    let (code, out, err) = run(&["advise", s(&trace), "--rules", s(&rules)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Rules:"), "{out}");
}

#[test]
fn device_specs_refuse_unknown_fields_and_implausible_peaks() {
    let trace = fixture();
    let dir = tempfile::tempdir().unwrap();
    let spec = |name: &str, json: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, json).unwrap();
        path
    };
    let misspelt = spec(
        "misspelt.json",
        r#"{"name":"lab","memory_bandwidth_gbs":2000,"bf16_tflops":300}"#,
    );
    refused(
        &["ops", s(&trace), "--device-spec", s(&misspelt)],
        &[
            s(&misspelt),
            "unknown field `bf16_tflops`",
            "`bf16_tensor_tflops`",
        ],
    );
    for (name, field, value) in [
        ("tiny.json", "fp32_tflops", "5e-324"),
        ("huge.json", "fp32_tflops", "1e308"),
        ("bw.json", "memory_bandwidth_gbs", "1e-9"),
    ] {
        let json = if field == "memory_bandwidth_gbs" {
            format!(r#"{{"name":"lab","memory_bandwidth_gbs":{value}}}"#)
        } else {
            format!(r#"{{"name":"lab","memory_bandwidth_gbs":2000,"{field}":{value}}}"#)
        };
        let path = spec(name, &json);
        refused(
            &["ops", s(&trace), "--device-spec", s(&path)],
            &[s(&path), &format!("{field} must be a number in [")],
        );
    }
    // A plausible spec is used: "% of peak" is the op's rate over the given peak (compute or
    // memory, whichever bounds it), so halving both peaks (same ridge point, same bounds)
    // doubles every op's share: a known ratio. The real H100 trace's modelled ops are bf16.
    let Some(_) = shared_data() else {
        eprintln!("skipped the plausible-spec half: no ../shared/data");
        return;
    };
    let h100 = data("kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz");
    let peak_pct = |scale: f64| -> Vec<f64> {
        let path = spec(
            &format!("ok-{scale}.json"),
            &format!(
                r#"{{"name":"lab","memory_bandwidth_gbs":{},"bf16_tensor_tflops":{}}}"#,
                2000.0 * scale,
                200.0 * scale
            ),
        );
        let (code, out, err) = run(&["ops", s(&h100), "--device-spec", s(&path), "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["precision"] == "bf16")
            .filter_map(|o| o["peak_pct"].as_f64())
            .collect()
    };
    let (full, half) = (peak_pct(1.0), peak_pct(0.5));
    assert!(!full.is_empty(), "no bf16 op with a peak share");
    assert_eq!(full.len(), half.len());
    for (a, b) in full.iter().zip(&half) {
        assert!((b - 2.0 * a).abs() <= 1e-9 * b.abs().max(1.0), "{a} vs {b}");
    }
}

#[test]
fn a_graph_capture_that_is_no_trace_or_a_directory_is_an_error() {
    let trace = fixture();
    let captures = tempfile::tempdir().unwrap();
    let garbage = captures.path().join("capture.json");
    std::fs::write(&garbage, b"\x00\x01 this is not a trace \xff").unwrap();
    let folder = captures.path().join("capture.d");
    std::fs::create_dir(&folder).unwrap();
    // `info` and `import` stream a single file: they ignored the option (exit 0) before.
    let out = tempfile::tempdir().unwrap();
    let prof = out.path().join("prof");
    for args in [
        vec!["info", s(&trace)],
        vec!["import", s(&trace), "-o", s(&prof)],
        vec!["hierarchy", s(&trace)],
    ] {
        let mut with = args.clone();
        with.extend(["--graph-capture", s(&garbage)]);
        refused(&with, &[s(&garbage), "unknown format"]);
        let mut with = args.clone();
        with.extend(["--graph-capture", s(&folder)]);
        refused(&with, &[s(&folder), "is a directory"]);
    }
    assert!(
        !prof.exists(),
        "no profile is written from a refused import"
    );
}

#[test]
fn record_without_the_python_package_is_one_line() {
    // An interpreter that cannot see any installed package (-I: no PYTHONPATH, no user site;
    // -S: no site-packages): the package is missing whatever this machine has installed.
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python3");
    std::fs::write(&python, "#!/bin/sh\nexec python3 -I -S \"$@\"\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prof = dir.path().join("prof");
    let out = strato_env(
        &["record", "-o", s(&prof), "--", s(&python), "-c", "pass"],
        &[("STRATOSCOPE_PYTHON", s(&python))],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("Traceback"), "{err}");
    assert!(
        err.contains("the stratoscope Python package is not importable by"),
        "{err}"
    );
}

/// `perf script` text of one CPU sample whose call stack is `frames` deep (leaf first, as perf
/// prints it), then a shallow one.
fn deep_perf_script(frames: usize) -> String {
    let mut text = String::from("python3 4242 50918.865799:    2004008 cpu-clock:ppp: \n");
    for i in 0..frames {
        text.push_str(&format!(
            "\t          {:x} recurse_{}+0x1d (/usr/lib/libdeep.so)\n",
            0x1000 + i,
            i % 7
        ));
    }
    text.push('\n');
    text.push_str("python3 4242 50918.875882:    2004008 cpu-clock:ppp: \n");
    text.push_str("\t           c4190 main+0x0 (/usr/bin/python3)\n\n");
    text
}

#[test]
fn a_100000_frame_stack_is_reported_not_a_stack_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("deep.perf-script.txt");
    std::fs::write(&input, deep_perf_script(100_000)).unwrap();
    let html = dir.path().join("deep.html");
    let (code, out, err) = run(&["report", s(&input), "-o", s(&html)]);
    assert_eq!(code, 0, "exit {code} (134 is the stack overflow): {err}");
    assert!(out.starts_with("wrote "), "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    // The flame graph is drawn, its outermost frame first (perf prints the leaf first).
    assert!(page.contains("recurse_"), "no deep frame in the report");
    // The folded export keeps the whole stack: both samples, the deep one with every frame.
    let folded = dir.path().join("deep.folded");
    let (code, _, err) = run(&["export", s(&input), "--folded", s(&folded)]);
    assert_eq!(code, 0, "{err}");
    let lines = std::fs::read_to_string(&folded).unwrap();
    let deepest = lines
        .lines()
        .map(|l| l.matches("recurse_").count())
        .max()
        .unwrap_or(0);
    assert_eq!(deepest, 100_000);
}

/// Runs `strato args`; it must refuse with "OUT: is an input of this command" (or "is inside
/// INPUT") and leave `guarded` byte for byte as it was.
fn refuses_to_overwrite(args: &[&str], out: &Path, guarded: &Path) {
    let before = snapshot(guarded);
    let err = refused(args, &[s(out)]);
    assert!(
        err.contains("is an input of this command (would overwrite it)")
            || err.contains(", an input of this command (would change it)"),
        "{err}"
    );
    assert_eq!(
        snapshot(guarded),
        before,
        "strato {args:?} changed {}",
        guarded.display()
    );
}

/// Every file under `path` (or the file itself) with its bytes, sorted.
fn snapshot(path: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    if path.is_file() {
        return vec![(path.to_path_buf(), std::fs::read(path).unwrap())];
    }
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(path)
        .unwrap()
        .flatten()
        .flat_map(|e| snapshot(&e.path()))
        .collect();
    files.sort();
    files
}

#[test]
fn an_output_may_not_be_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json.gz");
    std::fs::copy(fixture(), &input).unwrap();
    let i = s(&input);
    refuses_to_overwrite(&["report", i, "-o", i], &input, &input);
    refuses_to_overwrite(&["export", i, "--chrome", i], &input, &input);
    let elsewhere = dir.path().join("x.pftrace");
    refuses_to_overwrite(
        &["export", i, "--perfetto", s(&elsewhere), "--folded", i],
        &input,
        &input,
    );
    assert!(
        !elsewhere.exists(),
        "nothing is written when one output is refused"
    );
    refuses_to_overwrite(&["critical-path", i, "--overlay", i], &input, &input);
    // Through a symlink, and as the baseline of a report.
    let link = dir.path().join("link.json.gz");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    refuses_to_overwrite(&["report", i, "-o", s(&link)], &link, &input);
    let other = dir.path().join("other.json.gz");
    std::fs::copy(fixture(), &other).unwrap();
    refuses_to_overwrite(
        &["report", s(&other), "--baseline", i, "-o", i],
        &input,
        &input,
    );
    // The global inputs are inputs too.
    let levels = dir.path().join("levels.json");
    std::fs::write(&levels, "[]").unwrap();
    refuses_to_overwrite(
        &[
            "--level-map",
            s(&levels),
            "export",
            i,
            "--chrome",
            s(&levels),
        ],
        &levels,
        &levels,
    );
    // `-o /dev/stdout` while stdout is the input file.
    let before = snapshot(&input);
    let append = std::fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .unwrap();
    let done = strato_command()
        .args(["export", i, "--chrome", "/dev/stdout"])
        .stdout(append)
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(2), "{}", text(&done.stderr));
    assert!(text(&done.stderr).contains("is an input of this command"));
    assert_eq!(snapshot(&input), before);

    // Writing elsewhere (and to a character device) still works.
    let html = dir.path().join("out.html");
    let (code, _, err) = run(&["report", i, "-o", s(&html)]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&["export", i, "--chrome", "/dev/null"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn an_output_may_not_go_inside_an_input_directory() {
    let dir = tempfile::tempdir().unwrap();
    // A directory of rank files: a report or a profile written into it would change it.
    let ranks = dir.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    std::fs::copy(fixture(), ranks.join("rank-0.json.gz")).unwrap();
    let r = s(&ranks);
    let inside = ranks.join("report.html");
    refuses_to_overwrite(&["report", r, "-o", s(&inside)], &inside, &ranks);
    refuses_to_overwrite(&["import", r, "-o", r], &ranks, &ranks);
    let sub = ranks.join("prof");
    refuses_to_overwrite(&["import", r, "-o", s(&sub)], &sub, &ranks);
    // A profile: importing into itself, or `sql -o PROFILE/spans.parquet`.
    let prof = dir.path().join("prof");
    let (code, _, err) = run(&["import", s(&fixture()), "-o", s(&prof)]);
    assert_eq!(code, 0, "{err}");
    let p = s(&prof);
    refuses_to_overwrite(&["import", p, "-o", p], &prof, &prof);
    let spans = prof.join("spans.parquet");
    if cfg!(feature = "sql") {
        refuses_to_overwrite(
            &[
                "sql",
                "--format",
                "parquet",
                "-o",
                s(&spans),
                "SELECT * FROM spans LIMIT 1",
                p,
            ],
            &spans,
            &prof,
        );
    }
    // Through a relative path with `..`: the same directory.
    let dotted = prof.join("..").join("prof").join("x.html");
    refuses_to_overwrite(&["report", p, "-o", s(&dotted)], &dotted, &prof);
    // Beside the profile is fine.
    let (code, _, err) = run(&["report", p, "-o", s(&dir.path().join("r.html"))]);
    assert_eq!(code, 0, "{err}");
    // `measure --log` over its own candidate list, refused before anything runs.
    let list = dir.path().join("candidates.json");
    std::fs::write(&list, b"[]").unwrap();
    let l = s(&list);
    refuses_to_overwrite(&["measure", l, "--log", l], &list, &list);
}

/// Ranks that claim what cannot all be true are taken with a warning naming the claim, never
/// silently: a negative job rank (dropped), a rank past its world size, and two jobs' ranks
/// (different world sizes) imported together.
#[test]
fn contradictory_rank_claims_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, rank: i64, world: i64| {
        let path = dir.path().join(name);
        let doc = format!(
            r#"{{"schemaVersion":1,"distributedInfo":{{"rank":{rank},"world_size":{world}}},"traceEvents":[
            {{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":100,"dur":10,"args":{{"device":0,"stream":7}}}}]}}"#
        );
        std::fs::write(&path, doc).unwrap();
        path
    };
    let negative = file("neg.json", -1, 2);
    let past = file("past.json", 5, 2);
    let other_job = file("other.json", 1, 8);
    let (code, out, err) = run(&["info", s(&negative), s(&past), s(&other_job)]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "job rank -1 is negative",
        "job rank 5 is not below the world size 2",
        "the sources disagree on the world size: 2 (2 sources), 8 (1 source)",
    ] {
        assert!(err.contains(needle), "{needle:?} not warned: {err}");
        assert!(
            out.contains(needle),
            "{needle:?} not in info's notes: {out}"
        );
    }
}

/// Ranks that report different sizes for one collective: said in the text and the JSON, and
/// the Python shape follows the CLI's (the field only when they disagree).
#[test]
fn ranks_disagreeing_on_a_collectives_size_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    for (rank, second) in [(0, 1_048_576_u64), (1, 2_097_152)] {
        let events: Vec<String> = [1_048_576_u64, second]
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    r#"{{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":20,"ts":{},"dur":50,"args":{{"device":0,"stream":20,"Collective name":"allreduce","In msg nelems":{n},"dtype":"Float","Group size":2}}}}"#,
                    100 * (i + 1)
                )
            })
            .collect();
        let doc = format!(
            r#"{{"schemaVersion":1,"distributedInfo":{{"rank":{rank},"world_size":2}},"traceEvents":[{}]}}"#,
            events.join(",")
        );
        std::fs::write(dir.path().join(format!("r{rank}.json")), doc).unwrap();
    }
    let (code, out, err) = run(&["collectives", s(dir.path())]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("warning: in 1 collectives the ranks report different message sizes (first: all_reduce #1, 4194304 to 8388608 bytes)"),
        "{out}"
    );
    let (code, out, err) = run(&["collectives", s(dir.path()), "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let said: Vec<&serde_json::Value> = doc["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["bytes_disagree"])
        .collect();
    assert_eq!(
        said,
        [
            &serde_json::Value::Null,
            &serde_json::json!([4194304, 8388608])
        ]
    );
}
