//! Unit tests of the Chrome-trace importer: merged multi-rank files, lenient values, limits,
//! flows and streaming, each through [`super::import`] on a small document.

use super::*;
use std::io::Cursor;
use strato_trace::{Level, SpanId};

fn import_text(text: &str) -> Result<Trace> {
    let input = Input::from_reader(Box::new(Cursor::new(text.as_bytes().to_vec())));
    import(Path::new("test.json"), input, &ImportOptions::default())
}

#[test]
fn a_merged_file_whose_args_rank_contradicts_the_pid_is_counted() {
    // The third event's pid says rank 1, its args.rank says 0; the fourth's pid says rank
    // 0 (raw), its args.rank 1. Both stay on their pid's rank, counted there.
    let trace = import_text(
        r#"{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":2},"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":0}},
        {"ph":"X","cat":"cpu_op","name":"b","pid":100000010,"tid":11,"ts":100,"dur":10,"args":{"rank":1}},
        {"ph":"X","cat":"cpu_op","name":"c","pid":100000010,"tid":11,"ts":120,"dur":10,"args":{"rank":0}},
        {"ph":"X","cat":"cpu_op","name":"d","pid":10,"tid":11,"ts":140,"dur":10,"args":{"rank":1}}
        ]}"#,
    )
    .unwrap();
    assert_eq!(trace.ranks.len(), 2);
    let counted: Vec<u64> = trace
        .ranks
        .iter()
        .map(|r| r.notes.get(MERGED_RANK_CONTRADICTED))
        .collect();
    assert_eq!(counted, vec![1, 1]);
    // A single-rank file whose events carry its own rank: nothing to count.
    let single = import_text(
        r#"{"schemaVersion":1,"distributedInfo":{"rank":3,"world_size":8},"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":5}}
        ]}"#,
    )
    .unwrap();
    assert_eq!(single.ranks[0].notes.get(MERGED_RANK_CONTRADICTED), 0);
}

#[test]
fn a_tracefuse_merged_file_is_split_into_its_ranks() {
    // Rank 0 keeps its raw pids; rank 1's are + 1e8 with args.rank. Both use GPU 0 stream 7.
    let trace = import_text(
        r#"{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":2},"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":0,"pid_raw":10}},
        {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":106,"dur":2,"args":{"device":0,"stream":7,"rank":0,"pid_raw":0}},
        {"ph":"X","cat":"cpu_op","name":"b","pid":100000010,"tid":11,"ts":100,"dur":10,"args":{"rank":1,"pid_raw":10}},
        {"ph":"X","cat":"kernel","name":"k","pid":100000000,"tid":7,"ts":107,"dur":2,"args":{"device":0,"stream":7,"rank":1,"pid_raw":0}},
        {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":120,"dur":2,"args":{"device":0,"stream":7,"rank":0}}
        ]}"#,
    )
    .unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.ranks.len(), 2);
    assert_eq!(
        (trace.ranks[0].rank, trace.ranks[1].rank),
        (Some(0), Some(1))
    );
    assert_eq!(trace.ranks[1].world_size, Some(2));
    let kernels_of = |r: u32| {
        trace
            .spans
            .iter()
            .filter(|s| {
                let t = trace.track(s.track);
                t.is_device() && t.rank == RankId(r)
            })
            .count()
    };
    assert_eq!((kernels_of(0), kernels_of(1)), (2, 1));
}

