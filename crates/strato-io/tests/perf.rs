//! `perf.data` and `perf script` import (issue 19, item 4), on real recordings made here with
//! the `perf` tool (installed by scripts/setup.sh) of a workload whose states are known, on the
//! committed fixtures in `fixtures/perf` (see its README for provenance), and on damaged inputs.
//!
//! The two readers are independent (the binary file through `linux-perf-data` and tracepoint
//! formats from the file; the text as `perf` itself decodes it), so the same recording read both
//! ways must give the same thread states, and (recorded with `-g`) the same CPU-sample stacks.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use strato_trace::OptionalId;

use strato_io::{import_file, import_paths, perf, ErrorKind, ImportOptions};
use strato_trace::{ClockDomain, Level, Rank, SourceFormat, Span, Trace, Track, TrackKind};

/// The workload: prints its pid, tid and CLOCK_MONOTONIC around a 300 ms sleep, then writes
/// and fsyncs a file (blocked on I/O), then a thread contends on a lock.
const WORKLOAD: &str = r#"
import os, sys, threading, time
out = sys.argv[1]
t0 = time.monotonic_ns()
time.sleep(0.3)
t1 = time.monotonic_ns()
with open(out, "wb") as f:
    for _ in range(8):
        f.write(b"x" * (1 << 20)); f.flush(); os.fsync(f.fileno())
lock = threading.Lock(); lock.acquire()
th = threading.Thread(target=lambda: (lock.acquire(), lock.release())); th.start()
time.sleep(0.2); lock.release(); th.join()
t2 = time.monotonic_ns()
print(os.getpid(), threading.get_native_id(), t0, t1, t2)
"#;

struct Run {
    data: PathBuf,
    text: PathBuf,
    pid: i64,
    t0: i64,
    t1: i64,
    t2: i64,
}

