//! `strato report`, `strato diff`, `strato completions` and the terminal rules, tested like a
//! user would: the report of every dev trace in `../shared/data` written and bounded in size,
//! a trace whose names hold markup rendered as text, the report opened in headless Chromium
//! (screenshot decoded and checked non-blank, no console errors, the DOM holds no injected
//! element), the diff of `hta_trace_compare/{base,test}`, completions and `--help` examples.
//!
//! The browser tests skip (saying so) when `/usr/bin/chromium` is absent; `scripts/setup.sh`
//! installs it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{ok, shared_data, strato_command};

const SIZE_BOUND: u64 = 2 * 1024 * 1024;
const CHROMIUM: &str = "/usr/bin/chromium";

/// Checks a report is self-contained: no script, nothing fetched from anywhere.
fn assert_self_contained(html: &str, what: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"), "{what}");
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"), "{what}: has a script");
    assert!(!lower.contains(" src=\""), "{what}: loads something");
    assert!(!lower.contains("url(http"), "{what}: loads something");
    assert!(!lower.contains("<link"), "{what}: links something");
    // The only absolute URL is the SVG namespace (an identifier, never fetched).
    let urls = lower.matches("http").count() - lower.matches("http-equiv").count();
    let ns = lower.matches("http://www.w3.org/2000/svg").count();
    assert_eq!(urls, ns, "{what}: references the network");
}

#[test]
fn report_of_every_dev_trace_is_self_contained_and_bounded() {
    let Some(data) = shared_data() else {
        eprintln!("skipped: ../shared/data is absent");
        return;
    };
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut stack = vec![data.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read dir") {
            let p = e.expect("entry").path();
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if p.is_dir() {
                stack.push(p);
            } else if [".json.gz", ".sqlite", ".csv", ".pb", ".pftrace"]
                .iter()
                .any(|x| name.ends_with(x))
            {
                inputs.push(p);
            }
        }
    }
    inputs.sort();
    // A directory of ranks too (multi-process sections).
    inputs.push(data.join("kineto/hta_trace_filter"));
    assert!(inputs.len() >= 10, "{inputs:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sizes = Vec::new();
    for input in &inputs {
        let out = dir.path().join("r.html");
        let input_s = input.to_string_lossy().into_owned();
        ok(&["report", &input_s, "-o", &out.to_string_lossy()]);
        let size = std::fs::metadata(&out).expect("report written").len();
        let html = std::fs::read_to_string(&out).expect("utf-8");
        assert_self_contained(&html, &input_s);
        assert!(size <= SIZE_BOUND, "{input_s}: {size} bytes > {SIZE_BOUND}");
        // Every section is there, with data or saying why not.
        for id in [
            "overview",
            "breakdown",
            "transitions",
            "processes",
            "utilization",
            "kernels",
            "roofline",
            "iterations",
            "memory",
            "distributed",
            "critical-path",
            "replay",
        ] {
            assert!(
                html.contains(&format!("<h2 id=\"{id}\">")),
                "{input_s}: section {id}"
            );
        }
        sizes.push((input_s, size));
    }
    for (input, size) in &sizes {
        eprintln!("{size:>9} bytes  {input}");
    }
    // Sections that have data in the known traces draw plots.
    let filter = std::fs::read_to_string(dir.path().join("r.html")).expect("last report");
    assert!(filter.contains("aria-label=\"processes side by side\""));
}