/// A merged file's processes belong to their ranks, and its device pids (Kineto names every
/// GPU as a process "GPU N"; TraceFuse adds rank x 1e8) are devices, not processes; a flow
/// end and a stream name at a fused device pid land on that rank's device queue (no empty
/// thread track is made for them).
#[test]
fn a_merged_files_device_pids_are_not_processes() {
    let trace = import_text(
        r#"{"schemaVersion":1,"traceEvents":[
        {"ph":"M","name":"process_name","pid":10,"tid":0,"args":{"name":"python3","rank":0,"pid_raw":10}},
        {"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"python3","rank":0,"pid_raw":0}},
        {"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"GPU 0","rank":0,"pid_raw":0}},
        {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"python3","rank":0,"pid_raw":1}},
        {"ph":"M","name":"process_labels","pid":1,"tid":0,"args":{"labels":"GPU 1","rank":0,"pid_raw":1}},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":100,"dur":5,"args":{"rank":0,"pid_raw":10,"correlation":1}},
        {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":106,"dur":2,"args":{"device":0,"stream":7,"rank":0,"pid_raw":0,"correlation":1}},
        {"ph":"M","name":"process_name","pid":100000010,"tid":0,"args":{"name":"python3","rank":1,"pid_raw":10}},
        {"ph":"M","name":"process_name","pid":100000001,"tid":0,"args":{"name":"python3","rank":1,"pid_raw":1}},
        {"ph":"M","name":"process_labels","pid":100000001,"tid":0,"args":{"labels":"GPU 1","rank":1,"pid_raw":1}},
        {"ph":"M","name":"thread_name","pid":100000001,"tid":7,"args":{"name":"stream 7","rank":1,"pid_raw":1}},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100000010,"tid":11,"ts":100,"dur":5,"args":{"rank":1,"pid_raw":10,"correlation":100000001}},
        {"ph":"s","id":100000001,"pid":100000010,"tid":11,"ts":100,"cat":"ac2g","name":"ac2g","args":{"rank":1}},
        {"ph":"X","cat":"kernel","name":"k","pid":100000001,"tid":7,"ts":107,"dur":2,"args":{"device":1,"stream":7,"rank":1,"pid_raw":1,"correlation":100000001}},
        {"ph":"f","id":100000001,"pid":100000001,"tid":7,"ts":107,"cat":"ac2g","name":"ac2g","bp":"e","args":{"rank":1}}
        ]}"#,
    )
    .unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.ranks.len(), 2);
    let processes: Vec<(RankId, i64)> = trace.processes.iter().map(|p| (p.rank, p.pid)).collect();
    assert_eq!(processes, vec![(RankId(0), 10), (RankId(1), 100_000_010)]);
    // Only the two CPU threads and the two device queues: no track for a fused device pid.
    assert_eq!(trace.tracks.len(), 4, "{:?}", trace.tracks);
    let queue = trace
        .tracks
        .iter()
        .find(|t| t.rank == RankId(1) && t.is_device())
        .unwrap();
    assert_eq!(queue.name.as_deref(), Some("stream 7"));
    let flow = trace.flows.last().unwrap();
    let to = flow.to.as_ref().unwrap();
    assert!(trace.track(to.track).is_device());
    assert_eq!(trace.track(to.track).rank, RankId(1));
    let devices: Vec<(Option<RankId>, i64)> =
        trace.devices.iter().map(|d| (d.rank, d.index)).collect();
    assert!(devices.contains(&(Some(RankId(1)), 1)), "{devices:?}");
    assert!(!devices.contains(&(Some(RankId(0)), 1)), "{devices:?}");
}

#[test]
fn a_merged_files_distributed_info_after_its_events_is_the_first_ranks() {
    // The last event is rank 1's; `distributedInfo` and `hostname` follow the events.
    let trace = import_text(
        r#"{"schemaVersion":1,"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":0,"pid_raw":10}},
        {"ph":"X","cat":"cpu_op","name":"b","pid":100000010,"tid":11,"ts":100,"dur":10,"args":{"rank":1,"pid_raw":10}}
        ],"distributedInfo":{"rank":0,"world_size":2},"hostname":"node0"}"#,
    )
    .unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.ranks.len(), 2);
    assert_eq!(
        (trace.ranks[0].rank, trace.ranks[1].rank),
        (Some(0), Some(1))
    );
    assert_eq!(
        (trace.ranks[0].world_size, trace.ranks[1].world_size),
        (Some(2), Some(2))
    );
    assert_eq!(trace.ranks[0].host.as_deref(), Some("node0"));
    assert_eq!(trace.ranks[1].host, None);
}

#[test]
fn large_pids_without_a_matching_rank_arg_stay_one_rank() {
    let trace = import_text(
        r#"{"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"a","pid":300000001,"tid":1,"ts":100,"dur":10},
        {"ph":"X","cat":"cpu_op","name":"b","pid":100000001,"tid":1,"ts":100,"dur":10,"args":{"rank":7}}
        ]}"#,
    )
    .unwrap();
    assert_eq!(trace.ranks.len(), 1);
}

