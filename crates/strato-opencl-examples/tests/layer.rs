//! End-to-end tests of the OpenCL layer on a real device (PoCL): the demo program and a
//! pyopencl program run under `OPENCL_LAYERS`, their recordings are decoded and checked.
//! Nothing is mocked; a machine without an OpenCL device fails these tests (`scripts/setup.sh`
//! installs PoCL).

use std::path::{Path, PathBuf};
use std::process::Command;

use strato_opencl_layer::summary::{attribute, operations, summarize, Summary};
use strato_record::{decode, Event, Level, Recording, TrackDef};

const DEMO: &str = env!("CARGO_BIN_EXE_strato-opencl-demo");

/// The layer library built with this test (the examples crate depends on the layer, so cargo
/// builds its cdylib into `deps/`).
fn layer_so() -> PathBuf {
    let dir = Path::new(DEMO).parent().expect("target dir");
    let candidates = [
        dir.join("deps/libstrato_opencl_layer.so"),
        dir.join("libstrato_opencl_layer.so"),
    ];
    candidates
        .iter()
        .filter(|p| p.exists())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .cloned()
        .expect("libstrato_opencl_layer.so built")
}

struct Run {
    _dir: tempfile::TempDir,
    path: PathBuf,
    stdout: serde_json::Value,
}

impl Run {
    fn file(&self, suffix: &str) -> Option<PathBuf> {
        std::fs::read_dir(&self.path)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(suffix))
    }

    fn opencl(&self) -> Recording {
        let path = self.file("-opencl.strato").expect("an -opencl.strato file");
        decode(&std::fs::read(path).expect("read")).expect("decode")
    }

    /// The program's own recording (operations), when it wrote one.
    fn main_recording(&self) -> Option<Recording> {
        let path = std::fs::read_dir(&self.path)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                let n = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                n.ends_with(".strato") && !n.contains('-')
            })?;
        decode(&std::fs::read(path).ok()?).ok()
    }
}

fn run_cmd(mut cmd: Command, level: &str) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = cmd
        .env("STRATOSCOPE_OUT", dir.path())
        .env("OPENCL_LAYERS", layer_so())
        .env("STRATOSCOPE_OPENCL", level)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("{}");
    Run {
        path: dir.path().to_owned(),
        _dir: dir,
        stdout: serde_json::from_str(line).expect("json line"),
    }
}

fn demo(args: &[&str], level: &str) -> Run {
    let mut cmd = Command::new(DEMO);
    cmd.args(args);
    run_cmd(cmd, level)
}

/// (track, start, end, level, name, correlation, args) of every SPAN record.
type SpanRow = (u32, i64, i64, u8, String, Option<u64>, Option<String>);

