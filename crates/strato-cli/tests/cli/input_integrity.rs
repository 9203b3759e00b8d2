//! Issue 11 through the built `strato` binary: damaged gzip and trailing data exit 2 with the
//! reason (and `--salvage` keeps what can be read, saying what was lost); an invalid
//! `STRATO_MAX_DECOMPRESSED_BYTES` is an error; FIFOs, `<(...)`-style pipes and `-` (standard
//! input) are read once and give the same counts as the file.

use std::io::{Read, Write};

use std::process::{Command, Output, Stdio};

use crate::common::{data, strato, strato_command, text};

const SAMPLE: &str = "kineto/hta_alexnet_trace.json.gz";

fn info_json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The counts of `info --json` without the source name.
fn counts(mut info: serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                map.remove("source");
                map.remove("sources");
                map.remove("path");
                map.remove("inputs");
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut info);
    info
}

fn sample_json() -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(data(SAMPLE)).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn damaged_gzip_and_trailing_data_exit_2_and_salvage_says_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let good = gzip(&sample_json());
    let n = good.len();
    let mut bad_crc = good.clone();
    bad_crc[n - 8] ^= 0xff;
    let mut bad_isize = good.clone();
    bad_isize[n - 1] ^= 0x01;
    let no_trailer = good[..n - 8].to_vec();
    let mut garbage_after_member = good.clone();
    garbage_after_member.extend_from_slice(b"garbage");
    let mut trailing_json = sample_json();
    trailing_json.extend_from_slice(b"\n{\"traceEvents\":[]}");
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("crc.json.gz", bad_crc, "gzip"),
        ("isize.json.gz", bad_isize, "gzip"),
        ("no_trailer.json.gz", no_trailer, "gzip"),
        ("garbage.json.gz", garbage_after_member, "gzip"),
        (
            "trailing.json",
            trailing_json,
            "after the end of the JSON document",
        ),
    ];
    let expected = counts(info_json(&strato(&[
        "info",
        "--json",
        data(SAMPLE).to_str().unwrap(),
    ])));
    for (name, bytes, reason) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = strato(&["info", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains(reason),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");

        let out = strato(&["info", "--json", "--salvage", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("warning") && stderr.contains("salvaged") && stderr.contains(reason),
            "{name}: {stderr}"
        );
        // Every event was read before the damage in these cases (it is at the end).
        assert_eq!(counts(info_json(&out)), expected, "{name}");
    }
    // Damage in the middle: salvage keeps a part.
    let cut = dir.path().join("cut.json.gz");
    std::fs::write(&cut, &good[..n / 2]).unwrap();
    assert_eq!(
        strato(&["info", cut.to_str().unwrap()]).status.code(),
        Some(2)
    );
    let out = strato(&["info", "--salvage", cut.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("the rest is lost"));
}

#[test]
fn invalid_decompression_limit_is_an_error() {
    for value in ["abc", "-5", "0", "1.5G", "99999999999999999999"] {
        let out = strato_command()
            .args(["info", data(SAMPLE).to_str().unwrap()])
            .env("STRATO_MAX_DECOMPRESSED_BYTES", value)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {stderr}");
        assert!(
            stderr.contains("STRATO_MAX_DECOMPRESSED_BYTES") && stderr.contains("not a byte count"),
            "{value}: {stderr}"
        );
    }
    let run = |value: &str| {
        strato_command()
            .args(["info", data(SAMPLE).to_str().unwrap()])
            .env("STRATO_MAX_DECOMPRESSED_BYTES", value)
            .output()
            .unwrap()
    };
    assert!(run("1G").status.success());
    let small = run("64K");
    assert_eq!(small.status.code(), Some(2));
    assert!(text(&small.stderr).contains("exceeds the limit of 65536 bytes"));
}

#[test]
fn fifo_pipe_and_stdin_read_once() {
    let expected = counts(info_json(&strato(&[
        "info",
        "--json",
        data(SAMPLE).to_str().unwrap(),
    ])));
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("plain.json", sample_json()),
        ("packed.json.gz", std::fs::read(data(SAMPLE)).unwrap()),
    ] {
        // A real FIFO, written by another thread (a hang would time the test out).
        let fifo = dir.path().join(name);
        let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let writer = {
            let fifo = fifo.clone();
            let bytes = bytes.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                // A slow writer: the head arrives in pieces.
                for piece in bytes.chunks(7919) {
                    f.write_all(piece).unwrap();
                }
            })
        };
        let out = strato(&["info", "--json", fifo.to_str().unwrap()]);
        writer.join().unwrap();
        assert_eq!(counts(info_json(&out)), expected, "FIFO {name}");

        // `-`: standard input.
        let mut child = strato_command()
            .args(["info", "--json", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || stdin.write_all(&bytes));
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap().unwrap();
        assert_eq!(counts(info_json(&out)), expected, "stdin {name}");
    }
    // `<(gunzip -c x.json.gz)`: a /dev/fd pipe.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec \"$0\" info --json <(gunzip -c '{}')",
            data(SAMPLE).display()
        ))
        .arg(env!("CARGO_BIN_EXE_strato"))
        .output()
        .unwrap();
    assert_eq!(counts(info_json(&out)), expected, "process substitution");
    // SQLite needs a regular file: refused clearly on a pipe.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec \"$0\" info - < <(cat '{}')",
            data("nsys/pipit_cloverleaf_cuda.sqlite").display()
        ))
        .arg(env!("CARGO_BIN_EXE_strato"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("must be a regular file"),
        "{}",
        text(&out.stderr)
    );
}

/// Issue 19: the committed perf fixtures import through the binary (`info --json` names the
/// format), and a truncated `perf.data` or a bad `perf script` line is one line naming the
/// file, exit 2.
#[test]
fn perf_inputs_import_and_damaged_ones_exit_2() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/perf");
    for name in ["switch_events.perf.data", "cpu_samples.perf-script.txt"] {
        let path = fixtures.join(name);
        let out = strato(&["info", "--json", path.to_str().unwrap()]);
        let info = info_json(&out);
        assert!(info.to_string().contains("\"perf\""), "{name}: {info}");
    }
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixtures.join("switch_events.perf.data")).unwrap();
    let cut = dir.path().join("cut.perf.data");
    std::fs::write(&cut, &good[..good.len() / 3]).unwrap();
    let out = strato(&["info", cut.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cut.perf.data") && stderr.contains("perf"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let script = std::fs::read_to_string(fixtures.join("cpu_samples.perf-script.txt")).unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, format!("{script}\nnot an event line\n")).unwrap();
    let out = strato(&["info", bad.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.txt") && stderr.contains("line "),
        "{stderr}"
    );
}