/// Runs a `perf record` command; its output once it succeeded.
fn perf_record(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .expect("the `perf` tool (Debian linux-perf, installed by scripts/setup.sh)");
    assert!(
        out.status.success(),
        "perf record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Records the workload with `perf record` (`extra` args, e.g. `-k mono`) and writes the text
/// with `perf script --header --ns --show-task-events` (so it has the exits the binary has).
fn record(dir: &Path, name: &str, extra: &[&str]) -> Run {
    let data = dir.join(format!("{name}.data"));
    let text = dir.join(format!("{name}.txt"));
    let mut cmd = Command::new("perf");
    cmd.arg("record").args(extra).args([
        "-e",
        "sched:sched_switch",
        "-e",
        "sched:sched_wakeup",
        "-e",
        "raw_syscalls:sys_enter",
        "-e",
        "raw_syscalls:sys_exit",
        "-q",
        "-o",
    ]);
    cmd.arg(&data)
        .args(["--", "python3", "-c", WORKLOAD])
        .arg(dir.join("written"));
    let out = perf_record(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Vec<i64> = stdout
        .lines()
        .last()
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let script = Command::new("perf")
        .args(["script", "--header", "--ns", "--show-task-events", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(script.status.success());
    std::fs::write(&text, &script.stdout).unwrap();
    Run {
        data,
        text,
        pid: v[0],
        t0: v[2],
        t1: v[3],
        t2: v[4],
    }
}

type States = BTreeMap<i64, Vec<(i64, i64, String)>>;

/// Thread-state spans per tid, sorted.
fn states(trace: &Trace) -> States {
    let mut out: States = BTreeMap::new();
    for s in &trace.spans {
        if trace.str(s.category) != perf::THREAD_STATE_CATEGORY {
            continue;
        }
        assert_eq!(s.level, Level::Os);
        let TrackKind::Thread { tid, .. } = trace.tracks[s.track.0 as usize].kind else {
            panic!("state on a non-thread track");
        };
        out.entry(tid)
            .or_default()
            .push((s.start, s.end, trace.str(s.name).to_owned()));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Time per state of one thread within [from, to].
fn time_in(states: &[(i64, i64, String)], from: i64, to: i64) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (s, e, n) in states {
        let (a, b) = ((*s).max(from), (*e).min(to));
        if b > a {
            *out.entry(n.clone()).or_default() += b - a;
        }
    }
    out
}

#[test]
fn perf_data_and_perf_script_of_a_real_run_give_the_same_known_states() {
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), "mono", &["-k", "mono"]);
    let opts = ImportOptions::default();
    let binary = import_file(&run.data, &opts).unwrap();
    let text = import_file(&run.text, &opts).unwrap();
    for t in [&binary, &text] {
        assert_eq!(t.ranks[0].format, SourceFormat::Perf);
        assert_eq!(t.clock.reference, ClockDomain::Monotonic);
    }
    let (sb, st) = (states(&binary), states(&text));
    // The two independent readers agree span for span (the text has ns resolution).
    assert_eq!(sb, st);
    let main = &sb[&run.pid];
    // Each thread's states follow each other without overlap.
    for spans in sb.values() {
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap {w:?}");
        }
    }
    // The 300 ms sleep, on CLOCK_MONOTONIC as Python read it: blocked:sleep covers most of
    // it (the alignment check: a clock offset would move it out of [t0, t1]).
    let sleep = time_in(main, run.t0, run.t1);
    let window = run.t1 - run.t0;
    assert!(
        sleep.get("blocked:sleep").copied().unwrap_or(0) * 10 >= window * 9,
        "{sleep:?} in {window} ns"
    );
    // The fsync-bound writes: blocked on I/O.
    let after = time_in(main, run.t1, run.t2);
    assert!(
        after.get("blocked:io").copied().unwrap_or(0) > 0,
        "{after:?}"
    );
    // The second thread waits on the lock (futex) for about 200 ms.
    let lock_wait: i64 = sb
        .iter()
        .filter(|(tid, _)| **tid != run.pid)
        .map(|(_, s)| {
            time_in(s, run.t1, run.t2)
                .get("blocked:lock")
                .copied()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0);
    assert!(lock_wait >= 150_000_000, "{lock_wait}");
    // Every thread of the process is on a track of its pid.
    let tracks: Vec<_> = binary
        .tracks
        .iter()
        .filter_map(|t| match t.kind {
            TrackKind::Thread { pid, tid } if pid == run.pid => Some(tid),
            _ => None,
        })
        .collect();
    assert!(tracks.len() >= 2, "{tracks:?}");
    // Slow system calls are spans; the metadata counts every call.
    let meta: serde_json::Value =
        serde_json::from_str(&binary.ranks[0].metadata.to_json().unwrap()).unwrap();
    let calls = meta["syscalls"].as_array().unwrap();
    assert!(calls.iter().any(|c| c["name"] == "fsync"), "{calls:?}");
    assert!(binary
        .spans
        .iter()
        .any(|s| binary.str(s.category) == "syscall" && binary.str(s.name) == "fsync"));
}

#[test]
fn perf_default_clock_is_not_joined_and_mono_joins_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), "mono", &["-k", "mono"]);
    let default = record(dir.path(), "default", &[]);
    let opts = ImportOptions::default();
    let t = import_file(&default.data, &opts).unwrap();
    assert_ne!(t.clock.reference, ClockDomain::Monotonic);
    assert!(t.clock.sources[0].method.contains("not CLOCK_MONOTONIC"));

    // A recording of the same process: one thread track with an operation over the run.
    let recording = |shift: i64| {
        let mut tr = Trace::default();
        let rank = tr.add_rank(Rank {
            rank: None,
            world_size: None,
            source: "recording".into(),
            format: SourceFormat::Strato,
            host: None,
            metadata: strato_trace::metadata::SourceMetadata::None,
            notes: Default::default(),
        });
        tr.clock.reference = ClockDomain::Monotonic;
        let track = tr.add_track(Track {
            rank,
            kind: TrackKind::Thread {
                pid: run.pid,
                tid: run.pid,
            },
            name: None,
            sort_index: None,
        });
        let (name, category) = (tr.intern("op"), tr.intern("strato.op"));
        tr.spans.push(Span {
            track,
            start: run.t0 + shift,
            end: run.t2 + shift,
            name,
            category,
            level: Level::Operation,
            correlation: OptionalId::NONE,
            external_id: OptionalId::NONE,
            args: None,
        });
        tr
    };
    let mut joined = recording(0);
    perf::join(&mut joined, import_file(&run.data, &opts).unwrap()).unwrap();
    // The main thread's states are on the recording's own track now.
    let on_recording = joined
        .spans
        .iter()
        .filter(|s| s.track.0 == 0 && joined.str(s.category) == perf::THREAD_STATE_CATEGORY)
        .count();
    assert!(on_recording > 0);
    let perf_rank = &joined.ranks[1];
    assert!(perf_rank.notes.notes.is_empty(), "{:?}", perf_rank.notes);
    // Shifted by an hour (a wrong clock): one clear error.
    let mut wrong = recording(3_600_000_000_000);
    let err = perf::join(&mut wrong, import_file(&run.data, &opts).unwrap()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Perf(_)));
    assert!(err.to_string().contains("clock mismatch"), "{err}");
    // perf's default clock: kept apart, with a note.
    let mut apart = recording(0);
    perf::join(&mut apart, import_file(&default.data, &opts).unwrap()).unwrap();
    assert!(apart
        .spans
        .iter()
        .all(|s| s.track.0 != 0 || apart.str(s.category) != perf::THREAD_STATE_CATEGORY));
    assert_eq!(apart.ranks[1].notes.notes.len(), 1);
}

