//! The terminal: whether to colour (only when the stream is a TTY, never with `NO_COLOR` set
//! to anything non-empty, never with `TERM=dumb`), how wide to draw (`COLUMNS`, else the
//! terminal's width, else 120 when not a terminal), and progress bars on stderr (only when
//! stderr is a TTY) for long imports and analyses.
//!
//! Progress of an import comes from `strato_io::ImportOptions::progress`, a hook called with
//! the bytes read so far; the total is the file's size, or for gzip the size recorded in its
//! trailer (exact below 4 GiB). Bars appear only after a file has taken half a second, are
//! redrawn at most 10 times a second, and are erased when done, so short runs print nothing.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use strato_analysis::text::terminal::Terminal as Term;

fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
        || std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

/// Terminal width: `COLUMNS` when set, else the size of the terminal on stdout or stderr,
/// else `fallback`.
pub fn width(fallback: usize) -> usize {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c >= 20)
    {
        return c;
    }
    terminal_size::terminal_size_of(std::io::stdout())
        .or_else(|| terminal_size::terminal_size_of(std::io::stderr()))
        .map_or(fallback, |(w, _)| usize::from(w.0).max(20))
}

/// What stdout allows: colour only on a TTY without `NO_COLOR`/`TERM=dumb`, the width of
/// [`width`] (120 when not a terminal).
pub fn stdout() -> Term {
    let tty = std::io::stdout().is_terminal();
    Term {
        color: tty && !no_color(),
        width: width(strato_analysis::text::terminal::DEFAULT_WIDTH),
    }
}

// ---------------------------------------------------------------------------------------------
// Progress.

struct Bar {
    path: PathBuf,
    total: Option<u64>,
    started: Instant,
    last_draw: Option<Instant>,
    drawn: bool,
}

#[derive(Default)]
struct ProgressState {
    bar: Option<Bar>,
}

fn state() -> &'static Mutex<ProgressState> {
    static STATE: std::sync::OnceLock<Mutex<ProgressState>> = std::sync::OnceLock::new();
    STATE.get_or_init(|| Mutex::new(ProgressState::default()))
}

/// True when progress may be drawn: stderr is a terminal and `STRATO_NO_PROGRESS` is unset.
pub fn progress_enabled() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("STRATO_NO_PROGRESS").is_none()
}

/// The size of the data in `path`: the file size, or the gzip trailer's ISIZE (size mod 2^32)
/// when it is gzip and the file is smaller than 4 GiB.
fn data_size(path: &Path) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut magic = [0u8; 2];
    f.read_exact(&mut magic).ok()?;
    if magic != [0x1f, 0x8b] {
        return Some(len);
    }
    if !(18..1 << 32).contains(&len) {
        return None;
    }
    f.seek(SeekFrom::End(-4)).ok()?;
    let mut isize = [0u8; 4];
    f.read_exact(&mut isize).ok()?;
    Some(u64::from(u32::from_le_bytes(isize)))
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1073741824.0 {
        format!("{:.2} GiB", b / 1073741824.0)
    } else {
        format!("{:.0} MiB", b / 1048576.0)
    }
}

/// One progress line of `width` columns.
fn render_bar(
    label: &str,
    done: u64,
    total: Option<u64>,
    elapsed: Duration,
    width: usize,
) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3) / 1048576.0;
    match total.filter(|&t| t > 0) {
        Some(total) => {
            let frac = (done as f64 / total as f64).clamp(0.0, 1.0);
            let tail = format!(
                " {:>3.0}% {} / {} {:.0} MiB/s",
                100.0 * frac,
                human(done),
                human(total),
                rate
            );
            let name_w = 24.min(width / 3);
            let name = strato_analysis::text::units::fit(label, name_w);
            let bar_w = width
                .saturating_sub(name_w + tail.chars().count() + 4)
                .clamp(5, 50);
            let fill = ((bar_w as f64) * frac).round() as usize;
            format!(
                "{name:<name_w$} [{}{}]{tail}",
                "#".repeat(fill),
                "-".repeat(bar_w - fill)
            )
        }
        None => format!(
            "{} {} read, {:.0} MiB/s",
            strato_analysis::text::units::fit(label, 40),
            human(done),
            rate
        ),
    }
}

