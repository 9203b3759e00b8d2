//! Nsight Compute CSV importer and `attach`: the real sample file plus synthetic variants of
//! the format (wide raw page, old and new headers, unit conversion, FLOP counters).

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use strato_io::{input, ncu, ErrorKind, ImportOptions};
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::{Level, Rank, SourceFormat, Trace, TrackKind};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ncu/gemm_tiled.csv")
}

fn import_path(path: &Path, options: &ImportOptions) -> strato_io::Result<Trace> {
    let input = input::open(path, 1 << 30)?;
    ncu::import(path, input, options)
}

fn import_text(text: &str) -> strato_io::Result<Trace> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ncu.csv");
    std::fs::write(&path, text).unwrap();
    import_path(&path, &ImportOptions::default())
}

fn args(trace: &Trace, span: usize) -> Value {
    serde_json::from_str(&trace.args_text(trace.spans[span].args).unwrap()).unwrap()
}

const LONG_HEADER: &str = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\
\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\
\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";

/// One details-form row.
fn row(id: u32, kernel: &str, metric: &str, unit: &str, value: &str) -> String {
    format!(
        "\"{id}\",\"100\",\"app\",\"host1\",\"{kernel}\",\"1\",\"7\",\"(128, 1, 1)\",\
         \"(1024, 1, 1)\",\"0\",\"8.6\",\"Command line profiler metrics\",\"{metric}\",\
         \"{unit}\",\"{value}\"\n"
    )
}

// Figures for the real file were counted independently with Python's csv module:
//   lines = open(f, encoding='utf-8-sig').read().splitlines()
//   i = first line index starting with '"ID"'  -> 8 (file line 9; 8 preamble lines)
//   rows = list(csv.DictReader(lines[i:]))     -> 12 rows, Counter(ID) == {'0': 12}
// i.e. 1 launch with 12 metrics; dram__bytes_op_read.sum = "53,261,312" byte,
// dram__bytes_op_write.sum = "3,377,920" byte, gpu__time_duration.sum = "10,195,552" ns,
// sm__warps_active.avg.pct_of_peak_sustained_active = "66.65" %.
#[test]
fn ncu_real_file_gemm_tiled() {
    let path = real_file();
    let trace = strato_io::import_file(&path, &ImportOptions::default()).unwrap();
    assert_eq!(trace.spans.len(), 1, "one launch");
    let a = args(&trace, 0);
    assert_eq!(a["metrics"].as_object().unwrap().len(), 12);
    assert_eq!(a["dram_bytes"], json!(53_261_312_i64 + 3_377_920));
    assert_eq!(a["duration_ns"], json!(10_195_552));
    assert_eq!(a["occupancy_pct"], json!(66.65));
    assert!(a.get("flops").is_none(), "no FLOP counters in this file");
    assert_eq!(a["block"], json!([32, 32, 1]));
    assert_eq!(a["grid"], json!([64, 64, 1]));
    assert_eq!(a["cc"], json!("12.0"));
    assert_eq!(
        a["metrics"]["dram__bytes_op_read.sum"],
        json!({"value": 53_261_312, "unit": "byte", "section": "Command line profiler metrics"})
    );
    assert_eq!(
        a["metrics"]["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]["unit"],
        json!("sector")
    );
    assert_eq!(
        a["metrics"]["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"],
        json!({"value": 4_695_342, "unit": "", "section": "Command line profiler metrics"})
    );

    let span = &trace.spans[0];
    assert_eq!(
        trace.str(span.name),
        "void unnamed>::gemm_tiled_kernel<32>(const float *, const float *, float *, int, int, int)"
    );
    assert_eq!(trace.str(span.category), "ncu");
    assert_eq!(span.level, Level::DeviceKernel);
    assert_eq!((span.start, span.end), (0, 10_195_552));
    assert_eq!(
        trace.track(span.track).kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 7
        }
    );
    let rank = &trace.ranks[0];
    assert_eq!(rank.format.as_str(), "ncu");
    assert_eq!(rank.host.as_deref(), Some("127.0.0.1"));
    // BOM and the 8 preamble lines (==PROF== and program output) were skipped and kept.
    let meta: Value = serde_json::from_str(&rank.metadata.to_json().unwrap()).unwrap();
    let preamble = meta["preamble"].as_array().unwrap();
    assert_eq!(preamble.len(), 8);
    assert!(preamble[0]
        .as_str()
        .unwrap()
        .starts_with("==PROF== Connected"));
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].pid, 23056);
    assert_eq!(
        trace.processes[0].name.as_deref(),
        Some("roofline_profiler.exe")
    );
    assert_eq!(trace.devices.len(), 1);
    assert_eq!(trace.devices[0].index, 0);
    assert_eq!(trace.devices[0].compute_major, Some(12));
    assert_eq!(trace.devices[0].compute_minor, Some(0));
    assert_eq!(trace.devices[0].name, None, "program output is not trusted");

    // Metrics are kept even when args are off.
    let lean = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let trace = import_path(&path, &lean).unwrap();
    assert_eq!(args(&trace, 0)["metrics"].as_object().unwrap().len(), 12);
}