#[test]
fn other_accelerators_device_events_are_classified_or_counted() {
    // MTIA's device events are kernels on their queue; an unknown category with a stream
    // arg, or at a known device queue's pid/tid, goes to that queue as `Other` and is
    // counted per category; host events of unknown categories and `python_function` on
    // pid 0 / tid 0 are neither.
    let trace = import_text(
        r#"{"schemaVersion":1,"traceEvents":[
        {"ph":"X","cat":"mtia_runtime","name":"runFunction","pid":10,"tid":11,"ts":1,"dur":1,"args":{"correlation":1}},
        {"ph":"X","cat":"mtia_ccp_events","name":"fc","pid":1,"tid":5,"ts":3,"dur":2,"args":{"device":1,"stream":5,"correlation":1}},
        {"ph":"X","cat":"npu_task","name":"n1","pid":1,"tid":5,"ts":6,"dur":2,"args":{"device":1,"stream":6}},
        {"ph":"X","cat":"npu_task","name":"n2","pid":1,"tid":5,"ts":9,"dur":2},
        {"ph":"X","cat":"my_host_thing","name":"h","pid":10,"tid":11,"ts":9,"dur":2},
        {"ph":"X","cat":"python_function","name":"forward","pid":0,"tid":0,"ts":0,"dur":30}
        ]}"#,
    )
    .unwrap();
    trace.validate().unwrap();
    let kind = |i: usize| trace.track(trace.spans[i].track).kind.clone();
    let queue = |device, queue| TrackKind::DeviceQueue { device, queue };
    assert_eq!(trace.spans[0].level, Level::AcceleratorApi);
    assert_eq!(trace.spans[1].level, Level::DeviceKernel);
    assert_eq!(kind(1), queue(1, 5));
    assert_eq!((trace.spans[2].level, kind(2)), (Level::Other, queue(1, 6)));
    assert_eq!((trace.spans[3].level, kind(3)), (Level::Other, queue(1, 5)));
    assert_eq!(kind(4), TrackKind::Thread { pid: 10, tid: 11 });
    assert_eq!(kind(5), TrackKind::Thread { pid: 0, tid: 0 });
    let notes = &trace.ranks[0].notes;
    assert_eq!(notes.unclassified_device_like(), vec![("npu_task", 2)]);
}

#[test]
fn a_category_without_a_rule_takes_the_level_its_args_name() {
    // stratoscope's Chrome export writes `args.level` on every event: a category no rule names
    // takes it (on its first event); a rule wins over it, and a word that is not a level
    // leaves the category `Other`.
    let trace = import_text(
        r#"{"traceEvents":[
        {"ph":"X","cat":"opencl","name":"clFinish","pid":10,"tid":11,"ts":1,"dur":9,"args":{"level":"AcceleratorApi"}},
        {"ph":"X","cat":"opencl_kernel","name":"saxpy","pid":10,"tid":12,"ts":2,"dur":5,"args":{"device":0,"stream":3,"level":"DeviceKernel"}},
        {"ph":"X","cat":"opencl_kernel","name":"saxpy","pid":10,"tid":12,"ts":8,"dur":1,"args":{"device":0,"stream":3}},
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":11,"ts":1,"dur":2,"args":{"level":"DeviceKernel"}},
        {"ph":"X","cat":"mine","name":"x","pid":10,"tid":11,"ts":4,"dur":1,"args":{"level":"NotALevel"}},
        {"ph":"X","cat":"npu_task","name":"n1","pid":1,"tid":5,"ts":6,"dur":2,"args":{"device":1,"stream":6,"level":"Other"}}
        ]}"#,
    )
    .unwrap();
    trace.validate().unwrap();
    let got: Vec<_> = trace.spans.iter().map(|s| s.level).collect();
    assert_eq!(
        got,
        [
            Level::AcceleratorApi,
            Level::DeviceKernel,
            Level::DeviceKernel,
            Level::Backend,
            Level::Other,
            Level::Other
        ]
    );
    // `Other` (what the export writes for an event no rule named) leaves its category
    // unrecognised: device-like events of it are still counted.
    let notes = &trace.ranks[0].notes;
    assert_eq!(notes.unclassified_device_like(), vec![("npu_task", 1)]);
    assert_eq!(
        trace.track(trace.spans[1].track).kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 3
        }
    );
}

