//! Damaged profiles: every case is an error naming the file and the problem in one line,
//! never a panic. Tables are damaged by rewriting them with arrow/parquet directly.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

/// A fresh profile of the full trace in a temp dir.
fn profile() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    strato_store::write(&common::full_trace(), &dir).unwrap();
    (tmp, dir)
}

/// The error reading `dir`, checked to be one line that starts with the file's path.
fn read_error(dir: &Path, file: &str) -> String {
    let err = strato_store::read(dir).unwrap_err();
    let text = err.to_string();
    assert!(!text.contains('\n'), "multi-line error: {text}");
    let prefix = format!("{}: ", dir.join(file).display());
    assert!(
        text.starts_with(&prefix),
        "{text:?} should start with {prefix:?}"
    );
    text[prefix.len()..].to_owned()
}

/// Rewrites `dir/<table>.parquet`, passing each column through `f` (None drops it).
fn rewrite(dir: &Path, table: &str, f: impl Fn(&Field, &ArrayRef) -> Option<(Field, ArrayRef)>) {
    let path = dir.join(format!("{table}.parquet"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    assert!(!batches.is_empty(), "damage a table that has rows");
    let mut out = Vec::new();
    for batch in &batches {
        let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .filter_map(|(field, column)| f(field, column))
            .unzip();
        out.push(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap());
    }
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), out[0].schema(), None).unwrap();
    for batch in &out {
        writer.write(batch).unwrap();
    }
    writer.close().unwrap();
}

/// Replaces column `name` with `make(len)`.
fn replace(dir: &Path, table: &str, name: &str, make: impl Fn(usize) -> ArrayRef) {
    rewrite(dir, table, |field, column| {
        if field.name() == name {
            let new = make(column.len());
            Some((Field::new(name, new.data_type().clone(), true), new))
        } else {
            Some((field.clone(), column.clone()))
        }
    });
}