#[test]
fn ncu_consecutive_rows_group_by_id_and_place_back_to_back() {
    let mut text = String::from("\u{feff}==PROF== Connected to process 100\nhello from app\n");
    text.push_str(LONG_HEADER);
    text.push_str(&row(0, "k1", "gpu__time_duration.sum", "ns", "1,000"));
    text.push_str(&row(0, "k1", "dram__bytes_read.sum", "byte", "10"));
    text.push_str(&row(1, "k2", "gpu__time_duration.sum", "ns", "500"));
    text.push_str(&row(2, "k3", "dram__bytes_read.sum", "byte", "1"));
    text.push_str(&row(3, "k4", "gpu__time_duration.sum", "ns", "20"));
    text.push_str("==PROF== Disconnected from process 100\n");
    let trace = import_text(&text).unwrap();
    trace.validate().unwrap();
    let placed: Vec<(i64, i64)> = trace.spans.iter().map(|s| (s.start, s.end)).collect();
    // k3 has no duration: a zero-length span, no duration_ns.
    assert_eq!(
        placed,
        [(0, 1000), (1000, 1500), (1500, 1500), (1500, 1520)]
    );
    assert!(args(&trace, 2).get("duration_ns").is_none());
    // Only the read half of the DRAM traffic: no dram_bytes (never guessed).
    assert!(args(&trace, 0).get("dram_bytes").is_none());
    assert_eq!(args(&trace, 0)["metrics"].as_object().unwrap().len(), 2);
}

#[test]
fn ncu_wide_raw_page_with_units_row() {
    let text = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\
\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"device__attribute_display_name\",\
\"dram__bytes_read.sum\",\"dram__bytes_write.sum\",\"gpu__time_duration.sum\",\
\"sm__warps_active.avg.pct_of_peak_sustained_active\"\n\
\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"Mbyte\",\"Kbyte\",\"usecond\",\"%\"\n\
\"0\",\"42\",\"train\",\"node1\",\"gemm\",\"1\",\"13\",\"(256, 1, 1)\",\"(80, 1, 1)\",\"1\",\"8.0\",\
\"NVIDIA A100-SXM4-40GB\",\"1.50\",\"256.00\",\"12.34\",\"48.5\"\n\
\"1\",\"42\",\"train\",\"node1\",\"relu\",\"1\",\"13\",\"(256, 1, 1)\",\"(80, 1, 1)\",\"1\",\"8.0\",\
\"NVIDIA A100-SXM4-40GB\",\"0.10\",\"1,024.00\",\"2.00\",\"\"\n";
    let trace = import_text(text).unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.spans.len(), 2);
    let a = args(&trace, 0);
    assert_eq!(a["dram_bytes"], json!(1_500_000 + 256_000));
    assert_eq!(a["duration_ns"], json!(12_340));
    assert_eq!(a["occupancy_pct"], json!(48.5));
    assert_eq!(
        a["metrics"]["gpu__time_duration.sum"],
        json!({"value": 12_340, "unit": "ns", "source_value": 12.34, "source_unit": "usecond"})
    );
    let b = args(&trace, 1);
    assert_eq!(b["dram_bytes"], json!(100_000 + 1_024_000));
    assert!(
        b.get("occupancy_pct").is_none(),
        "empty cell = not collected"
    );
    assert_eq!(trace.spans[1].start, 12_340);
    assert_eq!(trace.spans[1].end, 14_340);
    assert_eq!(
        trace.track(trace.spans[0].track).kind,
        TrackKind::DeviceQueue {
            device: 1,
            queue: 13
        }
    );
    assert_eq!(
        trace.devices[0].name.as_deref(),
        Some("NVIDIA A100-SXM4-40GB")
    );
    assert_eq!(trace.devices[0].compute_major, Some(8));
}