#[test]
fn damaged_perf_inputs_are_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = record(dir.path(), "mono", &["-k", "mono"]);
    let opts = ImportOptions::default();
    let bytes = std::fs::read(&run.data).unwrap();
    // Truncated anywhere: an error naming the file, never a panic (header, attributes, data,
    // feature sections).
    let cuts = [
        9,
        64,
        104,
        200,
        bytes.len() / 3,
        bytes.len() / 2,
        bytes.len() - 100,
    ];
    for cut in cuts {
        let p = dir.path().join(format!("cut{cut}.data"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        match import_file(&p, &opts) {
            Err(e) => {
                assert!(e.to_string().contains(&format!("cut{cut}.data")), "{e}");
            }
            // A cut in the feature sections leaves every record readable.
            Ok(t) => assert!(
                cut > bytes.len() / 2,
                "cut at {cut} imported {}",
                t.spans.len()
            ),
        }
    }
    // Over the memory budget: one error, not an import that fills memory.
    for input in [&run.data, &run.text] {
        let small = ImportOptions {
            memory_budget_bytes: 2_000,
            ..ImportOptions::default()
        };
        let err = import_file(input, &small).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::MemoryBudget { .. }), "{err}");
    }
    // A text with a line that is not perf script output, in the middle.
    let text = std::fs::read_to_string(&run.text).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let mid = lines.len() / 2;
    lines.insert(mid, "this is not an event line");
    let p = dir.path().join("bad.txt");
    std::fs::write(&p, lines.join("\n")).unwrap();
    let err = import_file(&p, &opts).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Perf(_)), "{err}");
    assert!(
        err.to_string().contains(&format!("line {}", mid + 1)),
        "{err}"
    );
    // A sched_switch whose fields were cut off.
    let mut cut_fields = text.clone();
    let at = cut_fields.find("prev_pid=").unwrap();
    cut_fields.replace_range(at..at + "prev_pid=".len() + 1, "");
    let p = dir.path().join("fields.txt");
    std::fs::write(&p, cut_fields).unwrap();
    let err = import_file(&p, &opts).unwrap_err();
    assert!(err.to_string().contains("sched_switch"), "{err}");
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/perf")
        .join(name)
}

