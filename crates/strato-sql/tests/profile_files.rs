//! A session over a profile directory ([`Session::over_profile`], the tables read from their
//! Parquet files as queries run) answers every query exactly as a session over the same
//! profile's tables held in memory ([`Session::with_limits`] over
//! [`strato_store::arrow_tables`]): every table whole, the views, the shipped analyses, and
//! queries that project columns out of order, filter (row-group pruning) and limit. Over every
//! trace of `../shared/data` that imports, one file at a time, and the 8 ranks of param_dlrm8
//! as one profile.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use arrow::util::display::{ArrayFormatter, FormatOptions};
use strato_sql::{Limits, QueryResult, Session};

fn shared_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}

/// Every file under `dir` (recursively) of at most `max_bytes`, sorted.
fn files(dir: &Path, max_bytes: u64, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, max_bytes, out);
        } else if path.metadata().unwrap().len() <= max_bytes
            && path.extension().is_some_and(|e| e != "md")
        {
            out.push(path);
        }
    }
    out.sort();
}

/// The result's rows as text lines, sorted (a query without ORDER BY has no row order).
fn rows(result: &QueryResult) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut lines = Vec::new();
    for batch in &result.batches {
        let formatters: Vec<ArrayFormatter<'_>> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            lines.push(cells.join("\t"));
        }
    }
    lines.sort();
    lines
}

/// The queries both sessions answer: `(query, compare the rows (else only their number))`.
fn queries() -> Vec<(String, bool)> {
    let mut queries: Vec<(String, bool)> = strato_store::table_names()
        .map(|t| (format!("SELECT * FROM {t}"), true))
        .collect();
    for (name, _) in strato_sql::VIEWS {
        queries.push((format!("SELECT * FROM {name}"), true));
    }
    for (_, text) in strato_sql::ANALYSES {
        queries.push((text.to_owned(), true));
    }
    queries.extend([
        ("SELECT count(*) FROM spans".to_owned(), true),
        ("SELECT count(*) FROM kernels".to_owned(), true),
        (
            "SELECT end_ns, name, track FROM spans WHERE start_ns > (SELECT min(start_ns) + \
             (max(start_ns) - min(start_ns)) / 2 FROM spans)"
                .to_owned(),
            true,
        ),
        (
            "SELECT CAST(level AS VARCHAR) AS level, count(*), sum(end_ns - start_ns) FROM spans \
             WHERE CAST(level AS VARCHAR) <> 'Python' GROUP BY 1"
                .to_owned(),
            true,
        ),
        (
            "SELECT s.correlation, t.kind FROM spans s JOIN tracks t ON s.track = t.id \
             WHERE s.correlation IS NOT NULL"
                .to_owned(),
            true,
        ),
        ("SELECT * FROM spans LIMIT 7".to_owned(), false),
    ]);
    queries
}

fn compare(label: &str, inputs: &[PathBuf]) -> bool {
    let options = strato_io::ImportOptions {
        keep_args: true,
        ..strato_io::ImportOptions::default()
    };
    let Ok(trace) = strato_io::import_paths(inputs, &options) else {
        return false;
    };
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile");
    strato_store::write(&trace, &profile).unwrap();
    let limits = Limits::with_budget(4 << 30);
    let in_memory =
        Session::with_limits(strato_store::arrow_tables(&trace).unwrap(), 2, limits).unwrap();
    drop(trace);
    let from_files = Session::over_profile(&profile, 2, limits).unwrap();
    for (query, whole) in queries() {
        let expected = in_memory.query(&query).unwrap();
        let found = from_files
            .query(&query)
            .unwrap_or_else(|e| panic!("{label}: {query}: {e}"));
        assert_eq!(found.schema, expected.schema, "{label}: {query}");
        if whole {
            assert_eq!(rows(&found), rows(&expected), "{label}: {query}");
        } else {
            assert_eq!(found.num_rows(), expected.num_rows(), "{label}: {query}");
        }
    }
    true
}

#[test]
fn profile_files_answer_like_the_tables_in_memory() {
    let mut all = Vec::new();
    files(&shared_data(), 8 << 20, &mut all);
    let mut compared = 0;
    for file in &all {
        if compare(&file.display().to_string(), std::slice::from_ref(file)) {
            compared += 1;
        }
    }
    let ranks = shared_data().join("kineto/param_dlrm8");
    assert!(compare("param_dlrm8", &[ranks]));
    // Most of the shared traces import: the comparison is not vacuous.
    assert!(
        compared >= 20,
        "only {compared} of {} files compared",
        all.len()
    );
}

#[test]
fn a_profile_that_is_not_one_fails_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let err = Session::over_profile(dir.path(), 2, Limits::with_budget(1 << 30)).unwrap_err();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    // A profile whose table file is damaged: the error names the file.
    let trace = strato_io::import_paths(
        &[shared_data().join("kineto/hta_alexnet_trace.json.gz")],
        &strato_io::ImportOptions::default(),
    )
    .unwrap();
    let profile = dir.path().join("p");
    strato_store::write(&trace, &profile).unwrap();
    std::fs::write(profile.join("spans.parquet"), b"PAR1 damaged").unwrap();
    let err = Session::over_profile(&profile, 2, Limits::with_budget(1 << 30)).unwrap_err();
    assert!(err.to_string().contains("spans.parquet"), "{err}");
}

/// A profile whose table was rewritten by another engine (text columns plain instead of
/// dictionary-encoded: another schema than this version writes) is read through the store's
/// checking reader instead, and answers the same.
#[test]
fn a_table_in_another_schema_answers_the_same() {
    use std::sync::Arc;
    let trace = strato_io::import_paths(
        &[shared_data().join("kineto/hta_trace_filter/sampled_rank-0.json.gz")],
        &strato_io::ImportOptions::default(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p");
    strato_store::write(&trace, &profile).unwrap();
    let spans = profile.join("spans.parquet");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(&spans).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let batches: Vec<arrow::array::RecordBatch> = reader.map(Result::unwrap).collect();
    let plain = |f: &arrow::datatypes::Field| match f.data_type() {
        arrow::datatypes::DataType::Dictionary(_, _) => arrow::datatypes::Field::new(
            f.name(),
            arrow::datatypes::DataType::Utf8,
            f.is_nullable(),
        ),
        _ => f.clone(),
    };
    let schema = Arc::new(arrow::datatypes::Schema::new(
        batches[0]
            .schema()
            .fields()
            .iter()
            .map(|f| plain(f))
            .collect::<Vec<_>>(),
    ));
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&spans).unwrap(),
        Arc::clone(&schema),
        None,
    )
    .unwrap();
    for batch in &batches {
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| arrow::compute::cast(c, f.data_type()).unwrap())
            .collect();
        writer
            .write(&arrow::array::RecordBatch::try_new(Arc::clone(&schema), columns).unwrap())
            .unwrap();
    }
    writer.close().unwrap();
    let limits = Limits::with_budget(1 << 30);
    let in_memory =
        Session::with_limits(strato_store::arrow_tables(&trace).unwrap(), 2, limits).unwrap();
    let rewritten = Session::over_profile(&profile, 2, limits).unwrap();
    for query in [
        "SELECT * FROM spans",
        "SELECT * FROM kernels",
        "SELECT count(*) FROM spans",
    ] {
        let (a, b) = (
            in_memory.query(query).unwrap(),
            rewritten.query(query).unwrap(),
        );
        assert_eq!(b.schema, a.schema, "{query}");
        assert_eq!(rows(&b), rows(&a), "{query}");
    }
}