fn spans(rec: &Recording) -> Vec<SpanRow> {
    rec.events
        .iter()
        .filter_map(|e| match e {
            Event::Span {
                track,
                start,
                end,
                level,
                name,
                correlation,
                args,
                ..
            } => Some((
                *track,
                *start,
                *end,
                *level,
                rec.str(*name).to_owned(),
                *correlation,
                args.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn report(rec: &Recording) -> serde_json::Value {
    summarize(rec).clock_report.expect("opencl_clock metadata")
}

/// Asserts the properties every recording with device activity must have.
fn assert_aligned(s: &Summary) {
    let c = &s.checks;
    assert!(c.device_spans > 0);
    assert_eq!(
        c.matched, c.device_spans,
        "every device span has its enqueue call"
    );
    assert_eq!(
        c.causality_violations, 0,
        "device start before its enqueue began"
    );
    assert_eq!(c.order_violations, 0, "in-order queue order");
    let r = s.clock_report.as_ref().expect("clock report");
    assert_eq!(r["causality_violations"], 0);
    assert_eq!(
        r["queued_outside_call"], 0,
        "QUEUED stamp outside its enqueue call: {r}"
    );
    let (_, _, err) = s.clock.expect("CLOCK record");
    let err = err.expect("error bound");
    assert!((0..10_000).contains(&err), "error bound {err} ns");
}

#[test]
fn tour_records_every_call_forces_profiling_and_keeps_semantics() {
    let run = demo(&["tour"], "full");
    assert_eq!(
        run.stdout["result_ok"], true,
        "the program computes the same result"
    );
    assert_eq!(
        run.stdout["app_sees_profiling"], false,
        "the layer hides the profiling flag it added"
    );
    let rec = run.opencl();
    let s = summarize(&rec);
    for (name, n) in [
        ("clGetPlatformIDs", 1),
        ("clCreateContext", 1),
        ("clCreateCommandQueueWithProperties", 1),
        ("clBuildProgram", 1),
        ("clCreateKernel", 1),
        ("clCreateBuffer", 2),
        ("clEnqueueWriteBuffer", 1),
        ("clEnqueueCopyBuffer", 1),
        ("clEnqueueFillBuffer", 1),
        ("clEnqueueNDRangeKernel", 2),
        ("clEnqueueReadBuffer", 1),
        ("clEnqueueMapBuffer", 1),
        ("clEnqueueUnmapMemObject", 1),
        ("clEnqueueMarkerWithWaitList", 1),
        ("clFinish", 1),
        ("clReleaseMemObject", 2),
        ("clReleaseCommandQueue", 1),
    ] {
        assert!(
            s.api_count(name) >= n,
            "{name}: {} calls recorded",
            s.api_count(name)
        );
    }
    let all = spans(&rec);
    let queue_create = all
        .iter()
        .find(|s| s.4 == "clCreateCommandQueueWithProperties")
        .expect("queue creation");
    assert!(queue_create
        .6
        .as_deref()
        .unwrap_or("")
        .contains("\"profiling_added\":true"));
    // Every enqueue has a device command with the same correlation id, on a queue track.
    let enqueues: Vec<_> = all
        .iter()
        .filter(|s| s.3 == Level::AcceleratorApi.code() && s.5.is_some())
        .collect();
    assert_eq!(enqueues.len(), 9);
    for e in &enqueues {
        let dev = all
            .iter()
            .find(|d| d.3 != Level::AcceleratorApi.code() && d.5 == e.5)
            .unwrap_or_else(|| panic!("no device span for {}", e.4));
        assert!(matches!(
            rec.tracks[dev.0 as usize],
            Some(TrackDef::Queue { .. })
        ));
    }
    // The kernel enqueued with no event pointer has its device span too (the layer's event).
    let kernels: Vec<_> = all
        .iter()
        .filter(|s| s.3 == Level::DeviceKernel.code())
        .collect();
    assert_eq!(kernels.len(), 2);
    assert!(kernels.iter().all(|k| k.4 == "scale"));
    // Copy sizes and directions.
    let copy = |name: &str| {
        all.iter()
            .find(|s| s.4 == name)
            .and_then(|s| s.6.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    for (name, dir) in [
        ("WriteBuffer HtoD", "HtoD"),
        ("CopyBuffer DtoD", "DtoD"),
        ("ReadBuffer DtoH", "DtoH"),
    ] {
        let args: serde_json::Value = serde_json::from_str(&copy(name)).expect("args");
        assert_eq!(args["bytes"], 262_144, "{name}");
        assert_eq!(args["direction"], dir, "{name}");
    }
    // Memory in use returns to 0 after the releases; the peak is both buffers.
    assert_eq!(s.memory.len(), 1);
    assert_eq!(s.memory[0].1, 524_288.0);
    assert_eq!(s.memory[0].2, 0.0);
    // The device and its properties.
    assert_eq!(rec.devices.len(), 1);
    assert!(rec.devices[0].props_json.contains("CLOCK_MONOTONIC_RAW"));
    let r = report(&rec);
    assert_eq!(r["layer_events_created"], 1);
    assert_eq!(r["layer_events_released"], r["commands"]);
    assert_eq!(r["memory_in_use_at_end"], 0);
    assert_aligned(&s);
    println!("{}", s.render());
}

/// A buffer the application releases while the implementation still holds it (a queued write
/// and kernel use it): memory in use returns to 0 when the implementation frees it, not never.
#[test]
fn buffer_released_while_in_use_is_counted_freed_when_destroyed() {
    let run = demo(&["release"], "full");
    let rec = run.opencl();
    let s = summarize(&rec);
    assert_eq!(s.memory.len(), 1);
    assert_eq!(s.memory[0].1, 4_194_304.0, "the peak is the buffer");
    assert_eq!(s.memory[0].2, 0.0, "memory in use at the last sample");
    assert_eq!(report(&rec)["memory_in_use_at_end"], 0);
    println!(
        "reference count at the release: {}",
        run.stdout["refs_at_release"]
    );
}

#[test]
fn no_event_leaks_over_10k_enqueues() {
    let run = demo(&["leak", "10000"], "full");
    // The same program without the layer: PoCL's own references to a completed event.
    let out = Command::new(DEMO)
        .args(["leak", "200"])
        .env_remove("OPENCL_LAYERS")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    let plain: serde_json::Value =
        serde_json::from_str(text.lines().last().unwrap_or("{}")).expect("json");
    assert!(plain["probe_refcount"].as_u64().is_some_and(|c| c >= 1));
    assert_eq!(
        run.stdout["probe_refcount"], plain["probe_refcount"],
        "the layer released its reference to the application's event"
    );
    let rss0 = run.stdout["rss_before_kb"].as_u64().unwrap_or(0);
    let rss1 = run.stdout["rss_after_kb"].as_u64().unwrap_or(0);
    println!("RSS {rss0} kB -> {rss1} kB over 10k enqueues");
    assert!(rss1 < rss0 + 64 * 1024, "RSS grew {} kB", rss1 - rss0);
    let rec = run.opencl();
    let r = report(&rec);
    assert_eq!(r["layer_events_created"], 5200);
    assert_eq!(r["commands"], 10_200);
    assert_eq!(r["layer_events_released"], 10_200, "{r}");
    let s = summarize(&rec);
    assert_eq!(s.kernels[0].count, 10_200);
    assert_aligned(&s);
}

#[test]
fn collection_levels() {
    let api = demo(&["tour"], "api").opencl();
    let levels: Vec<u8> = spans(&api).iter().map(|s| s.3).collect();
    assert!(levels.contains(&Level::AcceleratorApi.code()));
    assert!(!levels
        .iter()
        .any(|&l| Level::from_code(l).is_some_and(Level::is_device_op)));
    let device = demo(&["tour"], "device").opencl();
    let levels: Vec<u8> = spans(&device).iter().map(|s| s.3).collect();
    assert!(!levels.contains(&Level::AcceleratorApi.code()));
    assert_eq!(
        levels
            .iter()
            .filter(|&&l| Level::from_code(l).is_some_and(Level::is_device_op))
            .count(),
        9
    );
    let off = demo(&["tour"], "off");
    assert!(
        off.file("-opencl.strato").is_none(),
        "level off records nothing"
    );
    assert_eq!(off.stdout["result_ok"], true);
}

#[test]
fn zins_many_small_copies_vs_one_large_copy() {
    let (chunks, bytes, iters) = (4096u64, 8u64 << 20, 2u64);
    let run = demo(
        &[
            "copies",
            &chunks.to_string(),
            &bytes.to_string(),
            &iters.to_string(),
        ],
        "full",
    );
    assert_eq!(run.stdout["sums_equal"], true);
    let rec = run.opencl();
    let s = summarize(&rec);
    assert_aligned(&s);
    let ops = operations(&run.main_recording().expect("the demo's operations"));
    let rows = attribute(&rec, &ops);
    let row = |name: &str| rows.iter().find(|r| r.op == name).cloned().expect(name);
    let small = row("many_small_copies");
    let large = row("one_large_copy");
    assert_eq!(small.htod_copies, chunks * iters);
    assert_eq!(large.htod_copies, iters);
    assert_eq!(small.htod_bytes, bytes * iters);
    assert_eq!(large.htod_bytes, bytes * iters);
    // Same kernels and read-back in both.
    assert_eq!(
        small.commands - small.htod_copies,
        large.commands - large.htod_copies
    );
    assert_eq!(small.kernel_ns > 0, large.kernel_ns > 0);
    // Many small copies cost more in total: per-copy overhead on the host and on the device.
    // The one large copy's device time is what the bytes cost at the device's bandwidth; the
    // rest of the many small copies' device phase is per-copy overhead.
    let at_bandwidth = large.copy_ns as f64;
    let per = |r: &strato_opencl_layer::summary::OpRow| {
        (r.htod_phase_ns as f64 - at_bandwidth) / r.htod_copies as f64
    };
    println!(
        "many small copies: {} HtoD copies of {} B, device copy time {:.3} ms, device copy phase {:.3} ms, copy enqueue calls {:.3} ms; \
         one large copy: {} HtoD copies of {} B, device copy time {:.3} ms, device copy phase {:.3} ms, copy enqueue calls {:.3} ms; \
         per-copy overhead beyond bandwidth {:.2} us; host wall: small {} ms, large {} ms",
        small.htod_copies,
        bytes / chunks,
        small.copy_ns as f64 / 1e6,
        small.htod_phase_ns as f64 / 1e6,
        small.htod_api_ns as f64 / 1e6,
        large.htod_copies,
        bytes,
        large.copy_ns as f64 / 1e6,
        large.htod_phase_ns as f64 / 1e6,
        large.htod_api_ns as f64 / 1e6,
        per(&small) / 1e3,
        run.stdout["many_small_ms"],
        run.stdout["one_large_ms"],
    );
    assert!(
        small.htod_phase_ns > large.htod_phase_ns,
        "moving the same bytes in many small copies takes longer on the device timeline"
    );
    assert!(per(&small) > 0.0);
    assert!(
        run.stdout["many_small_ms"].as_f64() > run.stdout["one_large_ms"].as_f64(),
        "{}",
        run.stdout
    );
}

#[test]
fn zins_compute_bound_kernel_ranking() {
    let run = demo(&["ranking", "3"], "full");
    let rec = run.opencl();
    let s = summarize(&rec);
    assert_aligned(&s);
    let count = |n: &str| {
        s.kernels
            .iter()
            .find(|k| k.name == n)
            .map_or(0, |k| k.count)
    };
    // 3 iterations of each variant plus one warm-up of each.
    assert_eq!(count("conv3x3"), 8);
    assert_eq!(count("relu"), 8);
    assert_eq!(count("maxpool2x2"), 4);
    assert_eq!(count("matmul"), 8);
    assert!(["conv3x3", "matmul"].contains(&s.kernels[0].name.as_str()));
    let ops = operations(&run.main_recording().expect("operations"));
    let rows = attribute(&rec, &ops);
    let dev = |n: &str| {
        rows.iter()
            .find(|r| r.op == n)
            .map_or(0, |r| r.kernel_ns + r.copy_ns + r.other_device_ns)
    };
    let (a, b) = (
        dev("conv_relu_maxpool_matmul"),
        dev("strided_conv_relu_matmul"),
    );
    println!("{}", s.render());
    println!(
        "device time: conv+relu+maxpool+matmul {:.3} ms, strided conv+relu+matmul {:.3} ms",
        a as f64 / 1e6,
        b as f64 / 1e6
    );
    assert!(b < a, "the strided conv does less work");
}

#[test]
fn pyopencl_program_is_recorded() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let has = Command::new(&python)
        .args(["-c", "import pyopencl"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has,
        "pyopencl is not installed (scripts/requirements-test.txt)"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/opencl/usecases.py");
    let mut cmd = Command::new(&python);
    cmd.arg(script)
        .env("CHUNKS", "64")
        .env("BYTES", "1048576")
        .env("ITERS", "1");
    let run = run_cmd(cmd, "full");
    assert_eq!(run.stdout["copies"]["sums_equal"], true);
    let rec = run.opencl();
    let pid = rec.process.as_ref().map(|p| p.pid);
    assert_eq!(
        pid,
        run.stdout["pid"].as_i64(),
        "the layer records the Python process"
    );
    let s = summarize(&rec);
    assert_aligned(&s);
    let htod = s
        .copies
        .iter()
        .find(|c| c.direction == "HtoD")
        .expect("HtoD");
    // 64 small + 1 large, plus the warm-up and ranking inputs are COPY_HOST_PTR (no enqueue).
    assert_eq!(htod.count, 65);
    assert_eq!(htod.bytes, 2 << 20);
    for k in [
        "square",
        "reduce_sum",
        "conv3x3",
        "relu",
        "maxpool2x2",
        "matmul",
    ] {
        assert!(s.kernels.iter().any(|r| r.name == k), "{k}");
    }
    assert!(
        s.api_count("clCreateCommandQueueWithProperties") + s.api_count("clCreateCommandQueue")
            >= 1
    );
}