#[test]
fn committed_fixtures_import() {
    let opts = ImportOptions::default();
    // perf.data with --switch-events and page faults only (no tracepoints): states from
    // PERF_RECORD_SWITCH, faults as instants.
    let t = import_paths(&[fixture("switch_events.perf.data")], &opts).unwrap();
    let s = states(&t);
    assert!(!s.is_empty());
    let names: std::collections::BTreeSet<_> = s.values().flatten().map(|x| x.2.clone()).collect();
    assert!(names.contains("running"), "{names:?}");
    assert!(t.instants.iter().any(|i| t.str(i.category) == "page_fault"));
    // perf script text with CPU samples and call stacks (microsecond times, no header): on
    // an unknown clock, samples named by their folded stack, perf's symbols in args.
    let t = import_paths(&[fixture("cpu_samples.perf-script.txt")], &opts).unwrap();
    assert_eq!(t.clock.reference, ClockDomain::Unknown);
    assert_eq!(t.clock.sources[0].error_ns, Some(1000));
    let samples: Vec<_> = t
        .instants
        .iter()
        .filter(|i| t.str(i.category) == "cpu_sample")
        .collect();
    assert!(samples.len() > 10);
    let mut with_stack = 0;
    for i in &samples {
        let a: serde_json::Value =
            serde_json::from_str(&t.args.get(i.args.unwrap().0 as usize).unwrap()).unwrap();
        let stack = a["stack"].as_array().unwrap();
        // Named by the whole stack folded outermost first (`symbol [module]` each; perf's
        // `[unknown]` as `??`): as many frames as call-stack lines, the leaf (the first line
        // under the event line) last.
        let name = t.str(i.name);
        assert_eq!(name.split(';').count(), stack.len(), "{name}");
        let leaf = name.rsplit(';').next().unwrap();
        let symbol = stack[0].as_str().unwrap();
        let symbol = if symbol == "[unknown]" { "??" } else { symbol };
        assert!(leaf.starts_with(&format!("{symbol} [")), "{name}");
        with_stack += usize::from(stack.len() > 1);
    }
    assert!(with_stack > 0);
    // Every sample line of the file became a sample (counted independently here).
    let text = std::fs::read_to_string(fixture("cpu_samples.perf-script.txt")).unwrap();
    let lines = text.lines().filter(|l| l.contains(" cpu-clock:")).count();
    assert_eq!(samples.len(), lines);
}

// CPU samples recorded with call chains (`perf record -g`) keep their stacks, in the
// representation `strato record --sample` writes (category `cpu_sample`, named by the stack
// folded outermost first, each frame `symbol [module]`), from both inputs: `perf script` text
// (frames as perf symbolized them) and `perf.data` (addresses symbolized by the importer
// through the file's mappings and the modules' ELF symbols). One real recording read both
// ways: the binary file's user-space frames must be perf's own, sample for sample.

/// Pure-Python work with calls into C (hashing, sorting, JSON) for about a second.
const BUSY: &str = r#"
import hashlib, json, time
end = time.monotonic() + 1.0
x = b"s" * 4096
while time.monotonic() < end:
    x = hashlib.sha256(x).digest() * 128
    json.loads(json.dumps(sorted(range(2000), key=lambda v: -v)))
"#;

