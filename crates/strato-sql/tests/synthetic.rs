//! `strato-sql` on synthetic traces whose answers are known by construction: the views pick
//! exactly the device ops, the shipped analyses add up (busy + idle = window, shares sum to
//! 1), and the tables are the profile's.

#![allow(clippy::unwrap_used)]

use arrow::array::{Array, Float64Array, Int64Array, StringArray};
use arrow::compute::concat_batches;
use strato_sql::{Format, QueryResult, Session};
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::Level;

/// Two ranks (job ranks 3 and 7). Rank 3: stream 1 kernels [0,10) and [5,20) (overlap),
/// a copy [30,40) on stream 2, a device sync [40,60) (not a kernel, but a device event), a
/// CPU span; rank 7: one kernel [100,150) and a memset [200,210).
fn trace() -> strato_trace::Trace {
    let mut b = TraceBuilder::new();
    b.rank(rank(Some(3), "r3"));
    let cpu = b.thread(1, 1);
    let s1 = b.queue(0, 1);
    let s2 = b.queue(0, 2);
    b.span(cpu, Level::Backend, "aten::mm", 0, 50);
    b.span(s1, Level::DeviceKernel, "gemm", 0, 10);
    b.span(s1, Level::DeviceKernel, "relu", 5, 20);
    b.span(s2, Level::DeviceCopy, "Memcpy HtoD", 30, 40);
    b.span(s2, Level::DeviceSync, "Event Sync", 40, 60);
    b.rank(rank(Some(7), "r7"));
    let q = b.queue(1, 7);
    b.span(q, Level::DeviceKernel, "gemm", 100, 150);
    b.span(q, Level::DeviceSet, "Memset", 200, 210);
    b.build()
}

fn session() -> Session {
    Session::new(strato_store::arrow_tables(&trace()).unwrap(), 2).unwrap()
}

fn one(result: &QueryResult) -> arrow::array::RecordBatch {
    concat_batches(&result.schema, &result.batches).unwrap()
}

fn i64s(batch: &arrow::array::RecordBatch, name: &str) -> Vec<i64> {
    let col = batch.column_by_name(name).unwrap();
    let col = arrow::compute::cast(col, &arrow::datatypes::DataType::Int64).unwrap();
    let col = col.as_any().downcast_ref::<Int64Array>().unwrap();
    (0..col.len()).map(|i| col.value(i)).collect()
}

#[test]
fn kernels_view_is_one_row_per_device_op() {
    let s = session();
    let r = one(&s
        .query("SELECT rank, device, stream, name, start_ns, end_ns FROM kernels ORDER BY rank, start_ns")
        .unwrap());
    assert_eq!(i64s(&r, "rank"), [3, 3, 3, 7, 7]);
    assert_eq!(i64s(&r, "stream"), [1, 1, 2, 7, 7]);
    assert_eq!(i64s(&r, "device"), [0, 0, 0, 1, 1]);
    assert_eq!(i64s(&r, "start_ns"), [0, 5, 30, 100, 200]);
    assert_eq!(i64s(&r, "end_ns"), [10, 20, 40, 150, 210]);
    let names = arrow::compute::cast(
        r.column_by_name("name").unwrap(),
        &arrow::datatypes::DataType::Utf8,
    )
    .unwrap();
    let names = names.as_any().downcast_ref::<StringArray>().unwrap();
    let names: Vec<&str> = (0..names.len()).map(|i| names.value(i)).collect();
    assert_eq!(names, ["gemm", "relu", "Memcpy HtoD", "gemm", "Memset"]);
}

#[test]
fn kernel_time_per_rank_sums_durations() {
    let s = session();
    let r = one(&s
        .query(strato_sql::sql_text("kernel_time_per_rank").unwrap())
        .unwrap());
    assert_eq!(i64s(&r, "rank"), [3, 7]);
    assert_eq!(i64s(&r, "device_ops"), [3, 2]);
    assert_eq!(i64s(&r, "device_time_ns"), [10 + 15 + 10, 50 + 10]);
}

#[test]
fn kernel_stats_shares_sum_to_one_per_rank() {
    let s = session();
    let r = one(&s
        .query(strato_sql::sql_text("kernel_stats").unwrap())
        .unwrap());
    let ranks = i64s(&r, "rank");
    let totals = i64s(&r, "total_ns");
    let share = r
        .column_by_name("share")
        .unwrap()
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    // Rank 3: relu 15, gemm 10, Memcpy 10 (tie broken by name: "Memcpy HtoD" < "gemm").
    assert_eq!(totals, [15, 10, 10, 50, 10]);
    for want in [3, 7] {
        let sum: f64 = (0..r.num_rows())
            .filter(|&i| ranks[i] == want)
            .map(|i| share.value(i))
            .sum();
        assert!(
            (sum - 1.0).abs() < 1e-12,
            "rank {want}: shares sum to {sum}"
        );
    }
}