#[test]
fn ncu_old_header_without_block_grid_device() {
    let text = "==PROF== Connected to process 5\n\
\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Kernel Time\",\"Context\",\
\"Stream\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
\"0\",\"5\",\"a.out\",\"127.0.0.1\",\"vecAdd\",\"2020-Mar-03 10:00:00\",\"1\",\"7\",\
\"GPU Speed Of Light\",\"gpu__time_duration.sum\",\"nsecond\",\"2,336\"\n\
\"0\",\"5\",\"a.out\",\"127.0.0.1\",\"vecAdd\",\"2020-Mar-03 10:00:00\",\"1\",\"7\",\
\"GPU Speed Of Light\",\"dram__bytes.sum\",\"Kbyte\",\"786.43\"\n";
    let trace = import_text(text).unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.spans.len(), 1);
    let a = args(&trace, 0);
    assert_eq!(a["duration_ns"], json!(2336));
    assert_eq!(a["dram_bytes"], json!(786_430));
    assert_eq!(a["kernel_time"], json!("2020-Mar-03 10:00:00"));
    assert!(a.get("block").is_none() && a.get("grid").is_none() && a.get("cc").is_none());
    assert_eq!(
        trace.track(trace.spans[0].track).kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 7
        }
    );
    assert!(
        trace.devices.is_empty(),
        "no Device column: no device invented"
    );
}

/// Newer ncu (2023+) details output: five rule columns after "Metric Value"; metric rows stop
/// after the value with a trailing comma (16 fields for a 20-column header), rule rows leave
/// the metric columns empty and name the section by its identifier.
#[test]
fn ncu_rule_name_and_estimated_speedup_columns() {
    let header = LONG_HEADER.trim_end().to_owned()
        + ",\"Rule Name\",\"Rule Type\",\"Rule Description\",\"Estimated Speedup Type\",\
\"Estimated Speedup\"\n";
    let ident =
        "\"0\",\"100\",\"app\",\"h\",\"k\",\"1\",\"7\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\"";
    let mut text = header;
    for (section, metric, unit, value) in [
        (
            "GPU Speed Of Light Throughput",
            "Duration",
            "usecond",
            "406.24",
        ),
        ("Occupancy", "Achieved Occupancy", "%", "41.20"),
        (
            "Launch Statistics",
            "Function Cache Configuration",
            "",
            "CachePreferNone",
        ),
    ] {
        text.push_str(&format!(
            "{ident},\"{section}\",\"{metric}\",\"{unit}\",\"{value}\",\n"
        ));
    }
    text.push_str(&format!(
        "{ident},\"Occupancy\",\"\",\"\",\"\",\"AchievedOccupancy\",\"OPT\",\
         \"Low occupancy, see ...\",\"local\",\"58.8\"\n"
    ));
    text.push_str(&format!(
        "{ident},\"SpeedOfLight\",\"\",\"\",\"\",\"SOLBottleneck\",\"OPT\",\"Latency bound.\",\"\",\"\"\n"
    ));
    let trace = import_text(&text).unwrap();
    assert_eq!(trace.spans.len(), 1);
    let a = args(&trace, 0);
    assert_eq!(a["metrics"].as_object().unwrap().len(), 3);
    assert_eq!(
        a["metrics"]["Function Cache Configuration"]["value"],
        json!("CachePreferNone")
    );
    // Section display labels of the same metrics: the Speed Of Light "Duration" is
    // gpu__time_duration.sum and the Occupancy "Achieved Occupancy" is
    // sm__warps_active.avg.pct_of_peak_sustained_active.
    assert_eq!(a["duration_ns"], json!(406_240));
    assert_eq!(a["occupancy_pct"], json!(41.2));
    assert_eq!(
        a["rules"],
        json!([
            {"name": "AchievedOccupancy", "type": "OPT", "description": "Low occupancy, see ...",
             "speedup_type": "local", "speedup": 58.8, "section": "Occupancy"},
            {"name": "SOLBottleneck", "type": "OPT", "description": "Latency bound.",
             "section": "SpeedOfLight"}
        ])
    );
}

