//! Outputs never destroy or leak anything (issue 12), through the built `strato` binary:
//! output paths (devices, FIFOs, symlinks, `-`, modes), profile replacement (foreign files,
//! read-only profiles, stale temp dirs), CSV formula neutralisation, the report's size bound
//! with huge names, `record -o` onto an imported profile, sources claiming the same rank,
//! and secrets in trace metadata.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::common::{data, fails, ok, s, strato, strato_command};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

const ALEXNET: &str = "kineto/hta_alexnet_trace.json.gz";

/// A Kineto-style trace: one process, ops launching kernels named `names`, one per op.
fn synthetic(names: &[String], rank: Option<i64>, metadata: Option<Value>) -> Value {
    let mut events = vec![
        json!({"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":1_000_000}),
    ];
    for (i, name) in names.iter().enumerate() {
        let t = i as i64 * 2000;
        events.push(json!({"ph":"X","name":name,"cat":"cpu_op","pid":1,"tid":1,"ts":t+10,"dur":1000,"args":{"External id":i+1}}));
        events.push(json!({"ph":"X","name":"cudaLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,"ts":t+20,"dur":10,"args":{"correlation":i+1,"External id":i+1}}));
        events.push(json!({"ph":"X","name":name,"cat":"kernel","pid":0,"tid":7,"ts":t+50,"dur":500,"args":{"correlation":i+1,"device":0,"stream":7,"External id":i+1}}));
    }
    let mut doc = json!({"schemaVersion": 1, "traceEvents": events});
    if let Some(r) = rank {
        doc["distributedInfo"] = json!({"rank": r, "world_size": 1});
    }
    if let Some(m) = metadata {
        doc["metadata"] = m;
    }
    doc
}

fn write_json(path: &Path, doc: &Value) {
    std::fs::write(path, serde_json::to_vec(doc).unwrap()).unwrap();
}

// ---- item 1: output paths ----

#[test]
fn outputs_write_into_devices_fifos_and_symlink_targets_without_replacing_them() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data(ALEXNET);
    let trace = s(&trace);

    // A private clone of /dev/null (needs root, as users of ML containers often are).
    let null = dir.path().join("null");
    if is_root() {
        let made = Command::new("mknod")
            .args([s(&null), "c", "1", "3"])
            .status()
            .unwrap();
        assert!(made.success());
        ok(&["report", trace, "-o", s(&null)]);
        ok(&["export", trace, "--chrome", s(&null)]);
        let kind = std::fs::symlink_metadata(&null).unwrap().file_type();
        assert!(kind.is_char_device(), "the device node was replaced");
        assert_eq!(std::fs::read(&null).unwrap(), b"", "still /dev/null");
    } else {
        eprintln!("not root: the device-node case is skipped");
    }

    // A FIFO: its reader gets the whole export, the FIFO stays.
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    ok(&["export", trace, "--chrome", s(&fifo)]);
    let got: Value = serde_json::from_slice(&reader.join().unwrap()).unwrap();
    assert!(got["traceEvents"].as_array().unwrap().len() > 100);
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    // A symlink is resolved: the target is written, the link stays a link.
    let real = dir.path().join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    ok(&["export", trace, "--chrome", s(&link)]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let written: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
    assert!(written["traceEvents"].is_array());

    // A symlink to nothing and a directory are refused, nothing is created.
    let dangling = dir.path().join("dangling.html");
    std::os::unix::fs::symlink(dir.path().join("nowhere.html"), &dangling).unwrap();
    let err = fails(&["report", trace, "-o", s(&dangling)]);
    assert!(err.contains("symlink to nothing"), "{err}");
    assert!(!dir.path().join("nowhere.html").exists());
    let err = fails(&["report", trace, "-o", s(dir.path())]);
    assert!(err.contains("is a directory"), "{err}");

    // `-` is standard output.
    let out = ok(&["export", trace, "--chrome", "-"]);
    let doc: Value = serde_json::from_slice(
        &out.stdout[..out.stdout.len() - {
            // "wrote -\n" follows the document.
            let tail = b"wrote -\n";
            assert!(out.stdout.ends_with(tail));
            tail.len()
        }],
    )
    .unwrap();
    assert!(doc["traceEvents"].is_array());

    // A replaced regular file keeps its mode; no temp file is left.
    let html = dir.path().join("r.html");
    std::fs::write(&html, "old").unwrap();
    std::fs::set_permissions(&html, std::fs::Permissions::from_mode(0o640)).unwrap();
    ok(&["report", trace, "-o", s(&html)]);
    let meta = std::fs::metadata(&html).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert!(meta.len() > 10_000);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// ---- items 2, 3: profile replacement ----

fn created_ns(prof: &Path) -> i64 {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(prof.join("metadata.json")).unwrap()).unwrap();
    meta["created_unix_ns"].as_i64().unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn reimport_refuses_a_profile_holding_the_users_files_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data(ALEXNET);
    let prof = dir.path().join("prof");
    ok(&["import", s(&trace), "-o", s(&prof)]);
    let before = created_ns(&prof);
    std::fs::write(prof.join("NOTES.md"), "my notes").unwrap();
    std::fs::create_dir(prof.join("sub")).unwrap();
    std::fs::write(prof.join("sub/x.txt"), "x").unwrap();
    let err = fails(&["import", s(&trace), "-o", s(&prof)]);
    assert!(err.contains("NOTES.md, sub/"), "{err}");
    assert_eq!(
        std::fs::read_to_string(prof.join("NOTES.md")).unwrap(),
        "my notes"
    );
    assert!(prof.join("sub/x.txt").exists());
    assert_eq!(created_ns(&prof), before, "the old profile stays");
    assert_eq!(entries(dir.path()), ["prof"]);
    // Only stratoscope's files: replaced, keeping the directory's mode, nothing beside it.
    std::fs::remove_file(prof.join("NOTES.md")).unwrap();
    std::fs::remove_dir_all(prof.join("sub")).unwrap();
    std::fs::set_permissions(&prof, std::fs::Permissions::from_mode(0o750)).unwrap();
    ok(&["import", s(&trace), "-o", s(&prof)]);
    assert_ne!(created_ns(&prof), before);
    assert_eq!(
        std::fs::metadata(&prof).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    assert_eq!(entries(dir.path()), ["prof"]);
}

#[test]
fn a_profile_the_user_cannot_write_is_left_whole_with_nothing_beside_it() {
    if !is_root() {
        eprintln!("needs root to run strato as another user; skipped");
        return;
    }
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let trace = dir.path().join("t.json.gz");
    std::fs::copy(data(ALEXNET), &trace).unwrap();
    std::fs::set_permissions(&trace, std::fs::Permissions::from_mode(0o644)).unwrap();
    let prof = dir.path().join("prof");
    ok(&["import", s(&trace), "-o", s(&prof)]);
    std::fs::set_permissions(&prof, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = created_ns(&prof);
    // As nobody: the parent is writable, the profile is not.
    let out = strato_command()
        .args(["import", s(&trace), "-o", s(&prof)])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("prof"), "{err}");
    assert_eq!(created_ns(&prof), before, "the old profile stays");
    assert_eq!(entries(dir.path()), ["prof", "t.json.gz"]);
}

fn set_mtime(path: &Path, when: SystemTime) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

#[test]
fn stale_temp_dirs_of_gone_processes_are_cleaned_by_a_later_write_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data(ALEXNET);
    let prof = dir.path().join("prof");
    // A pid above pid_max never names a live process.
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let dead = pid_max + 7;
    let old = SystemTime::now() - Duration::from_secs(2 * 3600);
    let make = |name: String, when: Option<SystemTime>| {
        let p = dir.path().join(name);
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("spans.parquet"), "partial").unwrap();
        if let Some(t) = when {
            set_mtime(&p.join("spans.parquet"), t);
            set_mtime(&p, t);
        }
    };
    make(format!("prof.tmp-{dead}"), Some(old)); // killed long ago: removed
    make(format!("prof.tmp-{}", dead + 1), None); // recent: perhaps another machine's
    make(format!("prof.tmp-{}", std::process::id()), Some(old)); // alive
    make(format!("other.tmp-{dead}"), Some(old)); // another profile's
    ok(&["import", s(&trace), "-o", s(&prof)]);
    let mut want = vec![
        format!("other.tmp-{dead}"),
        "prof".to_owned(),
        format!("prof.tmp-{}", dead + 1),
        format!("prof.tmp-{}", std::process::id()),
    ];
    want.sort();
    assert_eq!(entries(dir.path()), want);
}

// ---- item 6: CSV formulas ----

/// Every field of every CSV line: text starting with a formula character must be neutralised.
fn assert_no_formulas(csv_text: &str, what: &str) -> usize {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv_text.as_bytes());
    let mut neutralised = 0;
    for record in reader.records() {
        for field in record.unwrap().iter() {
            if field.starts_with(['=', '+', '-', '@', '\t', '\r']) {
                assert!(
                    field.parse::<f64>().is_ok(),
                    "{what}: formula-like cell {field:?}"
                );
            }
            if field.starts_with("'=") || field.starts_with("'@") || field.starts_with("'+") {
                neutralised += 1;
            }
        }
    }
    neutralised
}

#[test]
fn csv_cells_that_spreadsheets_would_run_are_neutralised_unless_raw() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = [
        "=HYPERLINK(\"http://x\",\"y\")",
        "+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(1+1)*cmd",
        "\tgemm",
        "aten::mm",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let path = dir.path().join("evil.json");
    write_json(&path, &synthetic(&names, None, None));
    let p = s(&path);
    for args in [
        vec!["kernels", p, "--csv"],
        vec!["breakdown", p, "--csv"],
        vec!["layers", p, "--csv"],
        vec!["layers", p, "--csv", "--kernels"],
    ] {
        let out = strato(&args);
        if !out.status.success() {
            // An option a command lacks is not what this test is about.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("unexpected argument"), "{args:?}: {err}");
            continue;
        }
        let text = String::from_utf8(out.stdout).unwrap();
        let n = assert_no_formulas(&text, &format!("{args:?}"));
        if args[0] != "breakdown" {
            assert!(n >= 2, "{args:?}: expected neutralised names in\n{text}");
        }
    }
    // Real data: negative numbers stay numbers (gpu-time and diff figures can be negative).
    let real = data(ALEXNET);
    let text = String::from_utf8(ok(&["kernels", s(&real), "--csv"]).stdout).unwrap();
    assert_no_formulas(&text, "kernels on alexnet");
    // --csv-raw writes names as they are.
    let raw = String::from_utf8(ok(&["kernels", p, "--csv", "--csv-raw"]).stdout).unwrap();
    assert!(
        raw.lines().any(|l| l.contains(",=HYPERLINK(")
            || l.starts_with("=HYPERLINK(")
            || l.contains("\"=HYPERLINK(")),
        "{raw}"
    );
}

// ---- item 7: report size bound ----

#[test]
fn forty_names_of_200_kb_keep_the_report_under_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "{}{i}",
                char::from(b'a' + (i % 26) as u8)
                    .to_string()
                    .repeat(200_000)
            )
        })
        .collect();
    let path = dir.path().join("long.json");
    write_json(&path, &synthetic(&names, None, None));
    let html = dir.path().join("r.html");
    ok(&["report", s(&path), "-o", s(&html)]);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.len() < 2 * 1024 * 1024, "{} bytes", text.len());
    assert!(text.contains("more characters]"), "cut names are marked");
}

