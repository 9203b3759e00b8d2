//! Helpers shared by the CLI tests: where the sample data is, and how to run the built
//! `strato` binary (in an environment cleared of the variables that change its limits and
//! colours, so a developer's shell cannot change a test's outcome).

#![allow(dead_code)] // each test module uses a subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// `rel` under the shared sample data (`../shared/data` next to the repository).
pub fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// The shared sample data directory, when it is there.
pub fn shared_data() -> Option<PathBuf> {
    let p = data("");
    p.exists().then_some(p)
}

/// A command running the built `strato` with a cleared environment (see the module docs).
pub fn strato_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strato"));
    cmd.env_remove("STRATO_MAX_DECOMPRESSED_BYTES")
        .env_remove("STRATO_MEMORY_BUDGET")
        .env_remove("STRATO_JOBS")
        .env_remove("NO_COLOR");
    cmd
}

/// Runs `strato args` with `env` set.
pub fn strato_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = strato_command();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run strato")
}

/// Runs `strato args`.
pub fn strato(args: &[&str]) -> Output {
    strato_env(args, &[])
}

/// Runs `strato args`; (exit code or -1, stdout, stderr) as text.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = strato(args);
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// Runs `strato args`, which must succeed.
pub fn ok(args: &[&str]) -> Output {
    let out = strato(args);
    assert!(
        out.status.success(),
        "strato {args:?} failed: {}",
        text(&out.stderr)
    );
    out
}

/// Runs `strato args`, which must fail with exit code 2; its stderr.
pub fn fails(args: &[&str]) -> String {
    let out = strato(args);
    assert_eq!(out.status.code(), Some(2), "strato {args:?} should fail");
    text(&out.stderr)
}

/// The JSON `strato args` prints (it must succeed).
pub fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&ok(args).stdout).expect("stdout is JSON")
}

/// Bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The stderr of a run as text.
pub fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

/// A path as `&str` (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `strato` with `args`, which must succeed: its stdout parsed as JSON, and its stderr.
pub fn json_ok(args: &[&str]) -> (Value, String) {
    let out = strato(args);
    assert!(
        out.status.success(),
        "strato {args:?} failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), stderr(&out))
}

/// Writes a Kineto trace `name` in `dir` holding `events` (JSON objects as text).
pub fn kineto_file(dir: &Path, name: &str, events: &[String]) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "{{\"schemaVersion\":1,\"traceEvents\":[{}]}}",
        events.join(",")
    );
    std::fs::write(&path, text).unwrap();
    path
}
