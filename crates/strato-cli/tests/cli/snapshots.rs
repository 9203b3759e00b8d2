//! Snapshot tests (insta) of the text and JSON outputs of the main commands on a few small
//! real files, so that a refactor that changes any output shows the difference (review with
//! `cargo insta review`, or `INSTA_UPDATE=always cargo test -p strato-cli --test cli
//! snapshots` then `git diff`). Commands run in the data directory with relative paths (the
//! outputs name the files as given, independent of where the repository is); the version is
//! masked as `[VERSION]`.
//!
//! Each file is small (a few kB to a few hundred kB) so the whole set runs in seconds.

use std::path::Path;

use crate::common::{shared_data, strato_command, text};

/// Small real files of different importers: Kineto (with and without a device), Nsight Systems,
/// Nsight Compute, XSpace.
const FILES: &[(&str, &str)] = &[
    ("hta_base", "kineto/hta_trace_compare/base.json.gz"),
    (
        "cuda_event_sync",
        "kineto/hta_cuda_event_sync_trace.json.gz",
    ),
    ("nsys_cloverleaf", "nsys/pipit_cloverleaf_cuda.sqlite"),
    ("ncu_gemm", "ncu/gemm_tiled.csv"),
    ("jax_conv", "xplane_jax/mi300_jax_conv_minimal_08.xplane.pb"),
];

/// The commands snapshotted on every file (`IN` is the file).
const COMMANDS: &[&str] = &[
    "info IN",
    "info --json IN",
    "gpu-time IN",
    "gpu-time --json IN",
    "breakdown IN",
    "breakdown --json IN",
    "hierarchy --json IN",
    "kernels IN",
    "kernels --json IN",
    "layers IN",
    "memory --json IN",
    "iterations --json IN",
];

/// stdout of `strato args` run in `data`, then stderr and the exit code when not empty / not
/// 0, with the version masked.
fn shown(data: &Path, args: &[&str]) -> String {
    let out = strato_command()
        .args(args)
        .current_dir(data)
        .output()
        .expect("run strato");
    let mut shown = text(&out.stdout);
    if !out.stderr.is_empty() {
        shown.push_str("\n--- stderr\n");
        shown.push_str(&text(&out.stderr));
    }
    if !out.status.success() {
        shown.push_str(&format!("\n--- exit code {:?}\n", out.status.code()));
    }
    shown.replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
}

fn snapshot_name(file: &str, command: &str) -> String {
    let words: Vec<&str> = command
        .split_whitespace()
        .filter(|w| *w != "IN")
        .map(|w| w.trim_start_matches('-'))
        .collect();
    format!("{file}__{}", words.join("_"))
}

#[test]
fn main_commands_on_small_real_files() {
    let Some(data) = shared_data() else {
        eprintln!("skipped: no ../shared/data");
        return;
    };
    for (name, rel) in FILES {
        for command in COMMANDS {
            let args: Vec<&str> = command
                .split_whitespace()
                .map(|w| if w == "IN" { rel } else { w })
                .collect();
            let shown = shown(&data, &args);
            insta::assert_snapshot!(snapshot_name(name, command), shown, command);
        }
    }
}

#[test]
fn diff_of_a_real_pair() {
    let Some(data) = shared_data() else {
        eprintln!("skipped: no ../shared/data");
        return;
    };
    let (a, b) = (
        "kineto/hta_trace_compare/base.json.gz",
        "kineto/hta_trace_compare/test.json.gz",
    );
    insta::assert_snapshot!("hta_compare__diff", shown(&data, &["diff", a, b]));
    insta::assert_snapshot!(
        "hta_compare__diff_json",
        shown(&data, &["diff", "--json", a, b])
    );
}

#[test]
fn collectives_of_real_rank_directories() {
    let Some(data) = shared_data() else {
        eprintln!("skipped: no ../shared/data");
        return;
    };
    for (name, rel) in [
        ("dlrm8", "kineto/param_dlrm8"),
        ("hta_trace_filter", "kineto/hta_trace_filter"),
    ] {
        insta::assert_snapshot!(
            format!("{name}__collectives"),
            shown(&data, &["collectives", rel])
        );
        insta::assert_snapshot!(
            format!("{name}__collectives_json"),
            shown(&data, &["collectives", "--json", rel])
        );
    }
}
