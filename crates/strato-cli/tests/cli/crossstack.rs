//! CLI tests of the cross-stack subcommands: the JSON shapes our checks read, conservation
//! through the CLI, and every text mode running on a real trace.

use serde_json::Value;

use crate::common::{data, json, run};

const NCCL: &str = "kineto/hta_nccl_data.json.gz";

#[test]
fn breakdown_json_shape_and_conservation() {
    let path = data(NCCL);
    let v = json(&["breakdown", path.to_str().unwrap(), "--json"]);
    let processes = v["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1);
    let p = &processes[0];
    assert_eq!(p["pid"], 2910249);
    let window = p["window_ns"].as_i64().unwrap();
    assert_eq!(
        window,
        p["window_end_ns"].as_i64().unwrap() - p["window_start_ns"].as_i64().unwrap()
    );
    let rows = p["rows"].as_array().unwrap();
    let mut sum = 0;
    for r in rows {
        for key in ["phase", "operation", "resource", "cpu_level", "time_ns"] {
            assert!(r.get(key).is_some(), "row lacks {key}");
        }
        let resource = r["resource"].as_str().unwrap();
        assert!(["CPU", "GPU", "CPU+GPU", "idle"].contains(&resource));
        assert_eq!(r["cpu_level"].is_null(), matches!(resource, "GPU" | "idle"));
        sum += r["time_ns"].as_i64().unwrap();
    }
    assert_eq!(sum, window);
    let transitions = p["transitions"].as_array().unwrap();
    assert!(transitions
        .iter()
        .any(|t| t["from"] == "Python" && t["to"] == "Backend"));
    assert!(transitions
        .iter()
        .any(|t| t["from"] == "Backend" && t["to"] == "AcceleratorApi"));
    for t in transitions {
        for key in ["operation", "from", "to", "count"] {
            assert!(t.get(key).is_some());
        }
    }
}

#[test]
fn breakdown_of_a_directory_of_ranks_has_a_summary_and_csv_rows() {
    let path = data("kineto/hta_trace_filter");
    let v = json(&["breakdown", path.to_str().unwrap(), "--json"]);
    assert_eq!(v["processes"].as_array().unwrap().len(), 2);
    assert!(v["summary"]["slowest_rank"].is_i64());
    let (code, csv, _) = run(&["breakdown", path.to_str().unwrap(), "--csv"]);
    assert_eq!(code, 0);
    assert!(csv.starts_with("rank,pid,phase,operation,resource,cpu_level,time_ns,window_ns\n"));
}

#[test]
fn hierarchy_json_counts() {
    let path = data(NCCL);
    let v = json(&["hierarchy", path.to_str().unwrap(), "--json"]);
    let ops = v["device_ops"].as_u64().unwrap();
    assert_eq!(ops, 3774);
    assert_eq!(v["with_launch"].as_u64().unwrap(), ops);
    assert!(v["with_annotation"].as_u64().unwrap() * 100 >= ops * 99);
}

#[test]
fn util_json_shape_and_sanity() {
    let path = data(NCCL);
    let v = json(&["util", path.to_str().unwrap(), "--json"]);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1);
    let d = &devices[0];
    assert_eq!(d["device"], 0);
    let busy = d["true_busy_pct"].as_f64().unwrap();
    let sampled = d["sampled_pct"].as_object().unwrap();
    assert_eq!(sampled.len(), 2);
    assert!(sampled.contains_key("0.167") && sampled.contains_key("1"));
    for pct in sampled.values() {
        assert!(busy <= pct.as_f64().unwrap());
    }
}

#[test]
fn text_modes_run() {
    let path = data("kineto/hta_df_index_resolver.json.gz");
    let p = path.to_str().unwrap();
    for args in [
        vec!["breakdown", p],
        vec!["hierarchy", p],
        vec!["tree", p],
        vec!["tree", p, "--at", "250ms"],
        vec!["tree", p, "--kernel", "sgemm", "--limit", "1"],
        vec!["layers", p],
        vec!["layers", p, "--kernels"],
        vec!["layers", p, "--steps"],
        vec!["layers", p, "--by", "annotation", "--csv"],
        vec!["roofline", p],
        vec!["util", p, "--period", "0.05"],
    ] {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(!stdout.is_empty(), "{args:?}");
    }
    let (_, tree, _) = run(&["tree", p, "--kernel", "sgemm", "--limit", "1"]);
    for level in ["Operation", "Backend", "AcceleratorApi", "DeviceKernel"] {
        assert!(tree.contains(level), "{tree}");
    }
    let (code, _, stderr) = run(&["tree", p, "--at", "soon"]);
    assert_eq!(code, 2);
    assert!(stderr.starts_with("strato: "));
    let (code, _, stderr) = run(&["tree", p, "--at", "1ms", "--kernel", "sgemm"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not both"), "{stderr}");
}

/// `tree`'s table holds every link of every chain, in order, numbered by chain; each chain
/// nests in time from its leaf to its root.
#[test]
fn tree_table_is_the_chains_link_by_link() {
    let path = data("kineto/hta_df_index_resolver.json.gz");
    let p = path.to_str().unwrap();
    let doc = json(&["tree", p, "--kernel", "sgemm", "--limit", "3", "--json"]);
    let chains = doc["chains"].as_array().unwrap();
    assert_eq!(chains.len(), 3, "{doc}");
    for chain in chains {
        let links = chain.as_array().unwrap();
        assert_eq!(links[0]["level"], "DeviceKernel", "{chain}");
        for pair in links.windows(2) {
            // Device ops hang off their launch by correlation, not by containment.
            if pair[0]["level"] == "DeviceKernel" {
                continue;
            }
            assert!(
                pair[1]["start_ns"].as_i64() <= pair[0]["start_ns"].as_i64(),
                "{chain}"
            );
            assert!(
                pair[1]["end_ns"].as_i64() >= pair[0]["end_ns"].as_i64(),
                "{chain}"
            );
        }
    }
    let (code, csv, stderr) = run(&[
        "tree",
        p,
        "--kernel",
        "sgemm",
        "--limit",
        "3",
        "--csv",
        "--table",
        "tree_links",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let links: Vec<(usize, &Value)> = chains
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.as_array().unwrap().iter().map(move |l| (i, l)))
        .collect();
    assert_eq!(rows.len(), links.len());
    for (row, (chain, link)) in rows.iter().zip(&links) {
        assert_eq!(row[col("chain")], chain.to_string());
        assert_eq!(row[col("span")], link["span"].to_string());
        assert_eq!(&row[col("name")], link["name"].as_str().unwrap());
    }
}
