//! The write rules: atomic install, replace a profile, refuse anything else, never leave a
//! half-written profile that looks complete.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use strato_store::StoreErrorKind;
use strato_trace::Trace;

/// Names in `dir`'s parent that start with `dir`'s name, other than `dir` itself: the
/// temp and old siblings a write may leave behind.
fn leftovers(dir: &Path) -> Vec<String> {
    let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
    std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&name) && *n != name)
        .collect()
}

#[test]
fn creates_missing_parents() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/profile");
    strato_store::write(&Trace::default(), &dir).unwrap();
    assert!(strato_store::is_profile_dir(&dir));
    assert!(leftovers(&dir).is_empty());
}

#[test]
fn fills_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("empty");
    std::fs::create_dir(&dir).unwrap();
    strato_store::write(&common::full_trace(), &dir).unwrap();
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
    assert!(leftovers(&dir).is_empty());
}

#[test]
fn replaces_an_existing_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    strato_store::write(&common::big_trace(1000), &dir).unwrap();
    strato_store::write(&common::full_trace(), &dir).unwrap();
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn refuses_a_profile_holding_files_it_did_not_write_and_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    strato_store::write(&common::full_trace(), &dir).unwrap();
    std::fs::write(dir.join("stray.txt"), "mine").unwrap();
    std::fs::create_dir(dir.join("notes")).unwrap();
    assert_eq!(
        strato_store::foreign_entries(&dir).unwrap(),
        ["notes/", "stray.txt"]
    );
    let err = strato_store::write(&common::big_trace(10), &dir).unwrap_err();
    assert!(matches!(err.kind, StoreErrorKind::Refused(_)), "{err}");
    assert!(err.to_string().contains("notes/, stray.txt"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("stray.txt")).unwrap(),
        "mine"
    );
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn refuses_a_non_profile_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("src");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("main.rs"), "fn main() {}").unwrap();
    let err = strato_store::write(&Trace::default(), &dir).unwrap_err();
    assert!(matches!(err.kind, StoreErrorKind::Refused(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: refusing to replace it", dir.display())),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("main.rs")).unwrap(),
        "fn main() {}"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    assert!(leftovers(&dir).is_empty());
}

#[test]
fn refuses_a_directory_whose_metadata_lacks_the_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("metadata.json"), r#"{"format":"other"}"#).unwrap();
    let err = strato_store::write(&Trace::default(), &dir).unwrap_err();
    assert!(matches!(err.kind, StoreErrorKind::Refused(_)), "{err}");
    assert!(dir.join("metadata.json").exists());
}

#[test]
fn refuses_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("trace.json");
    std::fs::write(&path, "{}").unwrap();
    let err = strato_store::write(&Trace::default(), &path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: refusing to replace it: it exists and is not a directory",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
}

#[test]
fn invalid_trace_is_refused_and_leaves_the_old_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    strato_store::write(&common::full_trace(), &dir).unwrap();
    let mut bad = common::full_trace();
    bad.spans[0].track = strato_trace::TrackId(1000);
    let err = strato_store::write(&bad, &dir).unwrap_err();
    assert!(matches!(err.kind, StoreErrorKind::InvalidTrace(_)), "{err}");
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
    assert!(leftovers(&dir).is_empty());
}

#[test]
fn half_written_directory_is_not_a_profile() {
    // What a crash mid-write leaves: tables but no metadata.json (it is written last).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    strato_store::write(&common::full_trace(), &dir).unwrap();
    std::fs::remove_file(dir.join("metadata.json")).unwrap();
    assert!(!strato_store::is_profile_dir(&dir));
    let err = strato_store::read(&dir).unwrap_err();
    assert!(matches!(err.kind, StoreErrorKind::NotAProfile(_)), "{err}");
    // ... and the writer will not silently take it over either.
    assert!(strato_store::write(&Trace::default(), &dir).is_err());
}

#[test]
fn stale_temp_directory_of_our_pid_is_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let stale = tmp.path().join(format!("p.tmp-{}", std::process::id()));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("spans.parquet"), "junk").unwrap();
    strato_store::write(&common::full_trace(), &dir).unwrap();
    assert!(!stale.exists());
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
}

#[test]
fn files_are_not_profiles() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(!strato_store::is_profile_dir(tmp.path()));
    assert!(!strato_store::is_profile_dir(&tmp.path().join("missing")));
    let file = tmp.path().join("metadata.json");
    std::fs::write(&file, r#"{"format":"stratoscope-profile"}"#).unwrap();
    assert!(!strato_store::is_profile_dir(&file));
    // A bare marker is enough for is_profile_dir (it is what write checks before replacing).
    assert!(strato_store::is_profile_dir(tmp.path()));
}
