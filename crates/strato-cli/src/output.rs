//! Where the `strato` command writes files (`export --chrome/--perfetto`, `report -o`, CSV or
//! JSON written to a path): one place that decides how a path is written, so no command
//! replaces a device, a FIFO or a symlink by accident, and none leaves a partial file that
//! looks complete.
//!
//! The rules (docs/export.md, "Output paths"):
//! - `-` is standard output.
//! - A regular file, or a path that does not exist yet, is written atomically: a temporary
//!   sibling (`.NAME.tmp-PID-RANDOM`), fsynced, renamed onto the path only on success. A file
//!   that is replaced keeps its permission bits.
//! - A symlink is resolved: its final target is written by these same rules, and the link
//!   itself stays. A symlink to nothing is refused (it names a file that may not be meant).
//! - A character or block device, a FIFO or a socket is opened and written to directly,
//!   never replaced (`-o /dev/null` discards the output, a FIFO feeds its reader).
//! - A directory is refused.
//! - An output may not be an input of the same command ([`refuse_inputs`]): not the same file
//!   as any input (same device and inode, after symlinks: `report in.json -o in.json`, or
//!   `-o /dev/stdout` while stdout is redirected to the input), nor a path inside an input
//!   directory (a profile, a directory of rank files: `sql -o PROFILE/spans.parquet`). The
//!   inputs are the command's own plus the global `--graph-capture` and `--level-map` files.
//!   A character device (a terminal, `/dev/null`) is exempt: writing one does not change
//!   what it reads.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// How `path` is written: see the module docs.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Stdout,
    /// A regular file (or a new one) at this path, after symlinks are resolved.
    Atomic(PathBuf),
    /// A device, FIFO or socket at this path: written in place.
    Direct(PathBuf),
}

fn target(path: &Path) -> Result<Target> {
    if path.as_os_str() == "-" {
        return Ok(Target::Stdout);
    }
    let resolved = match path.symlink_metadata() {
        Ok(info) if info.file_type().is_symlink() => {
            std::fs::canonicalize(path).with_context(|| {
                format!(
                    "{}: a symlink to nothing; refusing to write through it",
                    path.display()
                )
            })?
        }
        _ => path.to_path_buf(),
    };
    match std::fs::metadata(&resolved) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Target::Atomic(resolved)),
        Err(e) => Err(e).with_context(|| format!("{}: cannot write", path.display())),
        Ok(info) => {
            let kind = info.file_type();
            if kind.is_dir() {
                bail!("{}: is a directory", path.display());
            }
            if kind.is_file() {
                Ok(Target::Atomic(resolved))
            } else if kind.is_char_device()
                || kind.is_block_device()
                || kind.is_fifo()
                || kind.is_socket()
            {
                Ok(Target::Direct(resolved))
            } else {
                bail!("{}: not a file, device or FIFO", path.display())
            }
        }
    }
}

/// A file's identity: (device, inode).
fn identity(info: &std::fs::Metadata) -> (u64, u64) {
    (info.dev(), info.ino())
}

