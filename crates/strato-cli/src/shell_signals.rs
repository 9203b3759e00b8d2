//! What a shell does while it waits for a foreground job, for `strato record`: SIGINT and
//! SIGQUIT are ignored by strato while the recorded program runs, and reset to their default in
//! the program, so a Ctrl-C ends the program (which flushes its recording) and strato goes on
//! to write what was recorded and exit with the program's status. Signals strato itself
//! inherited as ignored (a background job) stay ignored in both.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// SIGINT and SIGQUIT ignored in this process until dropped (then restored).
pub struct ShellSignals {
    /// The signals ignored here and their previous dispositions.
    ignored: Vec<(libc::c_int, libc::sighandler_t)>,
}

impl ShellSignals {
    /// Ignores SIGINT and SIGQUIT (those not ignored already).
    pub fn ignore() -> ShellSignals {
        let mut ignored = Vec::new();
        for signal in [libc::SIGINT, libc::SIGQUIT] {
            // SAFETY: signal(2) with SIG_IGN installs no code; the previous disposition is
            // restored on drop.
            let previous = unsafe { libc::signal(signal, libc::SIG_IGN) };
            if previous != libc::SIG_IGN && previous != libc::SIG_ERR {
                ignored.push((signal, previous));
            }
        }
        ShellSignals { ignored }
    }

    /// Makes `cmd`'s process reset the signals ignored here to their default before exec.
    pub fn reset_in_child(&self, cmd: &mut Command) {
        let signals: Vec<libc::c_int> = self.ignored.iter().map(|s| s.0).collect();
        // SAFETY: the closure runs in the forked child before exec; it only calls signal(2),
        // which is async-signal-safe, over a vector allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for &signal in &signals {
                    libc::signal(signal, libc::SIG_DFL);
                }
                Ok(())
            });
        }
    }
}

impl Drop for ShellSignals {
    fn drop(&mut self) {
        for &(signal, previous) in &self.ignored {
            // SAFETY: puts back the disposition `ignore` replaced.
            unsafe {
                libc::signal(signal, previous);
            }
        }
    }
}