fn draw(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{line}");
    let _ = err.flush();
}

/// Erases the progress line, if one was drawn.
pub fn finish_progress() {
    if let Ok(mut s) = state().lock() {
        if s.bar.take().is_some_and(|b| b.drawn) {
            draw("");
        }
    }
}

/// The terminal as the engine's listener: the import progress bar on stderr (when it is a
/// terminal), and each warning or note as one line on stderr.
#[derive(Debug, Default, Clone, Copy)]
pub struct Terminal;

impl strato_engine::Listener for Terminal {
    fn progress(&self) -> Option<strato_io::ProgressHook> {
        import_progress()
    }

    fn import_finished(&self) {
        finish_progress();
    }

    fn notice(&self, line: &str) {
        eprintln!("{line}");
    }
}

/// The import progress hook for `ImportOptions::progress`, or `None` when stderr is not a
/// terminal.
pub fn import_progress() -> Option<strato_io::ProgressHook> {
    if !progress_enabled() {
        return None;
    }
    let hook = move |path: &Path, done: u64| {
        let Ok(mut s) = state().lock() else { return };
        let now = Instant::now();
        if s.bar.as_ref().is_none_or(|b| b.path != path) {
            if s.bar.as_ref().is_some_and(|b| b.drawn) {
                draw("");
            }
            s.bar = Some(Bar {
                path: path.to_path_buf(),
                total: data_size(path),
                started: now,
                last_draw: None,
                drawn: false,
            });
        }
        let Some(bar) = s.bar.as_mut() else { return };
        let elapsed = now - bar.started;
        let due = bar
            .last_draw
            .is_none_or(|t| now - t >= Duration::from_millis(100));
        if elapsed >= Duration::from_millis(500) && due {
            let label = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            draw(&render_bar(
                &label,
                done,
                bar.total,
                elapsed,
                width(80).min(120),
            ));
            bar.last_draw = Some(now);
            bar.drawn = true;
        }
    };
    Some(strato_io::ProgressHook(Arc::new(hook)))
}

/// Steps of a long computation (`analysing 3/7: kernels`), on stderr when it is a terminal.
#[derive(Debug)]
pub struct Steps {
    label: &'static str,
    total: usize,
    done: usize,
    on: bool,
}

impl Steps {
    pub fn new(total: usize) -> Steps {
        Steps::labelled("analysing", total)
    }

    /// Steps shown as `label [###---] done/total what` (stderr, only on a TTY).
    pub fn labelled(label: &'static str, total: usize) -> Steps {
        Steps {
            label,
            total,
            done: 0,
            on: progress_enabled(),
        }
    }

    /// Announces the next step.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        if self.on {
            let w = width(80).min(120);
            let frac = self.done as f64 / self.total.max(1) as f64;
            let bar_w = 20usize;
            let fill = ((bar_w as f64) * frac).round() as usize;
            draw(&strato_analysis::text::units::fit(
                &format!(
                    "{} [{}{}] {}/{} {what}",
                    self.label,
                    "#".repeat(fill.min(bar_w)),
                    "-".repeat(bar_w - fill.min(bar_w)),
                    self.done,
                    self.total
                ),
                w.saturating_sub(1),
            ));
        }
    }

    /// Erases the line.
    pub fn finish(self) {
        if self.on {
            draw("");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fits_the_width() {
        for w in [40, 80, 200] {
            let line = render_bar(
                "a_long_trace_file_name.json.gz",
                5 << 20,
                Some(10 << 20),
                Duration::from_secs(1),
                w,
            );
            assert!(line.chars().count() <= w.max(60), "{w}: {line}");
            assert!(line.contains("50%"), "{line}");
        }
        let line = render_bar("x", 3 << 20, None, Duration::from_secs(1), 80);
        assert!(line.contains("3 MiB read"));
    }

    #[test]
    fn gzip_size_comes_from_the_trailer() {
        let dir = std::env::temp_dir().join(format!("strato-term-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&vec![b'a'; 100_000]).unwrap();
        std::fs::write(&p, enc.finish().unwrap()).unwrap();
        assert_eq!(data_size(&p), Some(100_000));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