#[test]
fn kineto_events_land_on_the_right_tracks() {
    let trace = import_text(
        r#"{"schemaVersion":1,"distributedInfo":{"rank":3,"world_size":8},"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":11,"ts":100.5,"dur":10,"args":{"External id":4}},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":102,"dur":3,"args":{"correlation":77,"External id":4}},
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":106,"dur":20.001,"args":{"device":0,"stream":7,"correlation":77}},
        {"ph":"X","cat":"python_function","name":"forward","pid":0,"tid":0,"ts":99,"dur":30},
        {"ph":"s","id":77,"pid":10,"tid":11,"ts":102,"cat":"ac2g","name":"ac2g"},
        {"ph":"f","id":77,"pid":0,"tid":7,"ts":106,"cat":"ac2g","name":"ac2g","bp":"e"},
        {"ph":"f","id":99,"pid":10,"tid":11,"ts":103,"cat":"ac2g","name":"ac2g","bp":"e"},
        {"ph":"M","name":"thread_name","pid":10,"tid":11,"args":{"name":"main"}},
        {"ph":"M","name":"process_name","pid":10,"args":{"name":"python3"}},
        {"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":10,"tid":11,"ts":101,"args":{"Device Id":0,"Total Allocated":4096,"Bytes":512}}
        ]}"#,
    )
    .unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.ranks[0].format, SourceFormat::Kineto);
    assert_eq!(trace.ranks[0].rank, Some(3));
    assert_eq!(trace.ranks[0].world_size, Some(8));
    assert_eq!(trace.spans.len(), 4);
    let kernel = &trace.spans[2];
    assert_eq!(
        trace.track(kernel.track).kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 7
        }
    );
    assert_eq!((kernel.start, kernel.end), (106_000, 126_001));
    assert_eq!(kernel.level, Level::DeviceKernel);
    assert_eq!(kernel.correlation, Some(77));
    let python = &trace.spans[3];
    assert_eq!(
        trace.track(python.track).kind,
        TrackKind::Thread { pid: 0, tid: 0 }
    );
    assert_eq!(trace.spans[0].start, 100_500);
    assert_eq!(trace.spans[0].external_id, Some(4));
    assert_eq!(trace.flows.len(), 2);
    assert_eq!(trace.flows[0].from.as_ref().unwrap().span, Some(SpanId(1)));
    assert_eq!(trace.flows[0].to.as_ref().unwrap().span, Some(SpanId(2)));
    assert!(trace.flows[1].from.is_none());
    let main = trace
        .tracks
        .iter()
        .find(|t| t.name.as_deref() == Some("main"))
        .unwrap();
    assert_eq!(main.kind, TrackKind::Thread { pid: 10, tid: 11 });
    assert!(trace
        .processes
        .iter()
        .any(|p| p.pid == 10 && p.name.as_deref() == Some("python3")));
    assert_eq!(trace.counters.len(), 1);
    assert_eq!(trace.counters[0].value, 4096.0);
    assert_eq!(trace.instants.len(), 1);
}

#[test]
fn schema_2021_string_tids_and_begin_end() {
    let trace = import_text(
        r#"[{"ph":"X","cat":"Kernel","name":"k","pid":0,"tid":"stream 7","ts":5,"dur":1,"args":{"correlation":1,"external id":2}},
            {"ph":"X","cat":"Operator","name":"op","pid":1,"tid":"1890023232","ts":1,"dur":9},
            {"ph":"B","name":"outer","pid":1,"tid":2,"ts":1},
            {"ph":"E","pid":1,"tid":2,"ts":4},
            {"ph":"E","pid":1,"tid":2,"ts":5},
            {"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":0,"dur":-3}]"#,
    )
    .unwrap();
    assert_eq!(trace.spans.len(), 4);
    assert_eq!(
        trace.track(trace.spans[0].track).kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 7
        }
    );
    assert_eq!(trace.spans[0].external_id, Some(2));
    assert_eq!(
        trace.track(trace.spans[1].track).kind,
        TrackKind::Thread {
            pid: 1,
            tid: 1_890_023_232
        }
    );
    assert_eq!((trace.spans[2].start, trace.spans[2].end), (1000, 4000));
    assert_eq!(
        trace.track(trace.spans[3].track).kind,
        TrackKind::Custom {
            group: "Spans".into(),
            name: "PyTorch Profiler".into()
        }
    );
    assert_eq!(trace.spans[3].duration(), 0);
    assert_eq!(trace.ranks[0].notes.get("unmatched_end_events"), 1);
}

