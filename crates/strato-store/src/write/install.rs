//! The profile directory on disk: which targets may be replaced, the temporary and old
//! siblings (and their removal once stale), the atomic install, and the fsyncs it relies on.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::STALE_AGE;
use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta;
use crate::schema;

/// The names of the files a profile directory holds (the tables and `metadata.json`).
fn profile_file_names() -> Vec<String> {
    schema::ALL
        .iter()
        .map(|t| t.file())
        .chain(std::iter::once(meta::METADATA_FILE.to_owned()))
        .collect()
}

/// Refuses a target that exists and is neither an empty directory nor a profile holding only
/// the files stratoscope writes (replacing it would delete the others).
pub(super) fn check_target(dir: &Path) -> Result<()> {
    let Ok(info) = std::fs::metadata(dir) else {
        return Ok(());
    };
    let refuse = |why: String| Err(StoreError::new(dir, StoreErrorKind::Refused(why)));
    if !info.is_dir() {
        return refuse("it exists and is not a directory".into());
    }
    if is_empty_dir(dir)? {
        return Ok(());
    }
    if !meta::has_marker(dir) {
        return refuse(
            "it is a non-empty directory that is not a stratoscope profile (no metadata.json \
             marker)"
                .into(),
        );
    }
    let foreign = foreign_entries(dir)?;
    if !foreign.is_empty() {
        return refuse(format!(
            "the profile holds files stratoscope did not write ({}); move them out or write \
             the profile elsewhere",
            foreign.join(", ")
        ));
    }
    Ok(())
}

/// Entries of the profile directory `dir` that are not files stratoscope writes, sorted
/// (directories end in `/`).
pub(crate) fn foreign_entries(dir: &Path) -> Result<Vec<String>> {
    let ours = profile_file_names();
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StoreError::new(dir, e))? {
        let entry = entry.map_err(|e| StoreError::new(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !(is_file && ours.contains(&name)) {
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            foreign.push(if is_dir { format!("{name}/") } else { name });
        }
    }
    foreign.sort();
    Ok(foreign)
}

/// See [`crate::remove_profile_files`].
pub(crate) fn remove_profile_files(dir: &Path) -> Result<()> {
    for name in
        std::iter::once(meta::METADATA_FILE.to_owned()).chain(schema::ALL.iter().map(|t| t.file()))
    {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::new(&path, e))
            }
            _ => {}
        }
    }
    sync_dir(dir)
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    let mut entries = std::fs::read_dir(dir).map_err(|e| StoreError::new(dir, e))?;
    Ok(entries.next().is_none())
}

/// `DIR.<what>-<pid>` beside `dir`.
pub(super) fn sibling(dir: &Path, what: &str) -> Result<PathBuf> {
    let name = dir.file_name().ok_or_else(|| {
        StoreError::new(
            dir,
            StoreErrorKind::Refused("the path does not end in a directory name".into()),
        )
    })?;
    let mut name = name.to_os_string();
    name.push(format!(".{what}-{}", std::process::id()));
    Ok(dir.with_file_name(name))
}

/// Removes `DIR.tmp-PID` siblings (and `DIR.old-PID` ones while `DIR` exists) whose process
/// is gone and that are older than [`STALE_AGE`]. Best effort: a sibling that cannot be
/// removed is left.
pub(super) fn remove_stale_siblings(dir: &Path) {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let dir_exists = dir.exists();
    for entry in entries.flatten() {
        let entry_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = entry_name.strip_prefix(&format!("{name}.")) else {
            continue;
        };
        let pid = match rest.split_once('-') {
            Some(("tmp", pid)) => pid,
            // The old profile of an interrupted replace is the only copy while DIR is missing.
            Some(("old", pid)) if dir_exists => pid,
            _ => continue,
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) && untouched_for(&path) >= STALE_AGE {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// False only when no process `pid` exists on this machine.
fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// How long ago `dir` or any file directly in it was last modified (zero when unknown).
fn untouched_for(dir: &Path) -> std::time::Duration {
    let mtime = |p: &Path| std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
    let mut newest = mtime(dir);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            newest = newest.max(mtime(&entry.path()));
        }
    }
    newest
        .and_then(|t| t.elapsed().ok())
        .unwrap_or(std::time::Duration::ZERO)
}

/// Moves the finished `tmp` to `dir`, replacing an existing profile or empty directory, so
/// that `dir` holds either the old or the new profile, complete, and nothing else is left:
/// the replace is one `renameat2(RENAME_EXCHANGE)` (the old profile lands in `tmp` and is
/// removed; if it cannot be, the exchange is undone). The new directory keeps the old one's
/// permission bits.
pub(super) fn install(tmp: &Path, dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |e| StoreError::new(path, e)
    };
    let Ok(old_info) = std::fs::metadata(dir) else {
        std::fs::rename(tmp, dir).map_err(err(dir))?;
        return sync_parent(dir);
    };
    let keep_mode = || {
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode(old_info.permissions().mode() & 0o7777),
        )
        .map_err(err(dir))
    };
    if is_empty_dir(dir)? {
        // rename(2) replaces an empty directory.
        std::fs::rename(tmp, dir).map_err(err(dir))?;
        keep_mode()?;
        return sync_parent(dir);
    }
    // Re-check just before moving anything: never move away what is not a profile.
    check_target(dir)?;
    // The old profile's files must be removable, or the replace would leave it behind.
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
        .map_err(|e| StoreError::new(dir, std::io::Error::from(e)))?;
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        tmp,
        rustix::fs::CWD,
        dir,
        rustix::fs::RenameFlags::EXCHANGE,
    ) {
        Ok(()) => {
            sync_parent(dir)?;
            // `tmp` now holds the old profile.
            if let Err(e) = std::fs::remove_dir_all(tmp) {
                let undo = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    tmp,
                    rustix::fs::CWD,
                    dir,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                if undo.is_ok() {
                    let _ = sync_parent(dir);
                }
                return Err(StoreError::new(dir, e));
            }
            keep_mode()
        }
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            // The file system cannot exchange: move the old one aside, then the new in.
            let old = sibling(dir, "old")?;
            if old.symlink_metadata().is_ok() {
                std::fs::remove_dir_all(&old).map_err(err(&old))?;
            }
            std::fs::rename(dir, &old).map_err(err(dir))?;
            if let Err(e) = std::fs::rename(tmp, dir) {
                let _ = std::fs::rename(&old, dir);
                return Err(StoreError::new(dir, e));
            }
            sync_parent(dir)?;
            std::fs::remove_dir_all(&old).map_err(err(&old))?;
            keep_mode()
        }
        Err(e) => Err(StoreError::new(dir, std::io::Error::from(e))),
    }
}

/// fsyncs the directory holding `path` so a rename survives a crash.
fn sync_parent(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(parent)
}

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    if cfg!(unix) {
        File::open(dir)
            .and_then(|f| f.sync_all())
            .map_err(|e| StoreError::new(dir, e))?;
    }
    Ok(())
}