#[test]
fn gpu_busy_is_the_union_and_conserves_the_window() {
    let s = session();
    let r = one(&s.query(strato_sql::sql_text("gpu_busy").unwrap()).unwrap());
    assert_eq!(i64s(&r, "rank"), [3, 7]);
    // Rank 3: [0,20) (two overlapping kernels) + [30,40) + [40,60) (the sync touches the
    // copy: one island) = 20 + 30 busy over [0,60).
    assert_eq!(i64s(&r, "device_events"), [4, 2]);
    assert_eq!(i64s(&r, "window_ns"), [60, 110]);
    assert_eq!(i64s(&r, "busy_ns"), [50, 60]);
    assert_eq!(i64s(&r, "idle_ns"), [10, 50]);
    let (w, b, i) = (
        i64s(&r, "window_ns"),
        i64s(&r, "busy_ns"),
        i64s(&r, "idle_ns"),
    );
    for k in 0..w.len() {
        assert_eq!(b[k] + i[k], w[k]);
    }
}

#[test]
fn tables_are_the_profiles() {
    let s = session();
    let trace = trace();
    for (table, rows) in [
        ("spans", trace.spans.len()),
        ("tracks", trace.tracks.len()),
        ("ranks", trace.ranks.len()),
        ("strings", trace.strings.len()),
    ] {
        let r = one(&s
            .query(&format!("SELECT COUNT(*) AS n FROM {table}"))
            .unwrap());
        assert_eq!(i64s(&r, "n"), [rows as i64], "{table}");
    }
    let names: Vec<&str> = strato_store::table_names().collect();
    let r = one(&s
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name")
        .unwrap());
    let col = r.column(0).as_any().downcast_ref::<StringArray>().unwrap();
    let listed: Vec<&str> = (0..col.len()).map(|i| col.value(i)).collect();
    for name in names.iter().chain(["kernels", "device_events"].iter()) {
        assert!(listed.contains(name), "{name} not in {listed:?}");
    }
}

#[test]
fn queries_are_read_only_and_errors_are_one_line() {
    let s = session();
    for bad in [
        "CREATE TABLE x AS SELECT 1",
        "COPY spans TO '/tmp/x.csv'",
        "SET datafusion.execution.batch_size = 1",
        "INSERT INTO spans SELECT * FROM spans",
        "SELECT nope FROM spans",
        "SELECT * FROM no_such_table",
        "SELEC 1",
    ] {
        let e = s.query(bad).unwrap_err().to_string();
        assert!(e.starts_with("query: "), "{bad}: {e}");
        assert!(!e.contains('\n'), "{bad}: {e}");
    }
}

#[test]
fn formats() {
    let s = session();
    let r = s
        .query("SELECT rank, name, correlation, start_ns FROM kernels ORDER BY rank, start_ns")
        .unwrap();
    let mut json = Vec::new();
    strato_sql::write_result(&r, Format::Json, &|_| None, &mut json).unwrap();
    let text = String::from_utf8(json).unwrap();
    assert!(
        text.starts_with("[{\"rank\":3,\"name\":\"gemm\",\"correlation\":null,\"start_ns\":0}"),
        "{text}"
    );
    let mut csv = Vec::new();
    strato_sql::write_result(&r, Format::Csv, &|_| None, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert_eq!(csv.lines().next(), Some("rank,name,correlation,start_ns"));
    assert_eq!(csv.lines().count(), 1 + 5);
    let mut ipc = Vec::new();
    strato_sql::write_result(&r, Format::Arrow, &|_| None, &mut ipc).unwrap();
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(ipc), None).unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 5);
    let mut pq = Vec::new();
    strato_sql::write_result(&r, Format::Parquet, &|_| None, &mut pq).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(pq),
    )
    .unwrap()
    .build()
    .unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 5);
    // An empty result: a header, an empty array.
    let empty = s.query("SELECT rank FROM kernels WHERE rank < 0").unwrap();
    let mut json = Vec::new();
    strato_sql::write_result(&empty, Format::Json, &|_| None, &mut json).unwrap();
    assert_eq!(String::from_utf8(json).unwrap().trim(), "[]");
    let mut csv = Vec::new();
    strato_sql::write_result(&empty, Format::Csv, &|_| None, &mut csv).unwrap();
    assert_eq!(String::from_utf8(csv).unwrap().trim(), "rank");
}