#[test]
fn missing_or_out_of_range_times_are_errors_naming_the_event() {
    let err = import_text(
        r#"{"traceEvents":[{"ph":"X","name":"gemm","cat":"kernel","pid":0,"tid":7,"dur":1}]}"#,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"gemm\"") && text.contains("no \"ts\""),
        "{text}"
    );
    // 9.3e18 ns: beyond i64; 5e18 ns: an i64 but outside the valid range.
    for ts in ["9300000000000000", "5000000000000000"] {
        let doc = format!(r#"{{"traceEvents":[{{"ph":"i","name":"mark","ts":{ts}}}]}}"#);
        let text = import_text(&doc).unwrap_err().to_string();
        assert!(text.contains("mark"), "{text}");
    }
    // Each in range, but ts + dur is not.
    let doc = r#"{"traceEvents":[{"ph":"X","name":"long","ts":3999999999999999,"dur":3999999999999999}]}"#;
    let text = import_text(doc).unwrap_err().to_string();
    assert!(
        text.contains("\"long\"") && text.contains("valid range"),
        "{text}"
    );
    // Negative durations clamp and a missing dur reads as 0, both counted.
    let doc =
        r#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":-5},{"ph":"X","name":"b","ts":2}]}"#;
    let trace = import_text(doc).unwrap();
    let notes = &trace.ranks[0].notes;
    assert_eq!(notes.events_read, 2);
    assert_eq!(notes.get("clamped_negative_durations"), 1);
    assert_eq!(notes.get("missing_durations_read_as_0"), 1);
}

#[test]
fn the_memory_budget_stops_the_import_with_an_error() {
    let mut doc = String::from(r#"{"traceEvents":["#);
    for i in 0..20_000 {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(&format!(r#"{{"ph":"X","name":"k{i}","ts":{i},"dur":1}}"#));
    }
    doc.push_str("]}");
    let run = |budget: u64| {
        let input = Input::from_reader(Box::new(Cursor::new(doc.clone().into_bytes())));
        let options = ImportOptions {
            memory_budget_bytes: budget,
            ..ImportOptions::default()
        };
        import(Path::new("t.json"), input, &options)
    };
    let err = run(1 << 20).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::MemoryBudget { .. }), "{err}");
    assert_eq!(run(1 << 30).unwrap().spans.len(), 20_000);
}

#[test]
fn errors_name_the_problem() {
    let err =
        import_text(r#"{"traceEvents":[{"ph":"X","ts":1,"dur":1},{"ph":"X","ts":"#).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Json { .. }), "{err}");
    let err = import_text(r#"{"foo": 1}"#).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::NotATrace(_)), "{err}");
    let err = import_text(r#"{"traceEvents":[{"ph":"X","ts":"abc"}]}"#).unwrap_err();
    assert!(err.to_string().contains("bad timestamp"), "{err}");
    let err = import_text(r#"{"traceEvents":[1,2]}"#).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Json { .. }), "{err}");
}

#[test]
fn keep_args_off_keeps_correlations_but_no_blobs() {
    let input = Input::from_reader(Box::new(Cursor::new(
        br#"{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"correlation":5,"stream":7,"device":0}}]}"#.to_vec(),
    )));
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let trace = import(Path::new("t.json"), input, &options).unwrap();
    assert!(trace.args.is_empty());
    assert_eq!(trace.spans[0].correlation, Some(5));
}

#[test]
fn stratoscopes_export_of_a_recording_reads_back_as_the_recording() {
    let doc = |other: &str| {
        format!(
            r#"{{"schemaVersion":1,"otherData":{other},"traceEvents":[
            {{"ph":"X","cat":"operation","name":"step","pid":1,"tid":1,"ts":1,"dur":9,"args":{{"level":"Operation"}}}}
            ]}}"#
        )
    };
    let format = |other: &str| import_text(&doc(other)).unwrap().ranks[0].format.clone();
    let ours = r#"{"exporter":"stratoscope 0.1.0","ranks":[{"rank":null,"world_size":null,"source":"rec","format":"strato"}]}"#;
    assert_eq!(format(ours), SourceFormat::Strato);
    // Another format, another tool's object, a malformed one: what the file reads as.
    assert_eq!(
        format(&ours.replace("\"strato\"", "\"nsys\"")),
        SourceFormat::Kineto
    );
    assert_eq!(
        format(&ours.replace("stratoscope 0.1.0", "someone else")),
        SourceFormat::Kineto
    );
    assert_eq!(
        format(r#"{"exporter":"stratoscope","ranks":7}"#),
        SourceFormat::Kineto
    );
    assert_eq!(format("[1,2]"), SourceFormat::Kineto);
    // Two ranks exported, matched by number.
    let two = r#"{"exporter":"stratoscope 0.1.0","ranks":[{"rank":0,"format":"kineto"},{"rank":1,"format":"strato"}]}"#;
    let trace = import_text(&doc(two).replace(
        r#""schemaVersion":1,"#,
        r#""schemaVersion":1,"distributedInfo":{"rank":1,"world_size":2},"#,
    ))
    .unwrap();
    assert_eq!(trace.ranks[0].format, SourceFormat::Strato);
}
