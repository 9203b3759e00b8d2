//! Launching profiled programs: the interpreter and bootstrap directory a recorded Python
//! program needs, how a run ended ([`ProgramStatus`], [`ProgramFailed`]), and where the OpenCL
//! layer library is found. Shared by `strato record`, `strato overhead` and `strato validate`.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{bail, Context, Result};

/// The OpenCL layer library: `$STRATOSCOPE_OPENCL_LAYER`, else `libstrato_opencl_layer.so`
/// next to the running executable (the installed Python package's `stratoscope/_bin/`, a cargo
/// target dir), or in its `deps/` or `../lib/`; the newest of those found.
pub fn opencl_layer_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("STRATOSCOPE_OPENCL_LAYER") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot locate the strato executable")?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let name = "libstrato_opencl_layer.so";
    let candidates = [
        dir.join(name),
        dir.join("deps").join(name),
        dir.join("../lib").join(name),
        dir.join("..").join(name),
    ];
    candidates
        .into_iter()
        .filter(|p| p.exists())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no {name} next to {} (pip install . ships it next to strato; in a checkout, cargo build -p strato-opencl-layer; or set STRATOSCOPE_OPENCL_LAYER)",
                exe.display()
            )
        })
}

/// How one run of the recorded program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramStatus {
    /// The exit code, when the program exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl ProgramStatus {
    pub(crate) fn of(status: ExitStatus) -> ProgramStatus {
        ProgramStatus {
            code: status.code(),
            signal: status.signal(),
        }
    }

    /// True when the program exited with code 0.
    pub fn success(self) -> bool {
        self.code == Some(0)
    }

    /// The status a shell reports for it: the exit code (0-255), or 128 + N for signal N.
    pub fn shell_code(self) -> u8 {
        match (self.code, self.signal) {
            (Some(code), _) => (code & 0xff) as u8,
            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
            (None, None) => 1,
        }
    }

    /// "exit code 3", "signal 15 (SIGTERM)".
    pub fn describe(self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => {
                let name = match signal {
                    1 => " (SIGHUP)",
                    2 => " (SIGINT)",
                    3 => " (SIGQUIT)",
                    6 => " (SIGABRT)",
                    9 => " (SIGKILL)",
                    11 => " (SIGSEGV)",
                    15 => " (SIGTERM)",
                    _ => "",
                };
                format!("signal {signal}{name}")
            }
            (None, None) => "an unknown status".into(),
        }
    }
}

/// A run of the recorded program failed where the command needs every run to succeed (the
/// calibration and leveled runs): `strato` stops and exits with [`ProgramFailed::code`], the
/// run's [`ProgramStatus::shell_code`].
#[derive(Debug)]
pub struct ProgramFailed {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for ProgramFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProgramFailed {}

/// Whether the recorded command is a Python interpreter (its program's name starts with
/// `python`).
pub(crate) fn is_python(command: &[String]) -> bool {
    command.first().is_some_and(|c| {
        Path::new(c)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("python"))
    })
}

/// The interpreter the stratoscope package must be importable by: `STRATOSCOPE_PYTHON`, the
/// command itself when it is Python ([`is_python`]), else `python3`.
pub(crate) fn python_for(command: &[String]) -> String {
    if let Ok(p) = std::env::var("STRATOSCOPE_PYTHON") {
        return p;
    }
    if is_python(command) {
        command[0].clone()
    } else {
        "python3".into()
    }
}

/// The recorder's `_bootstrap` directory inside the stratoscope package of the interpreter
/// [`python_for`] names (`STRATOSCOPE_BOOTSTRAP` overrides). The package is looked up without
/// importing anything that could fail loudly: a missing package, or an interpreter that cannot
/// run, is one error line, never the interpreter's traceback.
pub(crate) fn bootstrap_dir(command: &[String]) -> Result<PathBuf> {
    if let Ok(dir) = std::env::var("STRATOSCOPE_BOOTSTRAP") {
        return Ok(PathBuf::from(dir));
    }
    let python = python_for(command);
    // Exit 3: no `stratoscope` module on this interpreter's path; anything else that goes
    // wrong (a broken install) is reported by its last line.
    let out = Command::new(&python)
        .args([
            "-c",
            "import importlib.util, os, sys\n\
             spec = importlib.util.find_spec('stratoscope')\n\
             if spec is None or not spec.submodule_search_locations: sys.exit(3)\n\
             print(os.path.join(list(spec.submodule_search_locations)[0], '_bootstrap'))",
        ])
        .env_remove("STRATOSCOPE_OUT")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| anyhow::anyhow!("record: cannot run {python}: {e}"))?;
    if !out.status.success() {
        // Exit 3 is the lookup's own "no such module"; otherwise the interpreter's last line.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        let why = match (out.status.code(), last) {
            (Some(3), _) | (_, None) => String::new(),
            (_, Some(line)) => format!(": {}", line.trim()),
        };
        bail!(
            "record: the stratoscope Python package is not importable by {python} (pip install . \
             at the repository root, or set STRATOSCOPE_PYTHON to the interpreter that has it){why}"
        );
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::ProgramStatus;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    #[test]
    fn shell_code_is_the_exit_code_or_128_plus_the_signal() {
        // wait(2) statuses: exit code in bits 8-15, a terminating signal in bits 0-6.
        let exited = |code: i32| ProgramStatus::of(ExitStatus::from_raw(code << 8));
        let killed = |signal: i32| ProgramStatus::of(ExitStatus::from_raw(signal));
        assert!(exited(0).success());
        assert_eq!(exited(3).shell_code(), 3);
        assert_eq!(exited(255).shell_code(), 255);
        assert_eq!(exited(3).describe(), "exit code 3");
        assert!(!killed(9).success());
        assert_eq!(killed(9).shell_code(), 137);
        assert_eq!(killed(11).shell_code(), 139);
        assert_eq!(killed(15).shell_code(), 143);
        assert_eq!(killed(15).describe(), "signal 15 (SIGTERM)");
        // A core dump (bit 7) does not change the status a shell reports.
        assert_eq!(
            ProgramStatus::of(ExitStatus::from_raw(11 | 0x80)).shell_code(),
            139
        );
    }
}
