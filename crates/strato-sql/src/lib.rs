//! SQL over a profile: the tables of the profile store (`docs/profile-format.md`) and views of
//! the main analyses, queried with an embedded Apache DataFusion; the result printed as a
//! table, CSV, JSON, Parquet or an Arrow IPC stream. Also the SQL texts of the cross-rank
//! analyses, shipped so that other engines (Spark, DuckDB) run the same analysis over a
//! partitioned profile store.
//!
//! This crate owns the SQL contract (`docs/sql.md`, version [`SQL_SCHEMA_VERSION`]): the
//! table names, the views ([`VIEWS`]) and the analyses ([`ANALYSES`]). It is its own crate so
//! that DataFusion's build and size cost stays with `strato sql`: nothing else links it.
//!
//! Rules:
//! - the tables are exactly the profile's Parquet tables (same names, columns, types, rows:
//!   [`strato_store::arrow_tables`]), whatever the input was (trace files, rank directories,
//!   a profile directory, a recording);
//! - the views and analyses are SQL texts in `sql/` of this crate, in the subset of SQL that
//!   DataFusion and Spark SQL both accept (tests run them on both); a view's text is a
//!   `SELECT` over the tables, an analysis's a query over the views;
//! - user queries are read-only: DDL, DML (`COPY`, `INSERT`) and `SET` statements are refused.

use std::io::Write;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::execution::context::{SQLOptions, SessionConfig, SessionContext};

/// Version of the SQL contract: the tables (the profile store's schema version 1 tables) and
/// the views' names and columns. A change that can break a query bumps it.
pub const SQL_SCHEMA_VERSION: u32 = 1;

/// The views every session defines: `(name, SELECT text)`. See `docs/sql.md`.
pub const VIEWS: [(&str, &str); 2] = [
    ("kernels", include_str!("../sql/views/kernels.sql")),
    (
        "device_events",
        include_str!("../sql/views/device_events.sql"),
    ),
];

/// The views over a partitioned store for other engines (Spark, DuckDB), whose table `spans`
/// is the store's `spans.parquet` files with the partition columns (`job`, `host`, `rank`):
/// `(name, SELECT text)`, to be defined under the name without the `store_` prefix. Same
/// columns and rows as [`VIEWS`]; the analyses run on them unchanged. See `docs/sql.md`.
pub const STORE_VIEWS: [(&str, &str); 2] = [
    (
        "store_kernels",
        include_str!("../sql/store_views/kernels.sql"),
    ),
    (
        "store_device_events",
        include_str!("../sql/store_views/device_events.sql"),
    ),
];

/// The shipped analyses: `(name, query text over the views)`. Each is portable SQL (DataFusion
/// and Spark SQL); `strato sql --show NAME` prints it. See `docs/sql.md`.
pub const ANALYSES: [(&str, &str); 3] = [
    (
        "kernel_time_per_rank",
        include_str!("../sql/analyses/kernel_time_per_rank.sql"),
    ),
    (
        "kernel_stats",
        include_str!("../sql/analyses/kernel_stats.sql"),
    ),
    ("gpu_busy", include_str!("../sql/analyses/gpu_busy.sql")),
];

/// The text of view, store view or analysis `name`, if there is one.
pub fn sql_text(name: &str) -> Option<&'static str> {
    VIEWS
        .iter()
        .chain(STORE_VIEWS.iter())
        .chain(ANALYSES.iter())
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The query does not parse, names an unknown table or column, is not read-only, or fails
    /// while it runs.
    #[error("query: {0}")]
    Query(String),
    /// A shipped view does not plan (a bug, reported as such).
    #[error("view {name}: {message}")]
    View { name: &'static str, message: String },
    /// Writing the result failed.
    #[error("writing the result: {0}")]
    Output(String),
}