#[test]
fn ncu_microseconds_and_milliseconds_become_ns() {
    let mut text = String::from(LONG_HEADER);
    text.push_str(&row(0, "a", "gpu__time_duration.sum", "us", "1.5"));
    text.push_str(&row(1, "b", "gpu__time_duration.sum", "ms", "2.25"));
    text.push_str(&row(
        2,
        "c",
        "gpu__time_duration.sum",
        "usecond",
        "1,234.567",
    ));
    let trace = import_text(&text).unwrap();
    assert_eq!(args(&trace, 0)["duration_ns"], json!(1_500));
    assert_eq!(args(&trace, 1)["duration_ns"], json!(2_250_000));
    assert_eq!(args(&trace, 2)["duration_ns"], json!(1_234_567));
    let m = &args(&trace, 1)["metrics"]["gpu__time_duration.sum"];
    assert_eq!(m["unit"], json!("ns"));
    assert_eq!(m["source_unit"], json!("ms"));
    assert_eq!(m["source_value"], json!(2.25));
    let ends: Vec<i64> = trace.spans.iter().map(|s| s.end).collect();
    assert_eq!(ends, [1_500, 2_251_500, 3_486_067]);
}

#[test]
fn ncu_flop_counters_give_flops() {
    let mut text = String::from(LONG_HEADER);
    let counters = [
        ("fadd", "1,000"),
        ("fmul", "2,000"),
        ("ffma", "3,000"),
        ("dadd", "10"),
        ("dmul", "20"),
        ("dfma", "30"),
        ("hadd", "0"),
        ("hmul", "0"),
        ("hfma", "5"),
    ];
    for (op, value) in counters {
        let name = format!("sm__sass_thread_inst_executed_op_{op}_pred_on.sum");
        text.push_str(&row(0, "k", &name, "inst", value));
    }
    // A second launch with only fp32 add: incomplete, so no flops at all.
    text.push_str(&row(
        1,
        "k",
        "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "inst",
        "7",
    ));
    let trace = import_text(&text).unwrap();
    let a = args(&trace, 0);
    assert_eq!(a["flops_fp32"], json!(1000 + 2000 + 2 * 3000));
    assert_eq!(a["flops_fp64"], json!(10 + 20 + 2 * 30));
    assert_eq!(a["flops_fp16"], json!(10));
    assert_eq!(a["flops"], json!(9000 + 90 + 10));
    let b = args(&trace, 1);
    assert!(b.get("flops").is_none() && b.get("flops_fp32").is_none());
}

/// A timeline with one rank: `gemm` twice on stream 7 (starts 300 and 100, in that span
/// order) and a mangled `relu` (start 200).
fn timeline() -> Trace {
    let mut b = TraceBuilder::new();
    b.rank(Rank {
        format: SourceFormat::Kineto,
        ..rank(Some(0), "timeline.json")
    });
    let gpu = b.queue(0, 7);
    // Pushed out of start order on purpose: matching is by start, not by span index.
    for (name, start, args) in [
        ("void gemm<128>(float const*, float*)", 300, None),
        (
            "void gemm<128>(float const*, float*)",
            100,
            Some("{\"grid\":[1024,1,1]}"),
        ),
        ("_Z4reluPfi", 200, None),
    ] {
        let span = b
            .span(gpu, Level::DeviceKernel, name, start, start + 50)
            .category("kernel");
        if let Some(args) = args {
            span.args(args);
        }
    }
    b.build()
}

