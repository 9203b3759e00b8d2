//! CPU samples (`strato record --sample`, `strato export --folded/--firefox`; issue 19 item 3)
//! through the binary: a real native program sampled live (no Python: every sample is outside
//! any operation and has no Python stack, and both exports keep every sample), an impossible
//! rate (one message, the recording goes on), and the exports of a real profile without
//! samples (one clear error, exit 2, no file). The Python join and the per-operation flame
//! graphs are tested live in python/tests/test_sample.py.

use crate::common::{data, fails, ok, run, s, stderr, strato_env};

const ALEXNET: &str = "kineto/hta_alexnet_trace.json.gz";

/// Sampling one's own child needs `perf_event_paranoid` <= 2 (or root).
fn sampling_permitted() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .is_some_and(|p| p <= 2)
}

/// The samples of a Firefox Profiler file `strato export --firefox` wrote, over its threads.
fn firefox_samples(path: &std::path::Path) -> u64 {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["samples"]["length"].as_u64().unwrap())
        .sum()
}

const BUSY_SHELL: &str = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";

/// `strato record --sample=499 -o PROF -- sh -c BUSY_SHELL` with `env` set.
fn sample_busy_shell(prof: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    strato_env(
        &[
            "record",
            "--sample=499",
            "-o",
            s(prof),
            "--",
            "sh",
            "-c",
            BUSY_SHELL,
        ],
        env,
    )
}

#[test]
fn a_native_program_is_sampled_and_both_exports_keep_every_sample() {
    if !sampling_permitted() {
        eprintln!("skipped: perf events not permitted here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("prof");
    let out = sample_busy_shell(&prof, &[]);
    let err = stderr(&out);
    let summary = err
        .lines()
        .find(|l| l.starts_with("strato record --sample: "))
        .unwrap_or_else(|| panic!("no summary line: {err}"));
    let recorded: u64 = summary["strato record --sample: ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(recorded >= 10, "{summary}");
    assert!(prof
        .read_dir()
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with("-samples.strato")));

    let folded = dir.path().join("stacks.folded");
    ok(&["export", s(&prof), "--folded", s(&folded)]);
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut total = 0;
    let mut in_shell_or_libc = 0;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let count: u64 = count.parse().unwrap();
        total += count;
        assert!(
            stack.starts_with("op:(no operation);[python stack not sampled];"),
            "{line}"
        );
        // The leaf names its module (the shell or the C library it calls).
        let leaf = stack.rsplit(';').next().unwrap();
        assert!(leaf.ends_with(']'), "{line}");
        if leaf.contains("[dash]") || leaf.contains("[bash]") || leaf.contains("[libc") {
            in_shell_or_libc += count;
        }
    }
    assert_eq!(total, recorded, "every sample once:\n{text}");
    assert!(
        in_shell_or_libc * 2 >= total,
        "{in_shell_or_libc} of {total} in the shell or libc:\n{text}"
    );

    let firefox = dir.path().join("profile.json");
    ok(&["export", s(&prof), "--firefox", s(&firefox)]);
    assert_eq!(firefox_samples(&firefox), recorded);
}

#[test]
fn an_impossible_rate_is_one_message_and_the_program_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let prof = dir.path().join("prof");
    let marker = dir.path().join("ran");
    let script = format!("touch '{}'", marker.display());
    // The shell records nothing itself, so `record` ends with "no recordings" (exit 2): what
    // matters here is the one message and that the program ran.
    let (_, _, err) = run(&[
        "record",
        "--sample=4000000000",
        "-o",
        s(&prof),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("--sample")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("recording goes on without CPU samples")
            && lines[0].contains("perf_event_max_sample_rate"),
        "{err}"
    );
    assert!(marker.exists(), "the program ran: {err}");
}

#[test]
fn exporting_samples_of_a_profile_without_any_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data(ALEXNET);
    for flag in ["--folded", "--firefox"] {
        let out = dir.path().join("out");
        let err = fails(&["export", s(&trace), flag, s(&out)]);
        assert!(err.contains("holds no CPU samples"), "{err}");
        assert!(err.contains("strato record --sample"), "{err}");
        assert!(!out.exists(), "{flag}: no file on error");
    }
}

/// An Nsight Systems export's CPU samples (`COMPOSITE_EVENTS` with `SAMPLING_CALLCHAINS`) take
/// the same path as live ones: the folded export has one count per sample and whole chains
/// (as deep as the deepest in the file), the Firefox export keeps every sample, and the report
/// draws a flame graph. The figures come from SQL on the file.
#[test]
fn nsys_samples_export_and_draw_like_recorded_ones() {
    let trace = data("nsys/pipit_cloverleaf_cuda.sqlite");
    let db = rusqlite::Connection::open(&trace).unwrap();
    let (samples, deepest): (u64, usize) = db
        .query_row(
            "SELECT (SELECT count(*) FROM COMPOSITE_EVENTS WHERE globalTid IS NOT NULL), \
             (SELECT max(stackDepth) + 1 FROM SAMPLING_CALLCHAINS)",
            [],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as usize)),
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    let folded = dir.path().join("stacks.folded");
    ok(&["export", s(&trace), "--folded", s(&folded)]);
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut total = 0;
    let mut max_frames = 0;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        total += count.parse::<u64>().unwrap();
        // CloverLeaf has no NVTX ranges and no Python: `op:…;[python stack not sampled];` on top.
        let native = stack
            .strip_prefix("op:(no operation);[python stack not sampled];")
            .unwrap_or_else(|| panic!("{line}"));
        max_frames = max_frames.max(native.split(';').count());
    }
    assert_eq!(total, samples, "every sample once");
    assert_eq!(max_frames, deepest, "whole call chains");

    let firefox = dir.path().join("profile.json");
    ok(&["export", s(&trace), "--firefox", s(&firefox)]);
    assert_eq!(firefox_samples(&firefox), samples);

    let html = dir.path().join("report.html");
    ok(&["report", s(&trace), "-o", s(&html)]);
    let page = std::fs::read_to_string(&html).unwrap();
    let at = page.find("id=\"flame\"").expect("a CPU samples section");
    let section = &page[at..];
    assert!(
        section.contains(&format!("(no operation) — {samples} samples")),
        "one graph holding every sample"
    );
    assert!(section[..section.find("</section>").unwrap_or(section.len())].contains("<svg"));
}

#[test]
fn without_the_python_package_a_native_program_is_still_sampled() {
    // STRATOSCOPE_PYTHON names the interpreter the package must be importable by: `false`
    // imports nothing, whether or not this machine has the package installed.
    let no_package = [("STRATOSCOPE_PYTHON", "false")];
    let dir = tempfile::tempdir().unwrap();
    // Nothing but the recorder asked for: the missing package is the error (exit 2).
    let plain = dir.path().join("plain");
    let out = strato_env(
        &["record", "-o", s(&plain), "--", "sh", "-c", "true"],
        &no_package,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("the stratoscope Python package is not importable"));
    if !sampling_permitted() {
        eprintln!("skipped: perf events not permitted here");
        return;
    }
    // With a collector of the launcher's own, the program is recorded by it, and one message
    // says Python processes are not.
    let prof = dir.path().join("prof");
    let out = sample_busy_shell(&prof, &no_package);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let notes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("Python processes the program starts are not recorded"))
        .collect();
    assert_eq!(notes.len(), 1, "{err}");
    let folded = dir.path().join("stacks.folded");
    ok(&["export", s(&prof), "--folded", s(&folded)]);
    assert!(!std::fs::read_to_string(&folded).unwrap().trim().is_empty());
}