/// Refuses `out` when writing it would change an input of the command: the same file as one
/// of `inputs` (the command's own and the global options' files, [`crate::ctx::Ctx::read_paths`]),
/// or a path inside one of them that is a directory (module docs). `-` (standard output) and character devices
/// pass. Call it before the inputs are read (fail fast); [`write_output`] checks again.
pub(crate) fn refuse_inputs(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    if out.as_os_str() == "-" {
        return Ok(());
    }
    let inputs: Vec<(&Path, std::fs::Metadata)> = inputs
        .iter()
        .filter(|p| !strato_io::input::is_stdin(p))
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| (p.as_path(), m)))
        .collect();
    if inputs.is_empty() {
        return Ok(());
    }
    // The output itself (symlinks followed), when it exists.
    if let Ok(info) = std::fs::metadata(out) {
        if info.file_type().is_char_device() {
            return Ok(());
        }
        if inputs.iter().any(|(_, m)| identity(m) == identity(&info)) {
            bail!(
                "{}: is an input of this command (would overwrite it)",
                out.display()
            );
        }
    }
    // The directories it would be written in: its parent, resolved, or when the output does
    // not exist the nearest existing ancestor (`import -o` creates the missing ones); and
    // their ancestors.
    let parent = match std::fs::canonicalize(out) {
        Ok(resolved) => resolved.parent().map(Path::to_path_buf),
        Err(_) => out
            .ancestors()
            .skip(1)
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .find_map(|p| std::fs::canonicalize(p).ok()),
    };
    let Some(parent) = parent else {
        return Ok(());
    };
    for dir in parent.ancestors() {
        let Ok(info) = std::fs::metadata(dir) else {
            continue;
        };
        if let Some((input, _)) = inputs
            .iter()
            .find(|(_, m)| m.is_dir() && identity(m) == identity(&info))
        {
            bail!(
                "{}: is inside {}, an input of this command (would change it)",
                out.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// Writes an output at `path` (see the module docs) with `write`, which gets a buffered
/// writer, after [`refuse_inputs`] with the command's `inputs`. On failure nothing is left at
/// a regular-file path, and the old file (if any) is untouched; a device or FIFO may have
/// received part of the output.
pub(crate) fn write_output(
    path: &Path,
    inputs: &[PathBuf],
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    refuse_inputs(path, inputs)?;
    match target(path)? {
        Target::Stdout => {
            let stdout = io::stdout();
            let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
            write(&mut w)?;
            w.flush()?;
            Ok(())
        }
        Target::Direct(resolved) => {
            let result = (|| -> io::Result<()> {
                let file = OpenOptions::new().write(true).open(&resolved)?;
                let mut w = BufWriter::with_capacity(1 << 20, file);
                write(&mut w)?;
                w.flush()
            })();
            result.with_context(|| format!("{}: cannot write", path.display()))
        }
        Target::Atomic(resolved) => write_atomically(&resolved, write)
            .with_context(|| format!("{}: cannot write", path.display())),
    }
}

/// Writes the regular file `out` through a temporary sibling renamed into place only on
/// success; a replaced file's permission bits are kept.
fn write_atomically(
    out: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let file_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let old_mode = std::fs::metadata(out).ok().map(|m| m.permissions().mode());
    let tmp = out.with_file_name(format!(
        ".{file_name}.tmp-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    let in_progress = crate::process_budget::OutputInProgress::new(&tmp);
    let result = (|| -> io::Result<()> {
        let file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Some(mode) = old_mode {
            file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
        }
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        write(&mut writer)?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, out)?;
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        File::open(parent).and_then(|d| d.sync_all())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drop(in_progress);
    result
}

/// Prepares `dir` for `strato record`: a directory holding a profile written by `strato import`
/// would keep showing that profile (a profile is read before recordings), so the profile is
/// replaced like `strato import` replaces one: its files are removed when the directory holds
/// nothing else than what stratoscope writes (profile tables, `*.strato`, `calibration.json`,
/// `.runs/`), and the record is refused otherwise, naming the other files.
pub(crate) fn prepare_record_dir(dir: &Path) -> Result<()> {
    if !strato_store::is_profile_dir(dir) {
        return Ok(());
    }
    let foreign: Vec<String> = strato_store::foreign_entries(dir)?
        .into_iter()
        .filter(|n| !(n.ends_with(".strato") || n == "calibration.json" || n == ".runs/"))
        .collect();
    if !foreign.is_empty() {
        bail!(
            "{}: refusing to record into it: it holds a profile written by `strato import` and \
             files stratoscope did not write ({}); move them out or record elsewhere",
            dir.display(),
            foreign.join(", ")
        );
    }
    strato_store::remove_profile_files(dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_paths() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(target(Path::new("-")).unwrap(), Target::Stdout);
        let new = dir.path().join("new.html");
        assert_eq!(target(&new).unwrap(), Target::Atomic(new.clone()));
        assert_eq!(
            target(Path::new("/dev/null")).unwrap(),
            Target::Direct("/dev/null".into())
        );
        assert!(target(dir.path()).is_err());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("missing"), &link).unwrap();
        assert!(target(&link).is_err());
    }

    #[test]
    fn outputs_that_are_inputs_or_inside_input_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.json");
        std::fs::write(&input, "[]").unwrap();
        let ranks = dir.path().join("ranks");
        std::fs::create_dir(&ranks).unwrap();
        let inputs = vec![input.clone(), ranks.clone()];
        let refused = |out: &Path| {
            refuse_inputs(out, &inputs)
                .map_err(|e| e.to_string())
                .unwrap_err()
        };
        assert!(refused(&input).ends_with(": is an input of this command (would overwrite it)"));
        assert!(refused(&ranks).ends_with(": is an input of this command (would overwrite it)"));
        // Inside the input directory, however deep and whether or not the levels exist.
        for out in [ranks.join("r.html"), ranks.join("a/b/prof")] {
            let e = refused(&out);
            assert!(e.contains(&format!("is inside {}", ranks.display())), "{e}");
        }
        // Beside the inputs, standard output and a character device are fine.
        for out in [
            dir.path().join("r.html"),
            PathBuf::from("-"),
            PathBuf::from("/dev/null"),
        ] {
            refuse_inputs(&out, &inputs).unwrap();
        }
    }
}