fn edit_metadata(dir: &Path, f: impl Fn(&mut serde_json::Value)) {
    let path = dir.join("metadata.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut value);
    std::fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();
}

#[test]
fn missing_table() {
    let (_tmp, dir) = profile();
    std::fs::remove_file(dir.join("spans.parquet")).unwrap();
    let msg = read_error(&dir, "spans.parquet");
    assert!(msg.contains("No such file"), "{msg}");
}

#[test]
fn missing_column() {
    let (_tmp, dir) = profile();
    rewrite(&dir, "spans", |field, column| {
        (field.name() != "start_ns").then(|| (field.clone(), column.clone()))
    });
    assert_eq!(
        read_error(&dir, "spans.parquet"),
        "column 'start_ns' missing"
    );
}

#[test]
fn missing_derived_column_is_fine() {
    let (_tmp, dir) = profile();
    rewrite(&dir, "spans", |field, column| {
        (field.name() != "dur_ns").then(|| (field.clone(), column.clone()))
    });
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
}

#[test]
fn wrong_column_type() {
    let (_tmp, dir) = profile();
    replace(&dir, "spans", "start_ns", |n| {
        Arc::new(StringArray::from(vec!["12"; n]))
    });
    assert_eq!(
        read_error(&dir, "spans.parquet"),
        "column 'start_ns' has type Utf8, expected Int64"
    );
}

#[test]
fn truncated_parquet() {
    let (_tmp, dir) = profile();
    let path = dir.join("spans.parquet");
    let bytes = std::fs::read(&path).unwrap();
    for keep in [bytes.len() / 2, bytes.len() - 3, 0] {
        std::fs::write(&path, &bytes[..keep]).unwrap();
        let msg = read_error(&dir, "spans.parquet");
        assert!(msg.starts_with("invalid Parquet"), "{msg}");
    }
}

#[test]
fn corrupt_pages() {
    let (_tmp, dir) = profile();
    let path = dir.join("tracks.parquet");
    let mut bytes = std::fs::read(&path).unwrap();
    // Scribble over the data pages, keep the footer: decoding must fail cleanly.
    let end = bytes.len().saturating_sub(2000).max(4);
    for b in &mut bytes[4..end] {
        *b = b.wrapping_mul(31).wrapping_add(7);
    }
    std::fs::write(&path, &bytes).unwrap();
    // Whatever part is hit, it is an error about this file (or, if the damage happens to
    // decode, a checked value error), not a panic.
    let err = strato_store::read(&dir).unwrap_err().to_string();
    assert!(
        err.contains("tracks.parquet") || err.contains("invalid trace"),
        "{err}"
    );
}

#[test]
fn metadata_not_json() {
    let (_tmp, dir) = profile();
    std::fs::write(dir.join("metadata.json"), "{ \"format\": \"stratoscope-pro").unwrap();
    let msg = read_error(&dir, "metadata.json");
    assert!(msg.starts_with("invalid metadata: not JSON"), "{msg}");
    assert!(!strato_store::is_profile_dir(&dir));
}

#[test]
fn metadata_missing_fields() {
    let (_tmp, dir) = profile();
    edit_metadata(&dir, |v| {
        v.as_object_mut().unwrap().remove("clock");
    });
    let msg = read_error(&dir, "metadata.json");
    assert!(
        msg.starts_with("invalid metadata: ") && msg.contains("clock"),
        "{msg}"
    );
}

#[test]
fn metadata_without_marker() {
    let (_tmp, dir) = profile();
    edit_metadata(&dir, |v| v["format"] = "something-else".into());
    assert!(!strato_store::is_profile_dir(&dir));
    let msg = read_error(&dir, "metadata.json");
    assert!(msg.starts_with("not a stratoscope profile"), "{msg}");
}

#[test]
fn newer_schema_version() {
    let (_tmp, dir) = profile();
    edit_metadata(&dir, |v| {
        v["schema_version"] = 2.into();
        v["clock"] = "changed shape in v2".into();
    });
    assert!(strato_store::is_profile_dir(&dir));
    assert_eq!(
        read_error(&dir, "metadata.json"),
        "schema_version 2 is newer than this reader supports (1); upgrade stratoscope to read it"
    );
}

#[test]
fn no_metadata_is_not_a_profile() {
    let (_tmp, dir) = profile();
    std::fs::remove_file(dir.join("metadata.json")).unwrap();
    assert!(!strato_store::is_profile_dir(&dir));
    let err = strato_store::read(&dir).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: not a stratoscope profile: no metadata.json",
            dir.display()
        )
    );
}

#[test]
fn row_count_mismatch() {
    let (_tmp, dir) = profile();
    edit_metadata(&dir, |v| v["tables"]["spans"]["rows"] = 15.into());
    assert_eq!(
        read_error(&dir, "spans.parquet"),
        "has 14 rows but metadata.json says 15"
    );
}

#[test]
fn table_not_listed() {
    let (_tmp, dir) = profile();
    edit_metadata(&dir, |v| {
        v["tables"].as_object_mut().unwrap().remove("flows");
    });
    assert_eq!(
        read_error(&dir, "metadata.json"),
        "invalid metadata: table 'flows' is not listed"
    );
}

#[test]
fn null_in_required_column() {
    let (_tmp, dir) = profile();
    replace(&dir, "spans", "track", |n| {
        Arc::new(UInt32Array::from(vec![None; n]))
    });
    assert_eq!(
        read_error(&dir, "spans.parquet"),
        "column 'track' is null at row 0"
    );
}

#[test]
fn dangling_reference() {
    let (_tmp, dir) = profile();
    replace(&dir, "spans", "track", |n| {
        Arc::new(UInt32Array::from(vec![99; n]))
    });
    let err = strato_store::read(&dir).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: invalid trace: span 0 refers to missing track 99",
            dir.display()
        )
    );
}

