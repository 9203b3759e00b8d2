//! `strato view` as a user runs it: the server started on the 8-rank DLRM job, its URL read
//! from stdout, the API asked over HTTP (token refused and accepted, lanes of every rank, the
//! whole job, a kernel's details), the page opened in headless Chromium (deep link to a kernel:
//! its details rendered; the timeline drawn in colour), and inputs or addresses it cannot use
//! refused with one line and exit 2.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{data, shared_data, strato_command};
use crate::report_diff::{chromium, decode_png};

/// A running `strato view`, killed when dropped.
struct Viewer {
    child: Child,
    /// `host:port`.
    addr: String,
    token: String,
    url: String,
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(inputs: &[&Path]) -> Viewer {
    let mut cmd = strato_command();
    cmd.arg("view").args(inputs).args(["--port", "0"]);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strato view");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the URL");
    let url = line.trim().to_string();
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (addr, query) = rest.split_once("/?token=").expect("a token in the URL");
    assert!(addr.starts_with("127.0.0.1:"), "loopback by default: {url}");
    Viewer {
        addr: addr.to_string(),
        token: query.to_string(),
        url,
        child,
    }
}

/// `GET target` over HTTP/1.1: (status, body).
fn get(addr: &str, target: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn json(addr: &str, target: &str) -> Value {
    let (status, body) = get(addr, target);
    assert_eq!(status, 200, "{target}: {body}");
    serde_json::from_str(&body).expect("json")
}

/// The id and name of a kernel the whole-job answer shows exactly, or failing that the
/// first kernel of the lanes' details.
fn a_kernel(v: &Viewer, lanes: &Value) -> (u64, String) {
    let end = lanes["end_ns"].as_i64().expect("end");
    for lane in lanes["lanes"].as_array().expect("lanes") {
        if lane["kind"] != "device" {
            continue;
        }
        let id = lane["id"].as_u64().expect("id");
        let answer = json(
            &v.addr,
            &format!(
                "/api/range?t0=0&t1={}&px=16384&lanes={id}&token={}",
                end + 1,
                v.token
            ),
        );
        let names = answer["names"].as_array().expect("names");
        for row in answer["lanes"][0]["rows"].as_array().expect("rows") {
            if let Some(e) = row["events"].as_array().and_then(|e| e.first()) {
                let name = names[e[3].as_u64().expect("name") as usize]
                    .as_str()
                    .expect("text")
                    .to_string();
                return (e[0].as_u64().expect("id"), name);
            }
        }
    }
    panic!("no kernel drawn exactly on any device lane");
}

#[test]
fn view_serves_a_real_job_over_http_behind_its_token() {
    if shared_data().is_none() {
        eprintln!("skipped: ../shared/data is absent");
        return;
    }
    let dir = data("kineto/param_dlrm8");
    let v = start(&[&dir]);
    assert_eq!(v.token.len(), 32);
    assert_eq!(get(&v.addr, "/api/lanes").0, 401);
    assert_eq!(get(&v.addr, "/api/lanes?token=nope").0, 403);
    assert_eq!(get(&v.addr, "/").0, 401);
    let lanes = json(&v.addr, &format!("/api/lanes?token={}", v.token));
    let ranks: Vec<i64> = lanes["ranks"]
        .as_array()
        .expect("ranks")
        .iter()
        .map(|r| r["rank"].as_i64().expect("rank"))
        .collect();
    assert_eq!(ranks.len(), 8);
    let mut sorted = ranks.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..8).collect::<Vec<_>>());
    // Lanes come rank by rank.
    let lane_ranks: Vec<u64> = lanes["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .map(|l| l["rank_index"].as_u64().expect("rank index"))
        .collect();
    assert!(lane_ranks.windows(2).all(|w| w[0] <= w[1]));
    // The whole job at 1,000 px: every span of the job is shown, exact or summed.
    let end = lanes["end_ns"].as_i64().expect("end");
    let whole = json(
        &v.addr,
        &format!("/api/range?t0=0&t1={}&px=1000&token={}", end + 1, v.token),
    );
    let mut shown = 0u64;
    for lane in whole["lanes"].as_array().expect("lanes") {
        for row in lane["rows"].as_array().expect("rows") {
            shown += row["events"].as_array().expect("events").len() as u64;
            shown += row["buckets"]
                .as_array()
                .expect("buckets")
                .iter()
                .map(|b| b[1].as_u64().expect("count"))
                .sum::<u64>();
        }
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dlrm")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let trace =
        strato_io::import_paths(&files, &strato_io::ImportOptions::default()).expect("import");
    assert_eq!(
        shown,
        trace.spans.len() as u64,
        "the whole job shows every span once"
    );
    assert!(shown > 10_000, "{shown}");
    let (kernel, name) = a_kernel(&v, &lanes);
    let details = json(&v.addr, &format!("/api/event/{kernel}?token={}", v.token));
    assert_eq!(details["name"].as_str(), Some(name.as_str()));
    assert_eq!(
        get(&v.addr, &format!("/api/event/99999999?token={}", v.token)).0,
        404
    );

    // The overlays are the analyses' own answers: the steps, the critical path of each rank
    // in the first step (as `strato critical-path --step N --json` gives it), the findings
    // (as `strato advise --json`).
    let steps = json(&v.addr, &format!("/api/steps?token={}", v.token));
    let step = steps["steps"][0]["number"].as_u64().expect("a step");
    assert_eq!(
        steps["steps"][0]["ranks"].as_array().expect("ranks").len(),
        8
    );
    let path = json(
        &v.addr,
        &format!("/api/critical-path?step={step}&token={}", v.token),
    );
    let cli = strato_command()
        .args(["critical-path", "--json", "--step", &step.to_string()])
        .arg(&dir)
        .output()
        .expect("critical-path");
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let cli: Value = serde_json::from_slice(&cli.stdout).expect("critical-path json");
    let lengths = |ranks: &Value, key: &str| -> Vec<(i64, i64)> {
        let mut l: Vec<(i64, i64)> = ranks
            .as_array()
            .expect("ranks")
            .iter()
            .map(|r| {
                (
                    r["rank"].as_i64().expect("rank"),
                    r[key].as_i64().expect("length"),
                )
            })
            .collect();
        l.sort_unstable();
        l
    };
    let cli_ranks = &cli["steps"][0]["ranks"];
    let from_cli: Vec<(i64, i64)> = {
        let mut l: Vec<(i64, i64)> = cli_ranks
            .as_array()
            .expect("cli ranks")
            .iter()
            .map(|r| {
                let p = if r.get("path").is_some() {
                    &r["path"]
                } else {
                    r
                };
                (
                    p["rank"].as_i64().expect("rank"),
                    p["length_ns"].as_i64().expect("length"),
                )
            })
            .collect();
        l.sort_unstable();
        l
    };
    assert_eq!(lengths(&path["ranks"], "length_ns"), from_cli);
    for rank in path["ranks"].as_array().expect("ranks") {
        for e in rank["events"].as_array().expect("events") {
            // Each path event is a span of the timeline, where the timeline draws it.
            let d = json(
                &v.addr,
                &format!("/api/event/{}?token={}", e["id"], v.token),
            );
            assert_eq!(d["start_ns"], e["start_ns"]);
            assert_eq!(d["lane"], e["lane"]);
        }
    }
    assert_eq!(
        get(
            &v.addr,
            &format!("/api/critical-path?step=999999&token={}", v.token)
        )
        .0,
        404
    );
    assert_eq!(
        get(
            &v.addr,
            &format!("/api/critical-path?step=x&token={}", v.token)
        )
        .0,
        400
    );
    let findings = json(&v.addr, &format!("/api/findings?token={}", v.token));
    let advise = strato_command()
        .args(["advise", "--json"])
        .arg(&dir)
        .output()
        .expect("advise");
    let advise: Value = serde_json::from_slice(&advise.stdout).expect("advise json");
    let rules = |v: &Value| -> Vec<String> {
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| f["rule"].as_str().expect("rule").to_string())
            .collect()
    };
    assert_eq!(rules(&findings), rules(&advise));
    assert!(!rules(&findings).is_empty());

    // The collectives of the whole job: `strato collectives --json`'s instances, each with
    // the same last rank, and each member a kernel of the timeline on its rank.
    let shown = json(
        &v.addr,
        &format!("/api/collectives?t0=0&t1={}&token={}", end + 1, v.token),
    );
    let cli = strato_command()
        .args(["collectives", "--json"])
        .arg(&dir)
        .output()
        .expect("collectives");
    let cli: Value = serde_json::from_slice(&cli.stdout).expect("collectives json");
    let summary = |list: &Value, kind: &str, last: &str| -> Vec<(String, i64)> {
        let mut l: Vec<(String, i64)> = list
            .as_array()
            .expect("collectives")
            .iter()
            .map(|c| {
                (
                    c[kind].as_str().expect("kind").to_string(),
                    c[last].as_i64().expect("last"),
                )
            })
            .collect();
        l.sort();
        l
    };
    assert_eq!(
        summary(&shown["collectives"], "kind", "last"),
        summary(&cli["collectives"], "kind", "last_rank")
    );
    assert_eq!(shown["more"], 0);
    for c in shown["collectives"].as_array().expect("collectives") {
        for m in c["members"].as_array().expect("members") {
            assert_eq!(m["level"], "DeviceKernel", "{m}");
            let lane = &lanes["lanes"]
                .as_array()
                .expect("lanes")
                .iter()
                .find(|l| l["id"] == m["lane"])
                .expect("its lane")
                .clone();
            assert_eq!(lane["rank"], m["rank"], "{m}");
        }
    }
    assert_eq!(
        get(&v.addr, &format!("/api/range?t0=1&t1=0&token={}", v.token)).0,
        400
    );
}