impl From<datafusion::error::DataFusionError> for SqlError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        // DataFusion's messages can span lines (plans, hints): one line for the CLI.
        SqlError::Query(
            e.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

/// The result of a query: its schema and rows.
#[derive(Debug, Clone)]
pub struct QueryResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl QueryResult {
    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// A SQL session over one profile's tables and the views.
pub struct Session {
    runtime: tokio::runtime::Runtime,
    ctx: SessionContext,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// A session over `tables` (registered under their names, e.g. from
    /// [`strato_store::arrow_tables`]) with [`VIEWS`] defined over them. `threads` is the
    /// number of partitions and worker threads (at least 1).
    pub fn new(tables: Vec<strato_store::ArrowTable>, threads: usize) -> Result<Session, SqlError> {
        let threads = threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("strato-sql")
            .build()
            .map_err(|e| SqlError::Query(format!("cannot start the query runtime: {e}")))?;
        let config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_information_schema(true);
        let ctx = SessionContext::new_with_config(config);
        for table in tables {
            let partitions = split(table.batches, threads);
            let mem = MemTable::try_new(table.schema, partitions)?;
            ctx.register_table(table.name, Arc::new(mem))?;
        }
        let session = Session { runtime, ctx };
        for (name, text) in VIEWS {
            session
                .runtime
                .block_on(async {
                    let frame = session.ctx.sql(text).await?;
                    session.ctx.register_table(name, frame.into_view())?;
                    Ok::<_, datafusion::error::DataFusionError>(())
                })
                .map_err(|e| SqlError::View {
                    name,
                    message: e.to_string(),
                })?;
        }
        Ok(session)
    }

    /// Runs one read-only query.
    pub fn query(&self, sql: &str) -> Result<QueryResult, SqlError> {
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        self.runtime.block_on(async {
            let frame = self.ctx.sql_with_options(sql, options).await?;
            let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
            let batches = frame.collect().await?;
            Ok(QueryResult { schema, batches })
        })
    }
}

/// `batches` dealt round-robin into `n` partitions (DataFusion scans partitions in parallel).
fn split(batches: Vec<RecordBatch>, n: usize) -> Vec<Vec<RecordBatch>> {
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); n.min(batches.len()).max(1)];
    let count = parts.len();
    for (i, batch) in batches.into_iter().enumerate() {
        parts[i % count].push(batch);
    }
    parts
}

/// How [`write_result`] prints a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of row objects (nulls written as `null`).
    Json,
    /// A Parquet file.
    Parquet,
    /// An Arrow IPC stream.
    Arrow,
}

impl Format {
    /// True for the binary formats (Parquet, Arrow IPC).
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Parquet | Format::Arrow)
    }
}

/// Writes `result` to `out` in `format`. Text formats print dictionary-encoded columns as
/// their values; Parquet and Arrow keep the types.
pub fn write_result(
    result: &QueryResult,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), SqlError> {
    let fail = |e: &dyn std::fmt::Display| SqlError::Output(e.to_string());
    match format {
        Format::Table => {
            let batches = plain(result)?;
            let text = arrow::util::pretty::pretty_format_batches(&batches.batches)
                .map_err(|e| fail(&e))?;
            if batches.batches.is_empty() {
                // No batches: print the header alone.
                let names: Vec<&str> = result
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect();
                writeln!(out, "{}", names.join(" | ")).map_err(|e| fail(&e))?;
            } else {
                writeln!(out, "{text}").map_err(|e| fail(&e))?;
            }
            writeln!(out, "({} rows)", result.num_rows()).map_err(|e| fail(&e))?;
        }
        Format::Csv => {
            let batches = plain(result)?;
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            if batches.batches.is_empty() {
                let empty = RecordBatch::new_empty(batches.schema.clone());
                writer.write(&empty).map_err(|e| fail(&e))?;
            }
            for batch in &batches.batches {
                writer.write(batch).map_err(|e| fail(&e))?;
            }
        }
        Format::Json => {
            let batches = plain(result)?;
            let mut writer = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, arrow::json::writer::JsonArray>(&mut *out);
            let refs: Vec<&RecordBatch> = batches.batches.iter().collect();
            writer.write_batches(&refs).map_err(|e| fail(&e))?;
            // Without rows the writer prints `[]`.
            writer.finish().map_err(|e| fail(&e))?;
            writeln!(out).map_err(|e| fail(&e))?;
        }
        Format::Parquet => {
            // The Parquet writer needs a `Send` sink: the file is built in memory (the result
            // is in memory already), then written.
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(Vec::new(), result.schema.clone(), None)
                    .map_err(|e| fail(&e))?;
            for batch in &result.batches {
                writer.write(batch).map_err(|e| fail(&e))?;
            }
            let bytes = writer.into_inner().map_err(|e| fail(&e))?;
            out.write_all(&bytes).map_err(|e| fail(&e))?;
        }
        Format::Arrow => {
            let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut *out, &result.schema)
                .map_err(|e| fail(&e))?;
            for batch in &result.batches {
                writer.write(batch).map_err(|e| fail(&e))?;
            }
            writer.finish().map_err(|e| fail(&e))?;
        }
    }
    out.flush().map_err(|e| fail(&e))
}

/// `result` with every dictionary column cast to its value type (for the text writers).
fn plain(result: &QueryResult) -> Result<QueryResult, SqlError> {
    let fields: Vec<Field> = result
        .schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, value) => f.as_ref().clone().with_data_type((**value).clone()),
            _ => f.as_ref().clone(),
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batches = result
        .batches
        .iter()
        .map(|batch| {
            let columns = batch
                .columns()
                .iter()
                .zip(schema.fields())
                .map(|(column, field)| {
                    if column.data_type() == field.data_type() {
                        Ok(column.clone())
                    } else {
                        arrow::compute::cast(column, field.data_type())
                    }
                })
                .collect::<Result<Vec<ArrayRef>, _>>()?;
            RecordBatch::try_new(schema.clone(), columns)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SqlError::Output(e.to_string()))?;
    Ok(QueryResult { schema, batches })
}
