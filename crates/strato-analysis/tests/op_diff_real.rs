//! Cross-hardware diff on the real H100 / MI300X pair
//! (`kineto/tracelens/{h100,mi300}_Falconsai_nsfw_image_detection.json.gz`): the per-op and
//! per-module device times are recomputed here from the raw JSON with serde_json (each device
//! op's launch by correlation id, the outermost `cpu_op` and the `nn.Module:` frames enclosing
//! that launch on its thread), independently of the importer and of the hierarchy.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::{data, raw};
use std::collections::BTreeMap;

use serde_json::Value;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::compare::op_diff::{op_diff, OpDiffSide, EXPLAINED_SHARE, NO_MODULE, NO_OP};
use strato_io::{import_paths, ImportOptions};

const H100: &str = "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz";
const MI300: &str = "kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz";

fn ts(e: &Value) -> f64 {
    e["ts"].as_f64().unwrap()
}

fn end(e: &Value) -> f64 {
    ts(e) + e["dur"].as_f64().unwrap_or(0.0)
}

/// (per op, per module) device time in µs and device op count, from the raw events.
type Expected = (
    BTreeMap<String, (f64, usize)>,
    BTreeMap<String, (f64, usize)>,
);

fn expected(events: &[Value]) -> Expected {
    let launches: BTreeMap<u64, &Value> = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && ["cuda_runtime", "cuda_driver"].contains(&e["cat"].as_str().unwrap_or(""))
        })
        .filter_map(|e| Some((e["args"]["correlation"].as_u64()?, e)))
        .collect();
    let cpu: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && ["cpu_op", "python_function"].contains(&e["cat"].as_str().unwrap_or(""))
        })
        .collect();
    let (mut ops, mut modules): Expected = Default::default();
    for d in events.iter().filter(|e| {
        e["ph"] == "X"
            && ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap_or(""))
    }) {
        let dur = d["dur"].as_f64().unwrap();
        let launch = d["args"]["correlation"]
            .as_u64()
            .and_then(|c| launches.get(&c));
        let mut enclosing: Vec<&&Value> = match launch {
            Some(l) => cpu
                .iter()
                .filter(|o| {
                    o["pid"] == l["pid"]
                        && o["tid"] == l["tid"]
                        && ts(o) <= ts(l)
                        && end(l) <= end(o)
                })
                .collect(),
            None => Vec::new(),
        };
        enclosing.sort_by(|a, b| ts(a).total_cmp(&ts(b)).then(end(b).total_cmp(&end(a))));
        let op = enclosing
            .iter()
            .find(|o| o["cat"] == "cpu_op")
            .map_or(NO_OP.to_owned(), |o| o["name"].as_str().unwrap().to_owned());
        let path: Vec<&str> = enclosing
            .iter()
            .filter_map(|o| o["name"].as_str().unwrap().strip_prefix("nn.Module: "))
            .collect();
        let module = if path.is_empty() {
            NO_MODULE.to_owned()
        } else {
            path.join(" / ")
        };
        for (map, key) in [(&mut ops, op), (&mut modules, module)] {
            let e = map.entry(key).or_default();
            e.0 += dur;
            e.1 += 1;
        }
    }
    (ops, modules)
}

fn side(rel: &str) -> OpDiffSide {
    let trace = import_paths(&[data(rel)], &ImportOptions::default()).unwrap();
    OpDiffSide::of(&Analyzed::new(&trace))
}

fn assert_matches(
    got: &BTreeMap<String, (i64, usize)>,
    want: &BTreeMap<String, (f64, usize)>,
    what: &str,
) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what} keys"
    );
    for (k, (ns, n)) in got {
        let (us, m) = want[k];
        assert_eq!(*n, m, "{what} {k}: device ops");
        // Start and end are rounded to ns apart: at most 1 ns per device op.
        assert!(
            (*ns as f64 - us * 1e3).abs() <= m as f64 + 1.0,
            "{what} {k}: {ns} ns vs {us} us"
        );
    }
}

#[test]
fn h100_and_mi300x_compare_by_framework_op_and_module() {
    let (h, m) = (side(H100), side(MI300));
    for (s, rel) in [(&h, H100), (&m, MI300)] {
        let (ops, modules) = expected(&raw(rel));
        assert_matches(&s.ops, &ops, rel);
        assert_matches(&s.modules, &modules, rel);
        // Conservation: each table sums to the side's device time.
        assert_eq!(s.ops.values().map(|v| v.0).sum::<i64>(), s.device_ns);
        assert_eq!(s.modules.values().map(|v| v.0).sum::<i64>(), s.device_ns);
        assert!(
            s.ops.len() > 5 && s.modules.len() > 20,
            "{} ops, {} modules",
            s.ops.len(),
            s.modules.len()
        );
    }
    let r = op_diff(H100, &h, MI300, &m);
    assert_eq!(r.delta_ns, m.device_ns - h.device_ns);
    for rows in [&r.ops, &r.modules] {
        assert_eq!(rows.iter().map(|x| x.delta_ns).sum::<i64>(), r.delta_ns);
        assert_eq!(rows.iter().map(|x| x.a_ns).sum::<i64>(), h.device_ns);
        assert_eq!(rows.iter().map(|x| x.b_ns).sum::<i64>(), m.device_ns);
        // The explaining set: the shortest prefix by |delta| reaching 80 % of the total.
        let total: i64 = rows.iter().map(|x| x.delta_ns.abs()).sum();
        let n = rows.iter().filter(|x| x.explains).count();
        assert!(n > 0 && rows[..n].iter().all(|x| x.explains));
        let upto = |k: usize| rows[..k].iter().map(|x| x.delta_ns.abs()).sum::<i64>() as f64;
        assert!(upto(n) >= EXPLAINED_SHARE * total as f64);
        assert!(upto(n - 1) < EXPLAINED_SHARE * total as f64);
        assert!(rows
            .windows(2)
            .all(|w| w[0].delta_ns.abs() >= w[1].delta_ns.abs()));
    }
    assert_eq!(
        r.ops_explaining.len(),
        r.ops.iter().filter(|x| x.explains).count()
    );
}