#[test]
fn view_in_headless_chromium_draws_the_job_and_renders_a_kernels_details() {
    let Some(browser) = chromium() else { return };
    if shared_data().is_none() {
        eprintln!("skipped: ../shared/data is absent");
        return;
    }
    let dir = data("kineto/param_dlrm8");
    let v = start(&[&dir]);
    let lanes = json(&v.addr, &format!("/api/lanes?token={}", v.token));
    let (kernel, name) = a_kernel(&v, &lanes);
    let profile = tempfile::tempdir().expect("tmp");
    let run = |extra: &[String], fragment: &str| {
        Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--window-size=1400,900",
                "--virtual-time-budget=20000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("{}{fragment}", v.url))
            .output()
            .expect("run chromium")
    };
    // Deep link to the kernel: its details are rendered as text.
    let out = run(&["--dump-dom".to_string()], &format!("#event={kernel}"));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the timeline answered: {dom}"
    );
    let title = format!("<h2 id=\"event-name\">{}</h2>", escape(&name));
    assert!(dom.contains(&title), "{title} in {dom}");
    assert!(dom.contains("DeviceKernel"), "{dom}");
    assert!(dom.contains("lanes \u{b7}"), "status line: {dom}");
    // The whole job drawn: a screenshot with the palette's colours in it.
    let shot = profile.path().join("view.png");
    let out = run(&[format!("--screenshot={}", shot.display())], "");
    assert!(shot.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    let (w, h, pixels) = decode_png(&std::fs::read(&shot).expect("png"));
    assert!(w >= 1000 && h >= 600, "{w}x{h}");
    let coloured = pixels
        .iter()
        .filter(|p| {
            let max = p[0].max(p[1]).max(p[2]);
            let min = p[0].min(p[1]).min(p[2]);
            max - min > 80
        })
        .count();
    assert!(
        coloured > 2_000,
        "{coloured} coloured pixels: nothing drawn?"
    );
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[test]
fn view_refuses_what_it_cannot_open_or_bind_with_one_line() {
    // `strato view ARGS...` exits 2 with one line that holds `says`.
    let refused = |args: &[&std::ffi::OsStr], says: &str| {
        let out = strato_command().args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    refused(
        &[os("view"), os("/nonexistent/trace.json")],
        "/nonexistent/trace.json",
    );
    if shared_data().is_none() {
        return;
    }
    let alexnet = data("kineto/hta_alexnet_trace.json.gz");
    // An address of no interface here.
    refused(
        &[
            os("view"),
            alexnet.as_os_str(),
            os("--bind"),
            os("203.0.113.7"),
            os("--port"),
            os("0"),
        ],
        "cannot listen on 203.0.113.7",
    );
    // A baseline that cannot be opened.
    refused(
        &[
            os("view"),
            alexnet.as_os_str(),
            os("--baseline"),
            os("/nonexistent/before.json"),
            os("--port"),
            os("0"),
        ],
        "/nonexistent/before.json",
    );
}

#[test]
fn view_of_a_profile_is_the_view_of_the_trace_it_was_imported_from() {
    if shared_data().is_none() {
        eprintln!("skipped: ../shared/data is absent");
        return;
    }
    let trace = data("kineto/hta_alexnet_trace.json.gz");
    let dir = tempfile::tempdir().expect("tmp");
    let profile = dir.path().join("prof");
    let out = strato_command()
        .arg("import")
        .arg(&trace)
        .arg("-o")
        .arg(&profile)
        .output()
        .expect("import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers = |input: &Path| {
        let v = start(&[input]);
        let lanes = json(&v.addr, &format!("/api/lanes?token={}", v.token));
        let end = lanes["end_ns"].as_i64().expect("end");
        let whole = json(
            &v.addr,
            &format!("/api/range?t0=0&t1={}&px=777&token={}", end + 1, v.token),
        );
        (lanes, whole)
    };
    let (file_lanes, file_whole) = answers(&trace);
    let (profile_lanes, profile_whole) = answers(&profile);
    assert_eq!(file_lanes["lanes"], profile_lanes["lanes"]);
    assert_eq!(file_lanes["origin_ns"], profile_lanes["origin_ns"]);
    assert_eq!(file_whole, profile_whole);
}

/// The server's peak resident memory (VmHWM), in kB.
fn peak_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .expect("VmHWM")
}

#[test]
fn many_parallel_clients_do_not_grow_the_servers_memory() {
    if shared_data().is_none() {
        eprintln!("skipped: ../shared/data is absent");
        return;
    }
    let v = start(&[&data("kineto/param_dlrm8")]);
    let lanes = json(&v.addr, &format!("/api/lanes?token={}", v.token));
    let end = lanes["end_ns"].as_i64().expect("end") + 1;
    let round = || {
        std::thread::scope(|s| {
            for client in 0..16 {
                let (addr, token) = (&v.addr, &v.token);
                s.spawn(move || {
                    for i in 0..4 {
                        let t0 = (client * 4 + i) * 1000;
                        let (status, _) = get(
                            addr,
                            &format!("/api/range?t0={t0}&t1={end}&px=2000&token={token}"),
                        );
                        assert_eq!(status, 200);
                    }
                });
            }
        });
        peak_kb(v.child.id())
    };
    let first = round();
    round();
    let third = round();
    // Answers are computed by a fixed pool and dropped once sent: the peak set by the first
    // round of 16 clients is not exceeded by more than allocator noise afterwards.
    assert!(
        third <= first + first / 10 + 8 * 1024,
        "peak RSS grew from {first} kB to {third} kB over rounds of the same load"
    );
}