/// `(ts, tid)` -> sample names (a `cpu_sample` instant's name is its folded stack).
fn stacks(trace: &Trace) -> BTreeMap<(i64, i64), Vec<String>> {
    let mut out: BTreeMap<(i64, i64), Vec<String>> = BTreeMap::new();
    for i in &trace.instants {
        if trace.str(i.category) != "cpu_sample" {
            continue;
        }
        let TrackKind::Thread { tid, .. } = trace.track(i.track).kind else {
            panic!("a sample off its thread's track");
        };
        out.entry((i.ts, tid))
            .or_default()
            .push(trace.str(i.name).to_owned());
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// The user-space part of a folded stack (kernel frames left out: perf symbolizes them from
/// this machine's kallsyms, the importer cannot from the file).
fn user_frames(stack: &str) -> Vec<&str> {
    stack
        .split(';')
        .filter(|f| !f.ends_with("[kernel.kallsyms]"))
        .collect()
}

#[test]
fn call_chains_of_perf_record_g_become_folded_stacks_from_both_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("g.data");
    perf_record(
        Command::new("perf")
            .args(["record", "-g", "-e", "cpu-clock", "-F", "499", "-q", "-o"])
            .arg(&data)
            .args(["--", "python3", "-c", BUSY]),
    );
    let script = Command::new("perf")
        .args(["script", "--header", "--ns", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(script.status.success());
    let text = dir.path().join("g.txt");
    std::fs::write(&text, &script.stdout).unwrap();

    let options = ImportOptions::default();
    let from_text = stacks(&import_file(&text, &options).unwrap());
    let from_data = stacks(&import_file(&data, &options).unwrap());
    let count = |m: &BTreeMap<(i64, i64), Vec<String>>| m.values().map(Vec::len).sum::<usize>();
    // Every sample of the text (counted independently) is imported from both inputs.
    let text_samples = String::from_utf8_lossy(&script.stdout)
        .lines()
        .filter(|l| l.contains(" cpu-clock:"))
        .count();
    assert!(text_samples >= 100, "{text_samples} samples");
    assert_eq!(count(&from_text), text_samples);
    assert_eq!(count(&from_data), text_samples);
    assert_eq!(
        from_text.keys().collect::<Vec<_>>(),
        from_data.keys().collect::<Vec<_>>()
    );

    // Whole chains: the text's stacks are as deep as perf printed them, and deep.
    let deepest = from_text
        .values()
        .flatten()
        .map(|s| s.split(';').count())
        .max()
        .unwrap();
    assert!(deepest >= 5, "deepest stack {deepest} frames");

    // The binary file's user frames are perf's own, sample for sample. Symbol aliases (two
    // names at one address) may be named either way, so a frame agrees when its module agrees
    // and its symbol does, or when one side has no name for it (`??`, or perf's synthetic
    // `callee@plt` for a PLT stub); at most 2% of the frames may differ.
    let (mut frames, mut differ, mut depth_differs) = (0usize, 0usize, 0usize);
    for (key, texts) in &from_text {
        for (t, d) in texts.iter().zip(&from_data[key]) {
            let (t, d) = (user_frames(t), user_frames(d));
            if t.len() != d.len() {
                depth_differs += 1;
                if depth_differs <= 3 {
                    eprintln!("depth text {t:?}\ndepth data {d:?}");
                }
            }
            for (a, b) in t.iter().zip(&d) {
                frames += 1;
                let module = |f: &str| f.rsplit_once(" [").map(|x| x.1.to_owned());
                // perf names PLT stubs `callee@plt`, a symbol no ELF table holds.
                let unnamed = |f: &str| f.starts_with("?? ") || f.contains("@plt [");
                let same = a == b || (module(a) == module(b) && (unnamed(a) || unnamed(b)));
                differ += usize::from(!same);
                if !same && differ <= 8 {
                    eprintln!("text {a:?}\ndata {b:?}");
                }
            }
        }
    }
    eprintln!(
        "{text_samples} samples, {frames} user frames, {differ} differ, {depth_differs} \
         samples differ in depth, deepest {deepest}"
    );
    assert!(frames > 0);
    assert!(
        differ * 50 <= frames,
        "{differ} of {frames} frames differ between perf.data and perf script"
    );
    assert!(
        depth_differs * 50 <= text_samples,
        "{depth_differs} of {text_samples} samples differ in depth"
    );
}