/// A Kineto trace whose operation and kernel names hold markup and quotes; the kernel pattern
/// repeats so iterations, kernels, utilization and transitions all have data.
/// The report's analyses run on two threads by default and on one with `--jobs 1`; the HTML
/// must be the same byte for byte (every analysis is a pure function of the trace), on a
/// single-process trace, a multi-rank job (collectives, the critical path across ranks, the
/// cross-rank advice) and a trace with steps.
#[test]
fn report_parallel_and_sequential_are_the_same() {
    let Some(data) = shared_data() else {
        eprintln!("skipped: ../shared/data is absent");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    for rel in [
        "kineto/param_dlrm8",
        "kineto/hta_nccl_data.json.gz",
        "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
        "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
    ] {
        let input = data.join(rel);
        let input = input.to_str().expect("utf-8 path");
        let two = dir.path().join("two.html");
        let one = dir.path().join("one.html");
        ok(&["report", input, "-o", two.to_str().expect("utf-8")]);
        ok(&[
            "report",
            input,
            "-o",
            one.to_str().expect("utf-8"),
            "--jobs",
            "1",
        ]);
        let (two, one) = (
            std::fs::read(&two).expect("read"),
            std::fs::read(&one).expect("read"),
        );
        assert!(two.len() > 10_000, "{rel}: a real report");
        assert!(two == one, "{rel}: two threads and one differ");
    }
}

fn evil_trace(dir: &Path) -> PathBuf {
    let mut events = Vec::new();
    let evil_kernel = "<script>alert(\"k\")</script>&'gemm'";
    let evil_op = "<img src=x onerror=alert(1)> \"step\"";
    let mut ts = 1000.0;
    for step in 0..6 {
        events.push(serde_json::json!({"ph":"X","cat":"user_annotation","name":evil_op,"pid":7,"tid":7,"ts":ts,"dur":90.0,"args":{}}));
        for k in 0..3 {
            let t = ts + 5.0 + 25.0 * k as f64;
            let corr = step * 10 + k + 1;
            events.push(serde_json::json!({"ph":"X","cat":"cpu_op","name":"aten::<mm>","pid":7,"tid":7,"ts":t,"dur":10.0,"args":{"External id":corr}}));
            events.push(serde_json::json!({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":7,"tid":7,"ts":t+1.0,"dur":5.0,"args":{"correlation":corr,"External id":corr}}));
            let name = if k == 1 {
                evil_kernel.to_owned()
            } else {
                format!("kernel_{k}")
            };
            events.push(serde_json::json!({"ph":"X","cat":"kernel","name":name,"pid":0,"tid":7,"ts":t+8.0,"dur":12.0,"args":{"correlation":corr,"device":0,"stream":7}}));
        }
        ts += 150.0;
    }
    let trace = serde_json::json!({"schemaVersion":1,"traceEvents":events});
    let path = dir.join("evil.json");
    std::fs::write(&path, serde_json::to_vec(&trace).expect("json")).expect("write");
    path
}

#[test]
fn names_with_markup_render_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = evil_trace(dir.path());
    let out = dir.path().join("evil.html");
    ok(&[
        "report",
        &trace.to_string_lossy(),
        "-o",
        &out.to_string_lossy(),
        "--title",
        "<b>t</b>",
    ]);
    let html = std::fs::read_to_string(&out).expect("report");
    assert_self_contained(&html, "evil");
    assert!(html.contains("&lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;&amp;&#39;gemm&#39;"));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt; &quot;step&quot;"));
    assert!(html.contains("&lt;b&gt;t&lt;/b&gt;"));
    assert!(!html.contains("<img"));
    assert!(!html.contains("<b>t"));
    // The sections with data drew their plots.
    for aria in [
        "kernel ranking of rank",
        "transitions per operation",
        "iteration timeline",
        "utilization reality check",
    ] {
        assert!(html.contains(aria), "{aria}");
    }
}

pub(crate) fn chromium() -> Option<&'static str> {
    if Path::new(CHROMIUM).exists() {
        Some(CHROMIUM)
    } else {
        eprintln!("skipped: {CHROMIUM} is absent (scripts/setup.sh installs Debian's chromium)");
        None
    }
}

/// Runs headless Chromium with `extra` args on `page`; returns (stdout, stderr).
fn run_chromium(bin: &str, profile: &Path, extra: &[&str], page: &Path) -> (String, String) {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(format!("file://{}", page.display()));
    let out = cmd.output().expect("run chromium");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Decodes an 8-bit RGB/RGBA PNG (what Chromium writes) into (width, height, RGBA pixels).
pub(crate) fn decode_png(bytes: &[u8]) -> (usize, usize, Vec<[u8; 4]>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let mut pos = 8;
    let (mut w, mut h, mut ctype) = (0usize, 0usize, 0u8);
    let mut idat = Vec::new();
    while pos + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().expect("len")) as usize;
        let kind = &bytes[pos + 4..pos + 8];
        let body = &bytes[pos + 8..pos + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(body[0..4].try_into().expect("w")) as usize;
                h = u32::from_be_bytes(body[4..8].try_into().expect("h")) as usize;
                assert_eq!(body[8], 8, "bit depth");
                ctype = body[9];
                assert_eq!(body[12], 0, "interlaced");
            }
            b"IDAT" => idat.extend_from_slice(body),
            _ => {}
        }
        pos += 12 + len;
    }
    let bpp = match ctype {
        2 => 3,
        6 => 4,
        other => panic!("colour type {other}"),
    };
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .expect("inflate");
    let stride = w * bpp;
    assert_eq!(raw.len(), h * (stride + 1));
    let mut prev = vec![0u8; stride];
    let mut pixels = Vec::with_capacity(w * h);
    for y in 0..h {
        let filter = raw[y * (stride + 1)];
        let mut line = raw[y * (stride + 1) + 1..(y + 1) * (stride + 1)].to_vec();
        for i in 0..stride {
            let a = if i >= bpp { line[i - bpp] as i32 } else { 0 };
            let b = prev[i] as i32;
            let c = if i >= bpp { prev[i - bpp] as i32 } else { 0 };
            let add = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("filter {f}"),
            };
            line[i] = line[i].wrapping_add(add as u8);
        }
        for px in line.chunks(bpp) {
            pixels.push([px[0], px[1], px[2], if bpp == 4 { px[3] } else { 255 }]);
        }
        prev = line;
    }
    (w, h, pixels)
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(bin) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut pages = vec![("evil", evil_trace(dir.path()))];
    if let Some(data) = shared_data() {
        pages.push((
            "resnet",
            data.join("kineto/kineto2021_resnet50_worker0.pt.trace.json.gz"),
        ));
        pages.push(("ranks", data.join("kineto/hta_trace_filter")));
    }
    for (name, trace) in pages {
        let html = dir.path().join(format!("{name}.html"));
        ok(&[
            "report",
            &trace.to_string_lossy(),
            "-o",
            &html.to_string_lossy(),
        ]);
        let png = dir.path().join(format!("{name}.png"));
        let profile = dir.path().join(format!("profile-{name}"));
        let (_, log) = run_chromium(
            bin,
            &profile,
            &[
                "--window-size=1400,3000",
                &format!("--screenshot={}", png.display()),
            ],
            &html,
        );
        // Console messages (errors, CSP violations) are logged as CONSOLE lines.
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
        assert!(console.is_empty(), "{name}: console messages: {console:?}");
        let bytes = std::fs::read(&png)
            .unwrap_or_else(|e| panic!("{name}: no screenshot ({e}); log: {log}"));
        let (w, h, pixels) = decode_png(&bytes);
        assert_eq!((w, h), (1400, 3000), "{name}");
        let non_white = pixels
            .iter()
            .filter(|p| p[0] < 235 || p[1] < 235 || p[2] < 235)
            .count();
        let mut colours: Vec<[u8; 4]> = pixels.iter().step_by(7).copied().collect();
        colours.sort_unstable();
        colours.dedup();
        assert!(
            non_white * 100 > pixels.len(),
            "{name}: {non_white} non-white pixels: blank"
        );
        assert!(
            colours.len() > 50,
            "{name}: {} colours: no plots",
            colours.len()
        );
        if let Ok(keep) = std::env::var("STRATO_KEEP_SCREENSHOTS") {
            let _ = std::fs::copy(&png, Path::new(&keep).join(format!("{name}.png")));
        }

        let (dom, _) = run_chromium(
            bin,
            &dir.path().join(format!("dom-{name}")),
            &["--dump-dom"],
            &html,
        );
        assert!(dom.contains("<svg"), "{name}: DOM has no plot");
        assert!(
            !dom.to_lowercase().contains("<script"),
            "{name}: DOM has a script element"
        );
        if name == "evil" {
            assert!(
                dom.contains("&lt;script&gt;alert(\"k\")&lt;/script&gt;"),
                "{name}: kernel name not text"
            );
            assert!(!dom.contains("<img"), "{name}: injected element");
        }
    }
}