// ---- item 8: record onto an imported profile ----

#[test]
fn record_onto_an_imported_profile_replaces_it_or_refuses_with_the_users_files() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data(ALEXNET);
    let prof = dir.path().join("prof");
    ok(&["import", s(&trace), "-o", s(&prof)]);
    std::fs::write(prof.join("NOTES.md"), "mine").unwrap();
    let record = |prof: &Path| {
        strato_command()
            .args(["record", "-o", s(prof), "--", "true"])
            .env("STRATOSCOPE_BOOTSTRAP", dir.path().join("no-bootstrap"))
            .output()
            .unwrap()
    };
    let out = record(&prof);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("NOTES.md"), "{err}");
    assert!(
        prof.join("metadata.json").exists(),
        "refused: left as it was"
    );
    std::fs::remove_file(prof.join("NOTES.md")).unwrap();
    // `true` records nothing; what matters is that the import no longer shadows the recording.
    let _ = record(&prof);
    assert!(!prof.join("metadata.json").exists());
    assert!(!prof.join("spans.parquet").exists());
    let info = strato(&["info", s(&prof)]);
    assert!(!String::from_utf8_lossy(&info.stdout).contains("alexnet"));
}

// ---- item 9: sources claiming the same rank ----

#[test]
fn sources_claiming_the_same_rank_are_kept_apart_and_noted_once() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("traces");
    std::fs::create_dir(&folder).unwrap();
    let names = |p: &str| (0..3).map(|i| format!("{p}_{i}")).collect::<Vec<_>>();
    write_json(
        &folder.join("a.json"),
        &synthetic(&names("a"), Some(0), None),
    );
    write_json(
        &folder.join("b.json"),
        &synthetic(&names("b"), Some(0), None),
    );
    std::fs::copy(data(ALEXNET), folder.join("c.json.gz")).unwrap(); // also claims rank 0
    let out = ok(&["info", s(&folder)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("claim rank 0").count(), 1, "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("source   ").count(), 3, "{text}");
    assert!(text.contains("3 sources claim rank 0"), "{text}");
    let doc: Value = serde_json::from_slice(&ok(&["info", s(&folder), "--json"]).stdout).unwrap();
    assert_eq!(doc["shared_rank_claims"][0]["rank"], 0);
    assert_eq!(
        doc["shared_rank_claims"][0]["sources"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // Their kernels stay separate: a's and b's both appear, and alexnet's.
    let kernels = String::from_utf8(ok(&["kernels", s(&folder), "--csv"]).stdout).unwrap();
    assert!(kernels.contains("a_0") && kernels.contains("b_0"));
    // Through a profile: the note is in `info` too.
    let prof = dir.path().join("prof");
    ok(&["import", s(&folder), "-o", s(&prof)]);
    let text = String::from_utf8(ok(&["info", s(&prof)]).stdout).unwrap();
    assert!(text.contains("3 sources claim rank 0"), "{text}");
}

// ---- item 10: secrets ----

/// A copy of the real Falconsai H100 trace with a fake token put back into its recorded
/// environment (the public file has `HF_TOKEN: REDACTED`).
fn falconsai_with_token(dir: &Path, token: &str) -> PathBuf {
    use std::io::{Read, Write};
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(
        std::fs::File::open(data(
            "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
        ))
        .unwrap(),
    )
    .read_to_string(&mut text)
    .unwrap();
    let needle = "\"HF_TOKEN\": \"REDACTED\"";
    assert_eq!(text.matches(needle).count(), 1, "the fixture changed");
    let text = text.replace(needle, &format!("\"HF_TOKEN\": \"{token}\""));
    let path = dir.join("falconsai.json.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap();
    path
}

#[test]
fn secrets_in_a_real_traces_environment_are_redacted_everywhere_unless_kept() {
    let dir = tempfile::tempdir().unwrap();
    let token = "hf_FAKEtokenFAKEtokenFAKE0123456789";
    let trace = falconsai_with_token(dir.path(), token);
    let prof = dir.path().join("prof");
    let out = ok(&["import", s(&trace), "-o", s(&prof)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("HF_TOKEN"));
    let stored = strato_store::read(&prof).unwrap();
    let meta = stored.ranks[0].metadata.to_json().unwrap();
    assert!(!meta.contains(token));
    assert!(meta.contains("<redacted by stratoscope>"));
    assert!(
        meta.contains("TOKENIZERS_PARALLELISM"),
        "not a secret: kept"
    );
    let chrome = dir.path().join("out.json");
    for input in [&trace, &prof] {
        ok(&["export", s(input), "--chrome", s(&chrome)]);
        let text = std::fs::read_to_string(&chrome).unwrap();
        assert!(!text.contains(token), "export of {}", input.display());
        let info = String::from_utf8(ok(&["info", s(input)]).stdout).unwrap();
        assert!(info.contains("redacted HF_TOKEN"), "{info}");
        assert!(!info.contains(token));
        let doc: Value = serde_json::from_slice(&ok(&["info", s(input), "--json"]).stdout).unwrap();
        assert_eq!(doc["redacted"], json!(["HF_TOKEN"]));
    }
    let report = dir.path().join("r.html");
    ok(&["report", s(&trace), "-o", s(&report)]);
    assert!(!std::fs::read_to_string(&report).unwrap().contains(token));
    // --keep-secrets keeps them.
    ok(&[
        "export",
        s(&trace),
        "--chrome",
        s(&chrome),
        "--keep-secrets",
    ]);
    assert!(std::fs::read_to_string(&chrome).unwrap().contains(token));
}

#[test]
fn synthetic_secrets_and_url_credentials_are_redacted_and_named_without_values() {
    let dir = tempfile::tempdir().unwrap();
    let meta = json!({
        "env": {"OPENAI_API_KEY": "sk-live-123", "MY_PASSWORD": "pw-456",
                "TOKENIZERS_PARALLELISM": "false", "HOME": "/root",
                "PIP_INDEX_URL": "https://user:s3cr3t@pypi.example.com/simple"},
        "argv": ["train.py", "WANDB_API_KEY=wb-789"],
    });
    let path = dir.path().join("t.json");
    write_json(&path, &synthetic(&["k".to_owned()], Some(0), Some(meta)));
    let out = dir.path().join("out.json");
    ok(&["export", s(&path), "--chrome", s(&out)]);
    let text = std::fs::read_to_string(&out).unwrap();
    for secret in ["sk-live-123", "pw-456", "s3cr3t", "wb-789"] {
        assert!(!text.contains(secret), "{secret} leaked");
    }
    assert!(text.contains("pypi.example.com") && text.contains("\"false\""));
    let info = String::from_utf8(ok(&["info", s(&path)]).stdout).unwrap();
    for name in [
        "MY_PASSWORD",
        "OPENAI_API_KEY",
        "PIP_INDEX_URL (URL password)",
        "WANDB_API_KEY",
    ] {
        assert!(info.contains(name), "{name} not named in\n{info}");
    }
    for secret in ["sk-live-123", "pw-456", "s3cr3t", "wb-789"] {
        assert!(!info.contains(secret));
    }
}

/// The events of a Chrome export, one per line as the exporter writes them, sorted (the header
/// line first, unsorted).
fn chrome_events(path: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text
        .lines()
        .map(|l| l.trim_end_matches(',').to_owned())
        .filter(|l| !l.is_empty());
    let header = lines.next().unwrap_or_default();
    let mut events: Vec<String> = lines.collect();
    events.sort_unstable();
    (header, events)
}

/// The inputs the streamed exports are checked on: a synthetic trace with secrets in a span
/// name, a process name and args (its path returned first), the fixtures' Kineto file and
/// every Kineto JSON file of the shared data.
fn streamed_export_inputs(dir: &Path, secret: &str) -> Vec<PathBuf> {
    let mut doc = synthetic(&["k".to_owned()], Some(0), None);
    let events = doc["traceEvents"].as_array_mut().unwrap();
    events.push(
        json!({"ph": "X", "cat": "user_annotation", "name": format!("HF_TOKEN={secret}"),
        "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"token": secret}}),
    );
    events.push(
        json!({"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
        "args": {"name": format!("train --hf-token {secret}")}}),
    );
    let synthetic_path = dir.join("secrets.json");
    write_json(&synthetic_path, &doc);
    let mut inputs = vec![
        synthetic_path.clone(),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/kineto/hta_trace_filter/sampled_rank-0.json.gz"),
    ];
    inputs.retain(|p| p.exists());
    if let Some(shared) = crate::common::shared_data() {
        let mut stack = vec![shared.join("kineto")];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.to_string_lossy().contains(".json") {
                    inputs.push(p);
                }
            }
        }
    }
    assert!(inputs.len() > 1, "{inputs:?}");
    inputs
}

/// `export --chrome` alone streams the file in two passes (the trace never held); with another
/// output it writes from the whole trace. Both hold the same events, names redacted alike, on
/// every Kineto JSON file of the shared data and the fixtures, and on a synthetic trace with
/// secrets in a span name, a process name and args.
#[test]
fn streamed_chrome_export_holds_the_whole_exports_events() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "hf_abcdefghijklmnopqrstuvwxyz0123";
    let inputs = streamed_export_inputs(dir.path(), secret);
    let synthetic_path = inputs[0].clone();
    let (streamed, whole) = (dir.path().join("s.json"), dir.path().join("w.json"));
    for input in &inputs {
        ok(&["export", s(input), "--chrome", s(&streamed)]);
        ok(&[
            "export",
            s(input),
            "--chrome",
            s(&whole),
            "--perfetto",
            "/dev/null",
        ]);
        let (a, b) = (chrome_events(&streamed), chrome_events(&whole));
        assert_eq!(a.0, b.0, "header of {}", input.display());
        assert_eq!(a.1.len(), b.1.len(), "events of {}", input.display());
        assert!(a.1 == b.1, "events of {} differ", input.display());
    }
    ok(&["export", s(&synthetic_path), "--chrome", s(&streamed)]);
    let text = std::fs::read_to_string(&streamed).unwrap();
    assert!(
        !text.contains(secret),
        "a secret reached the streamed export"
    );
    assert!(
        text.contains("HF_TOKEN="),
        "the span is there, its value redacted"
    );
}

/// `export --perfetto` alone streams the file once, its slices sorted through runs spilled
/// beside the output (the trace never held); with another output it writes from the whole
/// trace. The two files are the same bytes on every input the Chrome check reads (and without
/// what the analyses add, `--raw`, on the first three); secrets are redacted in the streamed
/// file; nothing is left beside it.
#[test]
fn streamed_perfetto_export_is_the_whole_exports_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "hf_abcdefghijklmnopqrstuvwxyz0123";
    let inputs = streamed_export_inputs(dir.path(), secret);
    let out = tempfile::tempdir().unwrap();
    let (streamed, whole) = (out.path().join("s.pb"), out.path().join("w.pb"));
    for (i, input) in inputs.iter().enumerate() {
        let raws: &[&[&str]] = if i < 3 { &[&[], &["--raw"]] } else { &[&[]] };
        for raw in raws {
            let mut args = vec!["export", s(input), "--perfetto", s(&streamed)];
            args.extend(*raw);
            ok(&args);
            let mut args = vec!["export", s(input), "--perfetto", s(&whole)];
            args.extend(*raw);
            args.extend(["--chrome", "/dev/null"]);
            ok(&args);
            let (a, b) = (
                std::fs::read(&streamed).unwrap(),
                std::fs::read(&whole).unwrap(),
            );
            assert!(!a.is_empty());
            assert!(
                a == b,
                "{} {raw:?}: the streamed file differs",
                input.display()
            );
        }
    }
    let mut names: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["s.pb", "w.pb"], "the spill left files behind");
    ok(&["export", s(&inputs[0]), "--perfetto", s(&streamed)]);
    let bytes = std::fs::read(&streamed).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains(secret),
        "a secret reached the streamed export"
    );
    assert!(
        text.contains("HF_TOKEN="),
        "the span is there, its value redacted"
    );
    // No directory to spill in: one line naming the output.
    let missing = out.path().join("missing/x.pb");
    let err = fails(&["export", s(&inputs[0]), "--perfetto", s(&missing)]);
    assert!(
        err.contains(&format!("{}: cannot write", missing.display())),
        "{err}"
    );
}