#[test]
fn unknown_level() {
    let (_tmp, dir) = profile();
    replace(&dir, "instants", "level", |n| {
        Arc::new(StringArray::from(vec!["Warp"; n]))
    });
    assert_eq!(
        read_error(&dir, "instants.parquet"),
        "column 'level' row 0: unknown level \"Warp\""
    );
}

#[test]
fn name_not_in_strings() {
    let (_tmp, dir) = profile();
    replace(&dir, "spans", "name", |n| {
        Arc::new(StringArray::from(vec!["nope"; n]))
    });
    assert_eq!(
        read_error(&dir, "spans.parquet"),
        "column 'name' row 0: \"nope\" is not in strings.parquet"
    );
}

#[test]
fn unknown_track_kind() {
    let (_tmp, dir) = profile();
    replace(&dir, "tracks", "kind", |n| {
        Arc::new(StringArray::from(vec!["Wormhole"; n]))
    });
    assert_eq!(
        read_error(&dir, "tracks.parquet"),
        "column 'kind' row 0: unknown track kind \"Wormhole\""
    );
}

#[test]
fn ids_out_of_order() {
    let (_tmp, dir) = profile();
    replace(&dir, "args", "id", |n| {
        Arc::new(UInt32Array::from_iter_values((0..n as u32).rev()))
    });
    assert_eq!(
        read_error(&dir, "args.parquet"),
        "column 'id' row 0: id 3 out of order (rows must be stored in id order)"
    );
}

#[test]
fn duplicate_string() {
    let (_tmp, dir) = profile();
    replace(&dir, "strings", "text", |n| {
        Arc::new(StringArray::from_iter_values((0..n).map(|i| {
            if i == 0 {
                String::new()
            } else {
                "same".into()
            }
        })))
    });
    assert_eq!(
        read_error(&dir, "strings.parquet"),
        "column 'text' row 2: duplicate string \"same\""
    );
}

#[test]
fn partial_flow_end() {
    let (_tmp, dir) = profile();
    replace(&dir, "flows", "from_ts_ns", |n| {
        Arc::new(arrow::array::Int64Array::from(vec![None; n]))
    });
    let msg = read_error(&dir, "flows.parquet");
    assert!(
        msg.starts_with("column 'from_track' row 0: flow end 'from' is partly null"),
        "{msg}"
    );
}

#[test]
fn plain_text_columns_rewritten_by_another_engine_still_read() {
    let (_tmp, dir) = profile();
    for table in ["spans", "instants", "flows", "tracks"] {
        rewrite(&dir, table, |field, column| {
            if matches!(field.data_type(), DataType::Dictionary(..)) {
                let plain = arrow::compute::cast(column, &DataType::Utf8).unwrap();
                Some((Field::new(field.name(), DataType::Utf8, true), plain))
            } else {
                Some((field.clone(), column.clone()))
            }
        });
    }
    assert_eq!(strato_store::read(&dir).unwrap(), common::full_trace());
}

#[test]
fn random_byte_flips_never_panic() {
    // The Parquet decoder panics on some damaged inputs; the reader must turn that into an
    // error. Deterministic xorshift so a failure reproduces.
    let (_tmp, dir) = profile();
    let mut seed: u64 = 0x1234_5678;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for name in strato_store::table_names() {
        let path = dir.join(format!("{name}.parquet"));
        let original = std::fs::read(&path).unwrap();
        for _ in 0..50 {
            let mut bytes = original.clone();
            for _ in 0..1 + next() % 4 {
                let i = next() as usize % bytes.len();
                bytes[i] = next() as u8;
            }
            std::fs::write(&path, &bytes).unwrap();
            let d = dir.clone();
            let outcome = std::panic::catch_unwind(move || strato_store::read(&d));
            match outcome {
                Ok(Ok(_)) => {} // the flip hit bytes that do not matter (or a value)
                Ok(Err(e)) => assert!(!e.to_string().contains('\n'), "{e}"),
                Err(_) => panic!("read panicked on a damaged {name}.parquet"),
            }
        }
        std::fs::write(&path, &original).unwrap();
    }
}