#[test]
fn ncu_attach_matches_in_order_and_keeps_unmatched() {
    let mut text = String::from(LONG_HEADER);
    // ncu writes the same kernel with its own spelling of the signature: matched by short name.
    let gemm = "void gemm<128>(const float *, float *)";
    text.push_str(&row(0, gemm, "gpu__time_duration.sum", "ns", "11"));
    text.push_str(&row(
        1,
        "relu(float *, int)",
        "gpu__time_duration.sum",
        "ns",
        "22",
    ));
    text.push_str(&row(2, gemm, "gpu__time_duration.sum", "ns", "33"));
    text.push_str(&row(3, gemm, "gpu__time_duration.sum", "ns", "44"));
    text.push_str(&row(4, "softmax", "gpu__time_duration.sum", "ns", "55"));
    let metrics = import_text(&text).unwrap();

    let mut tl = timeline();
    ncu::attach(&mut tl, metrics);
    tl.validate().unwrap();
    let ncu_of = |tl: &Trace, span: usize| args(tl, span)["ncu"].clone();
    // The first ncu gemm (ID 0) goes to the earliest gemm (start 100, span 1), ID 2 to span 0.
    assert_eq!(ncu_of(&tl, 1)["id"], json!(0));
    assert_eq!(ncu_of(&tl, 1)["duration_ns"], json!(11));
    assert_eq!(
        args(&tl, 1)["grid"],
        json!([1024, 1, 1]),
        "existing args kept"
    );
    assert_eq!(ncu_of(&tl, 0)["id"], json!(2));
    assert_eq!(
        ncu_of(&tl, 2)["id"],
        json!(1),
        "mangled relu matched by short name"
    );
    // IDs 3 (a third gemm) and 4 (softmax) have no timeline kernel: their own ncu rank.
    assert_eq!(tl.ranks.len(), 2);
    assert_eq!(tl.ranks[1].format.as_str(), "ncu");
    assert_eq!(tl.spans.len(), 5);
    assert_eq!(tl.str(tl.spans[3].name), gemm);
    assert_eq!(tl.str(tl.spans[4].name), "softmax");
    assert_eq!(args(&tl, 3)["id"], json!(3));
    assert_eq!(args(&tl, 4)["id"], json!(4));
    assert_eq!(tl.track(tl.spans[4].track).rank.0, 1);
}

#[test]
fn ncu_attach_exact_names_and_everything_matched() {
    let mut text = String::from(LONG_HEADER);
    let gemm = "void gemm<128>(float const*, float*)";
    text.push_str(&row(0, gemm, "gpu__time_duration.sum", "ns", "11"));
    text.push_str(&row(1, gemm, "gpu__time_duration.sum", "ns", "33"));
    let metrics = import_text(&text).unwrap();
    let mut tl = timeline();
    ncu::attach(&mut tl, metrics);
    tl.validate().unwrap();
    assert_eq!(tl.ranks.len(), 1, "nothing left unmatched");
    assert_eq!(args(&tl, 1)["ncu"]["id"], json!(0));
    assert_eq!(args(&tl, 0)["ncu"]["id"], json!(1));
    assert!(tl.spans[2].args.is_none(), "relu untouched");
}

#[test]
fn ncu_garbage_is_not_a_trace() {
    let err = import_text("hello,world\n1,2,3\nno header here\n").unwrap_err();
    match err.kind {
        ErrorKind::NotATrace(msg) => {
            assert_eq!(
                msg,
                "no Nsight Compute header (\"ID\",...,\"Metric Name\") found"
            )
        }
        other => panic!("expected NotATrace, got {other:?}"),
    }
    let err = import_text("\u{feff}==PROF== Connected\n").unwrap_err();
    assert!(matches!(err.kind, ErrorKind::NotATrace(_)));
}

#[test]
fn ncu_malformed_rows_name_the_line() {
    let mut text = String::from("==PROF== x\n");
    text.push_str(LONG_HEADER);
    text.push_str(&row(0, "k", "gpu__time_duration.sum", "ns", "5"));
    text.push_str("\"0\",\"100\",\"short row\"\n");
    let err = import_text(&text).unwrap_err();
    match &err.kind {
        ErrorKind::Csv(msg) => assert!(msg.contains("line 4"), "{msg}"),
        other => panic!("expected Csv, got {other:?}"),
    }
    let mut text = String::from(LONG_HEADER);
    text.push_str(&row(0, "k", "gpu__time_duration.sum", "ns", "5").replacen("\"0\"", "\"x\"", 1));
    let err = import_text(&text).unwrap_err();
    match &err.kind {
        ErrorKind::Csv(msg) => assert!(msg.contains("line 2") && msg.contains("ID"), "{msg}"),
        other => panic!("expected Csv, got {other:?}"),
    }
}

#[test]
fn ncu_header_only_gives_an_empty_rank() {
    let trace = import_text(LONG_HEADER).unwrap();
    assert_eq!(trace.ranks.len(), 1);
    assert!(trace.spans.is_empty());
}
