//! `strato advise`: findings as data, the floor, rules files (TOML), disabling rules, "no
//! findings" exits 0, bad rules files exit 2 with one message naming the file.

use crate::common::*;

const RESNET: &str = "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz";
const CPU_ONLY: &str = "kineto/hta_cpu_only_rank-34.pt.trace.json.gz";

#[test]
fn findings_as_data_with_union_total() {
    let path = data(RESNET);
    if !path.exists() {
        return;
    }
    let doc = json(&["advise", s(&path), "--json"]);
    let findings = doc["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    let window = doc["window_ns"].as_i64().unwrap();
    let total = doc["total_at_stake_ns"].as_i64().unwrap();
    let sum: i64 = findings
        .iter()
        .map(|f| f["time_ns"].as_i64().unwrap())
        .sum();
    let max = findings
        .iter()
        .map(|f| f["time_ns"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(
        max <= total && total <= sum && total <= window,
        "{max} {total} {sum} {window}"
    );
    for f in findings {
        for key in [
            "rule",
            "severity",
            "time_ns",
            "share_pct",
            "message",
            "advice",
            "docs",
        ] {
            assert!(!f[key].is_null(), "{key}");
        }
        assert!(f["share_pct"].as_f64().unwrap() >= 1.0, "the floor");
        let e = &f["evidence"][0];
        for key in ["kind", "rank", "start_ns", "end_ns", "name"] {
            assert!(!e[key].is_null(), "evidence {key}");
        }
    }
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    for rule in ["gpu-idle", "sync-copy", "launch-bound", "step-breakdown"] {
        assert!(rules.contains(&rule), "{rule} in {rules:?}");
    }
    // Text says the total is a union.
    let out = text(&ok(&["advise", s(&path)]).stdout);
    assert!(
        out.contains("total at stake") && out.contains("union"),
        "{out}"
    );
}

#[test]
fn rules_file_disable_and_floor() {
    let path = data(RESNET);
    if !path.exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "# thresholds\nfloor_pct = 0.0\n[gpu_idle]\nenabled = false\n[sync_copy]\npageable = false\n",
    )
    .unwrap();
    let doc = json(&[
        "advise",
        s(&path),
        "--json",
        "--rules",
        s(&rules),
        "--disable",
        "low-util",
    ]);
    let rules_run: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(!rules_run.contains(&"gpu-idle") && !rules_run.contains(&"low-util"));
    assert!(
        !rules_run.contains(&"sync-copy"),
        "pageable copies switched off"
    );
    assert!(
        rules_run.contains(&"host-sync"),
        "floor 0 shows the 0.06% stalls"
    );
    assert_eq!(doc["hidden_below_floor"], 0);
    // --print-rules writes a file that reads back.
    let printed = text(&ok(&["advise", "--print-rules"]).stdout);
    assert!(printed.contains("[gpu_idle]") && printed.contains("min_gap_us = 1000.0"));
    std::fs::write(&rules, printed).unwrap();
    ok(&["advise", s(&path), "--rules", s(&rules)]);
}

#[test]
fn no_findings_exits_zero() {
    let path = data(CPU_ONLY);
    if !path.exists() {
        return;
    }
    let (code, out, _) = run(&["advise", s(&path)]);
    assert_eq!(code, 0);
    assert!(out.contains("No findings"), "{out}");
}

#[test]
fn bad_rules_exit_two_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/kineto/hta_trace_filter");
    let rules = dir.path().join("bad.toml");
    for (text, says) in [
        ("[gpu_idle]\nmin_gap = 3\n", "unknown field"),
        ("floor_pct = 150\n", "floor_pct"),
        ("[low_util\n", "not a valid rules file"),
        ("[launch_bound]\nmax_kernel_us = -1.0\n", "max_kernel_us"),
    ] {
        std::fs::write(&rules, text).unwrap();
        let err = fails(&["advise", s(&fixture), "--rules", s(&rules)]);
        assert!(
            err.contains("bad.toml") && err.contains(says),
            "{text}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let err = fails(&["advise", s(&fixture), "--disable", "nope"]);
    assert!(err.contains("no such rule"), "{err}");
    let err = fails(&[
        "advise",
        s(&fixture),
        "--rules",
        s(&dir.path().join("missing.toml")),
    ]);
    assert!(err.contains("missing.toml"), "{err}");
}

#[test]
fn report_opens_with_the_findings_linked_to_their_evidence() {
    let path = data(RESNET);
    if !path.exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    ok(&["report", s(&path), "-o", s(&out)]);
    let html = std::fs::read_to_string(&out).unwrap();
    let findings = html.find("<h2 id=\"findings\">").expect("findings section");
    assert!(findings < html.find("<h2 id=\"overview\">").unwrap());
    let section = &html[findings..html.find("<h2 id=\"overview\">").unwrap()];
    for (rule, link) in [
        ("gpu-idle", "#utilization"),
        ("sync-copy", "#memory"),
        ("launch-bound", "#kernels"),
        ("step-breakdown", "#iterations"),
    ] {
        let at = section
            .find(&format!("] {rule}: "))
            .unwrap_or_else(|| panic!("{rule}"));
        let end = section[at..].find("</div>").unwrap() + at;
        assert!(
            section[at..end].contains(&format!("href=\"{link}\"")),
            "{rule} -> {link}"
        );
    }
}
