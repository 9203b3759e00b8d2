//! JAX 0.8 XPlane (`xplane_jax/mi300_jax_conv_minimal_08.xplane.pb`, 8 MI300X): HLO op names
//! and modules on the kernels and their launches, Python source lines, devices from the device
//! planes. The expected figures are counted here from the file's raw protobuf (the wire format
//! walked by hand, no code shared with the importer): how many events carry an `hlo_op` stat.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use strato_io::{import_file, ImportOptions};
use strato_trace::{Level, Trace};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/xplane_jax/mi300_jax_conv_minimal_08.xplane.pb")
}

fn args(trace: &Trace, s: &strato_trace::Span) -> Value {
    trace
        .args_text(s.args)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null)
}

fn varint(buf: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = buf[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
    }
    v
}

/// `(field, bytes)` of the length-delimited fields of a message; other fields skipped.
fn fields(buf: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let key = varint(buf, &mut at);
        match key & 7 {
            0 => {
                varint(buf, &mut at);
            }
            1 => at += 8,
            5 => at += 4,
            2 => {
                let n = varint(buf, &mut at) as usize;
                out.push((key >> 3, &buf[at..at + n]));
                at += n;
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// Per plane: (events whose own stats or metadata stats name `hlo_op`, on stream lines).
/// XSpace.planes = 1; XPlane.lines = 3, event_metadata = 4 (map entry value = 2),
/// stat_metadata = 5 (map entry value = 2; XStatMetadata.id = 1, name = 2); XLine.name = 2,
/// events = 4; XEvent.metadata_id = 1, stats = 4; XEventMetadata.id = 1, stats = 5;
/// XStat.metadata_id = 1.
fn count_stream_events_with_hlo_op(file: &[u8]) -> u64 {
    let mut total = 0;
    for (f, plane) in fields(file) {
        if f != 1 {
            continue;
        }
        let plane_fields = fields(plane);
        let mut hlo_op_stat = None;
        for (f, entry) in &plane_fields {
            if *f == 5 {
                for (g, meta) in fields(entry) {
                    if g == 2 {
                        let m = fields(meta);
                        if m.iter().any(|(h, v)| *h == 2 && *v == b"hlo_op") {
                            // The id is a varint field (1): read it by hand.
                            let mut at = 0;
                            while at < meta.len() {
                                let key = varint(meta, &mut at);
                                if key == 1 << 3 {
                                    hlo_op_stat = Some(varint(meta, &mut at));
                                    break;
                                }
                                match key & 7 {
                                    0 => {
                                        varint(meta, &mut at);
                                    }
                                    2 => {
                                        let n = varint(meta, &mut at) as usize;
                                        at += n;
                                    }
                                    1 => at += 8,
                                    _ => at += 4,
                                }
                            }
                        }
                    }
                }
            }
        }
        let Some(hlo_op_stat) = hlo_op_stat else {
            continue;
        };
        let stat_ids = |stats: &[u8]| -> u64 {
            let mut at = 0;
            while at < stats.len() {
                let key = varint(stats, &mut at);
                if key == 1 << 3 {
                    return varint(stats, &mut at);
                }
                match key & 7 {
                    0 => {
                        varint(stats, &mut at);
                    }
                    2 => {
                        let n = varint(stats, &mut at) as usize;
                        at += n;
                    }
                    1 => at += 8,
                    _ => at += 4,
                }
            }
            0
        };
        let first_varint = |msg: &[u8], field: u64| -> Option<u64> {
            let mut at = 0;
            while at < msg.len() {
                let key = varint(msg, &mut at);
                match key & 7 {
                    0 => {
                        let v = varint(msg, &mut at);
                        if key >> 3 == field {
                            return Some(v);
                        }
                    }
                    2 => {
                        let n = varint(msg, &mut at) as usize;
                        at += n;
                    }
                    1 => at += 8,
                    _ => at += 4,
                }
            }
            None
        };
        // Event metadata ids whose metadata stats name hlo_op.
        let mut metadata_with_op = BTreeSet::new();
        for (f, entry) in &plane_fields {
            if *f == 4 {
                for (g, meta) in fields(entry) {
                    if g == 2
                        && fields(meta)
                            .iter()
                            .any(|(h, s)| *h == 5 && stat_ids(s) == hlo_op_stat)
                    {
                        metadata_with_op.insert(first_varint(meta, 1).unwrap_or(0));
                    }
                }
            }
        }
        for (f, line) in &plane_fields {
            if *f != 3 {
                continue;
            }
            let line_fields = fields(line);
            let is_stream = line_fields
                .iter()
                .any(|(g, n)| *g == 2 && n.starts_with(b"Stream #"));
            if !is_stream {
                continue;
            }
            for (g, event) in line_fields {
                if g == 4 {
                    let own = fields(event)
                        .iter()
                        .any(|(h, s)| *h == 4 && stat_ids(s) == hlo_op_stat);
                    let meta = metadata_with_op.contains(&first_varint(event, 1).unwrap_or(0));
                    total += u64::from(own || meta);
                }
            }
        }
    }
    total
}

#[test]
fn hlo_ops_modules_and_source_lines() {
    let path = real_file();
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return;
    }
    let expected_with_op = count_stream_events_with_hlo_op(&std::fs::read(&path).unwrap());
    assert!(expected_with_op > 0);
    let trace = import_file(&path, &ImportOptions::default()).unwrap();

    // Device kernels carry their HLO op and module; launches carry the same pair.
    let kernels: Vec<_> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::DeviceKernel)
        .collect();
    let with_op: Vec<_> = kernels
        .iter()
        .filter(|s| args(&trace, s)["hlo_op"].is_string())
        .collect();
    assert_eq!(with_op.len() as u64, expected_with_op);
    let modules: BTreeSet<String> = with_op
        .iter()
        .map(|s| args(&trace, s)["hlo_module"].as_str().unwrap().to_owned())
        .collect();
    assert!(modules.contains("jit_forward_3d_conv"), "{modules:?}");
    let launches: Vec<_> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::AcceleratorApi && args(&trace, s)["hlo_op"].is_string())
        .collect();
    assert!(!launches.is_empty());
    for launch in &launches {
        let a = args(&trace, launch);
        let kernel = with_op
            .iter()
            .find(|k| k.correlation.is_some() && k.correlation == launch.correlation);
        if let Some(kernel) = kernel {
            let k = args(&trace, kernel);
            assert_eq!(k["hlo_op"], a["hlo_op"]);
            assert_eq!(k["hlo_module"], a["hlo_module"]);
        }
    }

    // Python frames name their source file and line.
    let python: Vec<_> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::Python)
        .collect();
    assert!(!python.is_empty());
    let mut with_source = 0;
    for s in &python {
        let name = trace.str(s.name);
        let a = args(&trace, s);
        if !name.contains(".py:") {
            // `$<unknown> __exit__`: a frame without a location.
            assert!(a["source_file"].is_null(), "{name}: {a}");
            continue;
        }
        with_source += 1;
        let file = a["source_file"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: {a}"));
        let line = a["source_line"].as_u64().unwrap();
        let function = a["function"].as_str().unwrap();
        assert_eq!(name, format!("${file}:{line} {function}").trim_end(), "{a}");
    }
    // 727 of the 1353 frames of this file have a location.
    assert!(with_source > 0);

    // Eight GPUs with their CU count and memory (the plane gives no marketing name).
    assert_eq!(trace.devices.len(), 8);
    assert!(trace
        .devices
        .iter()
        .all(|d| d.sm_count == Some(304) && d.total_memory_bytes.is_some()));
}

#[test]
fn python_source_names() {
    use strato_io::xplane::python_source;
    let s = python_source("$api.py:3154 block_until_ready").unwrap();
    assert_eq!(
        (s.file, s.line, s.function),
        ("api.py", 3154, "block_until_ready")
    );
    let s = python_source("$/a b/x.py:7 f").unwrap();
    assert_eq!((s.file, s.line, s.function), ("/a b/x.py", 7, "f"));
    assert!(python_source("hipModuleLaunchKernel").is_none());
    assert!(python_source("$noline f").is_none());
}
