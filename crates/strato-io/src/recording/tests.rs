//! Unit tests of the recording importer: recordings written here and read back.

use super::*;

#[test]
fn rank_metadata_holds_the_root_processs_collector_figures() {
    // Files as the importer lists them: a child's OS file first, then the root's (its
    // parent, 1, was not recorded), then a second child's; one samples file.
    let entries: Vec<RecordedFile> = serde_json::from_str(
        r#"[{"pid": 20, "ppid": 10, "start_ns": 5, "metadata": {"strato.os": {"switches": 2}}},
            {"pid": 10, "ppid": 1, "start_ns": 9, "metadata": {"strato.os": {"switches": 7}}},
            {"pid": 10, "ppid": 1, "start_ns": 3},
            {"pid": 30, "ppid": 10, "start_ns": 6,
             "metadata": {"strato.os": {"switches": 4}, "strato.samples": {"samples": 8}}}]"#,
    )
    .unwrap();
    let mut meta = serde_json::Map::new();
    root_process_metadata(&entries, &mut meta);
    assert_eq!(meta["strato.os"]["switches"], 7);
    // No root has samples: the first process that has them stands in.
    assert_eq!(meta["strato.samples"]["samples"], 8);
    let mut none = serde_json::Map::new();
    root_process_metadata(&[], &mut none);
    assert!(none.is_empty());
}

#[test]
fn collectors_lost_and_throttled_become_notes_with_the_interval() {
    let meta: serde_json::Map<String, Value> = serde_json::from_str(
        r#"{"strato.os": {"switches": 3, "lost_records_all_processes": 0,
              "throttled_all_processes": {"count": 4, "ns": 2500000,
                                          "from_ns": 1500000000, "to_ns": 1750000000}},
            "strato.samples": {"samples": 10, "lost_all_processes": 7,
              "throttled_all_processes": {"count": 0, "ns": 0,
                                          "from_ns": null, "to_ns": null}}}"#,
    )
    .unwrap();
    let mut notes = strato_trace::ImportNotes::default();
    collector_notes(&meta, 1_000_000_000, &mut notes);
    assert_eq!(notes.get("os_throttled"), 4);
    assert_eq!(notes.get("os_lost_records"), 0);
    assert_eq!(notes.get("samples_lost"), 7);
    assert_eq!(notes.get("samples_throttled"), 0);
    assert_eq!(notes.notes.len(), 2, "{:?}", notes.notes);
    assert!(
        notes.notes.iter().any(|n| n.starts_with(
            "OS level: the kernel throttled its events 4 times, 2.500 ms in all, between 0.500 s and 0.750 s"
        )),
        "{:?}",
        notes.notes
    );
    // Without collectors (or with nothing missed) no note.
    let mut none = strato_trace::ImportNotes::default();
    collector_notes(&serde_json::Map::new(), 0, &mut none);
    assert!(none.is_empty());
}