#[test]
fn diff_of_hta_compare_pair() {
    let Some(data) = shared_data() else { return };
    let base = data.join("kineto/hta_trace_compare/base.json.gz");
    let test = data.join("kineto/hta_trace_compare/test.json.gz");
    let (a, b) = (base.to_string_lossy(), test.to_string_lossy());
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["diff", &a, &b, "--json"]).stdout).expect("json");
    assert_eq!(v["a"]["device_ops"], 18);
    assert_eq!(v["b"]["device_ops"], 17);
    assert_eq!(v["device_time"]["delta_ns"], -4000);
    // Conservation: the rows' deltas add up to the whole's.
    let sum = |rows: &serde_json::Value| -> i64 {
        rows.as_array()
            .expect("rows")
            .iter()
            .map(|r| r["delta_ns"].as_i64().unwrap_or(0))
            .sum()
    };
    assert_eq!(
        sum(&v["strata"]),
        v["window"]["delta_ns"].as_i64().unwrap_or(-1)
    );
    assert_eq!(
        sum(&v["operations"]),
        v["window"]["delta_ns"].as_i64().unwrap_or(-1)
    );
    assert_eq!(sum(&v["kernels"]), -4000);
    let k = v["kernels"].as_array().expect("kernels");
    let changed: Vec<_> = k.iter().filter(|k| k["change"] != "same").collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(
        (
            changed[0]["a_count"].as_u64(),
            changed[0]["b_count"].as_u64()
        ),
        (Some(3), Some(2))
    );
    assert!(v["strata"]
        .as_array()
        .expect("strata")
        .iter()
        .any(|s| s["change"] == "removed"));

    let text = String::from_utf8(ok(&["diff", &a, &b]).stdout).expect("utf-8");
    assert!(
        text.contains("faster") && text.contains("operation x stratum"),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "colour written to a pipe");
    // Widths fit COLUMNS.
    let narrow = strato_command()
        .args(["diff", &a, &b])
        .env("COLUMNS", "100")
        .output()
        .expect("run");
    for line in String::from_utf8_lossy(&narrow.stdout).lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
    }

    // The diff as a report section.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("d.html");
    ok(&["report", &b, "--baseline", &a, "-o", &out.to_string_lossy()]);
    let html = std::fs::read_to_string(&out).expect("report");
    assert!(html.contains("<h2 id=\"diff\">"));
    assert!(html.contains("aria-label=\"operations A vs B\""));
}

#[test]
fn completions_and_help_examples() {
    for shell in ["bash", "zsh", "fish"] {
        let out = String::from_utf8(ok(&["completions", shell]).stdout).expect("utf-8");
        assert!(out.contains("report") && out.contains("diff"), "{shell}");
    }
    let help = String::from_utf8(ok(&["--help"]).stdout).expect("utf-8");
    let commands: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    for c in &commands {
        let h = String::from_utf8(ok(&[c, "--help"]).stdout).expect("utf-8");
        assert!(h.contains("Example"), "`strato {c} --help` has no example");
    }
}

#[test]
fn no_progress_or_colour_without_a_terminal() {
    let Some(data) = shared_data() else { return };
    let trace = data.join("kineto/hta_alexnet_trace.json.gz");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.html");
    let o = ok(&[
        "report",
        &trace.to_string_lossy(),
        "-o",
        &out.to_string_lossy(),
    ]);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&out)
        .expect("open");
    f.write_all(b"").expect("write");
}
