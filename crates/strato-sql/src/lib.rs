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
//! - over a profile directory the tables are its files, read while a query runs (only the
//!   columns and row groups it needs: `parquet_table.rs`), so memory is what the query's
//!   operators keep, not the size of the profile;
//! - the views and analyses are SQL texts in `sql/` of this crate, in the subset of SQL that
//!   DataFusion and Spark SQL both accept (tests run them on both); a view's text is a
//!   `SELECT` over the tables, an analysis's a query over the views;
//! - user queries are read-only: DDL, DML (`COPY`, `INSERT`) and `SET` statements are refused;
//! - a query cannot crash, starve or exhaust the machine: its text is bounded ([`QueryLimits`]),
//!   its operators run in a memory pool, its result and the text functions that build values
//!   from a count are bounded, and it is cancelled past a timeout ([`Limits`]).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use datafusion::execution::context::{SQLOptions, SessionConfig, SessionContext};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use futures::StreamExt;

mod bounded_text;
mod cancel;
mod guard;
mod parquet_table;

pub use bounded_text::MAX_BUILT_TEXT_BYTES;
pub use guard::{QueryLimits, MAX_EXPRESSION_DEPTH, MAX_QUERY_BLOCKS, MAX_QUERY_BYTES};

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
    /// The query does not parse, names an unknown table or column, is not read-only, passes a
    /// query limit ([`QueryLimits`]), or fails while it runs (the memory pool exhausted, a
    /// bounded function refused: [`MAX_BUILT_TEXT_BYTES`]).
    #[error("query: {0}")]
    Query(String),
    /// The result passed its share of the memory budget ([`Limits::result_bytes`]).
    #[error(
        "query: the result exceeds {limit_mib} MiB of the memory budget: add LIMIT or aggregate \
         (STRATO_MEMORY_BUDGET, docs/sql.md)"
    )]
    ResultTooLarge { limit_mib: u64 },
    /// The query ran longer than [`Limits::timeout`] and was cancelled.
    #[error("query: cancelled after {seconds} s (--timeout SECS; 0: no limit)")]
    Timeout { seconds: u64 },
    /// The profile directory cannot be read (its metadata, or a table file): the message
    /// names the file.
    #[error("{0}")]
    Profile(String),
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
        SqlError::Query(one_line(&e.to_string()))
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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

/// Default [`Limits::timeout`]: 300 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Stack of the threads that parse, plan and run a query: 256 MiB of address space (touched
/// only as deep as a query goes), for the deepest query [`QueryLimits`] allow (the CLI tests
/// plan and run one at the depth limit, in the test profile's build).
const QUERY_THREAD_STACK_BYTES: usize = 256 << 20;

/// How long a cancelled query's threads get to stop before the session leaves them behind.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What a session may spend on one query.
///
/// Rules: the memory budget is split in two halves, one the pool of DataFusion's operators
/// (joins, sorts, aggregations, a recursive query's work table: past it the query fails, and
/// nothing spills to disk), the other the result held for printing
/// ([`SqlError::ResultTooLarge`] past it). Tables read from a profile's files
/// ([`Session::over_profile`]) hold one batch per partition while a query runs; tables given in
/// memory ([`Session::with_limits`]) are not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Size, depth and breadth of the query text.
    pub query: QueryLimits,
    /// The memory budget in bytes (the CLI's `STRATO_MEMORY_BUDGET`).
    pub memory_budget_bytes: u64,
    /// Time the query may run; `None`: no limit.
    pub timeout: Option<Duration>,
    /// Most bytes one call of `repeat`, `lpad` or `rpad` may build.
    pub max_built_text_bytes: u64,
}

impl Limits {
    /// The default limits under a memory budget of `memory_budget_bytes`.
    pub fn with_budget(memory_budget_bytes: u64) -> Limits {
        Limits {
            query: QueryLimits::default(),
            memory_budget_bytes,
            timeout: Some(DEFAULT_TIMEOUT),
            max_built_text_bytes: MAX_BUILT_TEXT_BYTES,
        }
    }

    /// Bytes of the operators' memory pool: half of the budget.
    pub fn pool_bytes(&self) -> u64 {
        self.memory_budget_bytes / 2
    }

    /// Most bytes of result held: the other half of the budget.
    pub fn result_bytes(&self) -> u64 {
        self.memory_budget_bytes - self.pool_bytes()
    }
}

/// A SQL session over one profile's tables and the views.
pub struct Session {
    /// Always `Some` until the session is dropped (then shut down without waiting: see
    /// [`Session::query`]).
    runtime: Option<tokio::runtime::Runtime>,
    ctx: SessionContext,
    limits: Limits,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A cancelled query's operator that never yields would make a blocking shutdown hang.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Session {
    /// A session over `tables` (registered under their names, e.g. from
    /// [`strato_store::arrow_tables`]) with [`VIEWS`] defined over them. `threads` is the
    /// number of partitions and worker threads (at least 1). The limits are
    /// [`Limits::with_budget`] of 8 GiB.
    pub fn new(tables: Vec<strato_store::ArrowTable>, threads: usize) -> Result<Session, SqlError> {
        Session::with_limits(tables, threads, Limits::with_budget(8 << 30))
    }

    /// [`Session::new`] under `limits`. The tables are held in memory.
    pub fn with_limits(
        tables: Vec<strato_store::ArrowTable>,
        threads: usize,
        limits: Limits,
    ) -> Result<Session, SqlError> {
        let threads = threads.max(1);
        let mut sources: Vec<(&'static str, Arc<dyn TableProvider>)> = Vec::new();
        for table in tables {
            let partitions = split(table.batches, threads);
            let mem = MemTable::try_new(table.schema, partitions)?;
            sources.push((table.name, Arc::new(mem)));
        }
        Session::over(sources, threads, limits)
    }

    /// A session over the profile directory `dir` (`docs/profile-format.md`), under `limits`.
    /// Each table whose file has the writer's schema ([`strato_store::table_schema`]) is read
    /// from the file as queries run: only the columns and row groups a query needs, a batch at
    /// a time, so the tables are never held. When a file has another schema (a profile from
    /// an older writer, or rewritten by another engine), the whole profile is read through
    /// the store's checking reader ([`strato_store::read`]) and held in memory instead, as
    /// [`Session::with_limits`] holds it. The rows are the same either way.
    pub fn over_profile(dir: &Path, threads: usize, limits: Limits) -> Result<Session, SqlError> {
        let profile_error = |e: strato_store::StoreError| SqlError::Profile(e.to_string());
        strato_store::read_metadata(dir).map_err(profile_error)?;
        let threads = threads.max(1);
        let mut sources: Vec<(&'static str, Arc<dyn TableProvider>)> = Vec::new();
        for name in strato_store::table_names() {
            let expected = strato_store::table_schema(name)
                .unwrap_or_else(|| unreachable!("{name} is one of the table names"));
            let path = dir.join(format!("{name}.parquet"));
            match parquet_table::ParquetTable::open(&path, &expected) {
                Ok(table) => sources.push((name, Arc::new(table))),
                Err(parquet_table::OpenError::Unreadable(message)) => {
                    return Err(SqlError::Profile(message))
                }
                Err(parquet_table::OpenError::OtherSchema) => {
                    let trace = strato_store::read(dir).map_err(profile_error)?;
                    let tables = strato_store::arrow_tables(&trace).map_err(profile_error)?;
                    drop(trace);
                    return Session::with_limits(tables, threads, limits);
                }
            }
        }
        Session::over(sources, threads, limits)
    }

    /// The session over `sources` (registered under their names) with [`VIEWS`] defined.
    fn over(
        sources: Vec<(&'static str, Arc<dyn TableProvider>)>,
        threads: usize,
        limits: Limits,
    ) -> Result<Session, SqlError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("strato-sql")
            .thread_stack_size(QUERY_THREAD_STACK_BYTES)
            .build()
            .map_err(|e| SqlError::Query(format!("cannot start the query runtime: {e}")))?;
        let pool = usize::try_from(limits.pool_bytes()).unwrap_or(usize::MAX);
        let env = RuntimeEnvBuilder::new()
            .with_memory_limit(pool, 1.0)
            .with_disk_manager_builder(
                DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
            )
            .build_arc()?;
        let config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_information_schema(true);
        let ctx = SessionContext::new_with_config_rt(config, env);
        for udf in bounded_text::bounded_functions(limits.max_built_text_bytes) {
            ctx.register_udf(udf);
        }
        for (name, source) in sources {
            ctx.register_table(name, source)?;
        }
        let session = Session {
            runtime: Some(runtime),
            ctx,
            limits,
        };
        for (name, text) in VIEWS {
            session
                .runtime()
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

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .unwrap_or_else(|| unreachable!("the runtime lives as long as the session"))
    }

    /// The limits of this session.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Runs one read-only query under the session's [`Limits`]: the text is checked
    /// ([`QueryLimits`]), then parsed, planned and run on the session's threads (whose stack
    /// holds the deepest query allowed), the result read as a stream and refused once it
    /// passes [`Limits::result_bytes`]. Past [`Limits::timeout`] the query is cancelled (every
    /// operator stops at its next batch: `cancel.rs`; its task is aborted) and
    /// [`SqlError::Timeout`] returned; an operator that does not stop within a few seconds is
    /// left to the session's end (its threads are not waited for).
    pub fn query(&self, sql: &str) -> Result<QueryResult, SqlError> {
        check_query_size(sql, &self.limits.query)?;
        let (sender, receiver) = std::sync::mpsc::channel();
        let ctx = self.ctx.clone();
        let limits = self.limits;
        let sql = sql.to_owned();
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let task = self.runtime().spawn(async move {
            let result = run_query(&ctx, &sql, &limits, &flag).await;
            // The receiver is gone only after a timeout: nobody wants the result then.
            let _ = sender.send(result);
        });
        let answer = match limits.timeout {
            Some(timeout) => receiver.recv_timeout(timeout),
            None => receiver
                .recv()
                .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected),
        };
        match answer {
            Ok(result) => result,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                task.abort();
                let cancelled_at = Instant::now();
                while !task.is_finished() && cancelled_at.elapsed() < CANCEL_GRACE {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(SqlError::Timeout {
                    seconds: limits.timeout.map_or(0, |t| t.as_secs()),
                })
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(SqlError::Query(
                "the query's thread ended without an answer (a bug)".to_owned(),
            )),
        }
    }
}

impl Session {
    /// The tables a query names (CTE names left out), as DataFusion resolves them, checked as
    /// [`Session::query`] checks a query and parsed on the session's threads (whose stack
    /// holds the deepest query allowed): for a caller that defines some tables only when a
    /// query needs them ([`Session::add_table`]).
    pub fn table_references(&self, sql: &str) -> Result<Vec<String>, SqlError> {
        check_query_size(sql, &self.limits.query)?;
        let state = self.ctx.state();
        let limits = self.limits;
        let sql = sql.to_owned();
        let task = self.runtime().spawn(async move {
            let dialect = state.config().options().sql_parser.dialect;
            let statement = state.sql_to_statement(&sql, &dialect)?;
            guard::check_shape(&statement, &limits.query).map_err(SqlError::Query)?;
            let references = state.resolve_table_references(&statement)?;
            Ok::<_, SqlError>(
                references
                    .iter()
                    .map(|r| r.table().to_owned())
                    .collect::<Vec<String>>(),
            )
        });
        self.runtime().block_on(task).map_err(|e| {
            SqlError::Query(format!("the query's parse ended without an answer: {e}"))
        })?
    }

    /// Registers `batch` as the table `name` (held in memory), e.g. a registered analysis's
    /// table. A name the session already has is refused.
    pub fn add_table(&self, name: &str, batch: RecordBatch) -> Result<(), SqlError> {
        if self.ctx.table_exist(name)? {
            return Err(SqlError::Query(format!("a table {name} exists already")));
        }
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]])?;
        self.ctx.register_table(name, Arc::new(table))?;
        Ok(())
    }
}

/// Refuses a query text longer than `limits` allow (one line), before anything is parsed: a
/// caller can check it before loading the inputs.
pub fn check_query_size(sql: &str, limits: &QueryLimits) -> Result<(), SqlError> {
    guard::check_size(sql, limits).map_err(SqlError::Query)
}

/// Parses, checks, plans and runs `sql`, collecting at most [`Limits::result_bytes`].
async fn run_query(
    ctx: &SessionContext,
    sql: &str,
    limits: &Limits,
    cancel: &Arc<std::sync::atomic::AtomicBool>,
) -> Result<QueryResult, SqlError> {
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let state = ctx.state();
    let dialect = state.config().options().sql_parser.dialect;
    let statement = state.sql_to_statement(sql, &dialect)?;
    guard::check_shape(&statement, &limits.query).map_err(SqlError::Query)?;
    let plan = state.statement_to_plan(statement).await?;
    options.verify_plan(&plan)?;
    let frame = ctx.execute_logical_plan(plan).await?;
    let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
    let task = Arc::new(frame.task_ctx());
    let physical = cancel::cancellable(frame.create_physical_plan().await?, cancel)?;
    let mut stream = datafusion::physical_plan::execute_stream(physical, task)?;
    let mut batches = Vec::new();
    let mut held: u64 = 0;
    let mut seen = std::collections::HashSet::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        held = held.saturating_add(unseen_bytes(&batch, &mut seen));
        if held > limits.result_bytes() {
            return Err(SqlError::ResultTooLarge {
                limit_mib: limits.result_bytes() >> 20,
            });
        }
        batches.push(batch);
    }
    Ok(QueryResult { schema, batches })
}

/// Bytes of the memory `batch` holds that `seen` (allocations already counted, by address)
/// does not hold yet: a buffer shared by several batches (a dictionary's values, a table's
/// column a query passes through) counts once, at its allocated size.
fn unseen_bytes(batch: &RecordBatch, seen: &mut std::collections::HashSet<usize>) -> u64 {
    fn walk(data: &arrow::array::ArrayData, seen: &mut std::collections::HashSet<usize>) -> u64 {
        let mut total = 0u64;
        let nulls = data.nulls().map(|n| n.buffer());
        for buffer in data.buffers().iter().chain(nulls) {
            if seen.insert(buffer.data_ptr().as_ptr() as usize) {
                total = total.saturating_add(buffer.capacity() as u64);
            }
        }
        for child in data.child_data() {
            total = total.saturating_add(walk(child, seen));
        }
        total
    }
    batch
        .columns()
        .iter()
        .map(|column| walk(&column.to_data(), seen))
        .fold(0u64, u64::saturating_add)
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

/// A rule for the text cells of CSV output: the cell to write instead of `cell`, or `None` to
/// write it as it is. The CLI passes its formula neutralisation (a cell a spreadsheet would
/// run as a formula is written as text), unless `--csv-raw`.
pub type CsvTextRule<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Writes `result` to `out` in `format`. Text formats print dictionary-encoded columns as
/// their values; Parquet and Arrow keep the types. CSV text cells pass through `csv_text`
/// (numbers, times and other non-text columns are written as they are).
pub fn write_result(
    result: &QueryResult,
    format: Format,
    csv_text: CsvTextRule<'_>,
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
            let batches = rewrite_text(plain(result)?, csv_text)?;
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

/// `result` with every text cell passed through `rule` (see [`CsvTextRule`]).
fn rewrite_text(result: QueryResult, rule: CsvTextRule<'_>) -> Result<QueryResult, SqlError> {
    let batches = result
        .batches
        .iter()
        .map(|batch| {
            let columns: Vec<ArrayRef> = batch
                .columns()
                .iter()
                .map(|column| rewrite_column(column, rule))
                .collect();
            RecordBatch::try_new(batch.schema(), columns)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SqlError::Output(e.to_string()))?;
    Ok(QueryResult {
        schema: result.schema,
        batches,
    })
}

/// `column` with its text cells passed through `rule`; other columns unchanged.
fn rewrite_column(column: &ArrayRef, rule: CsvTextRule<'_>) -> ArrayRef {
    use arrow::array::{AsArray, LargeStringArray, StringArray, StringViewArray};
    fn rewritten<'a>(
        cells: impl Iterator<Item = Option<&'a str>>,
        rule: CsvTextRule<'_>,
    ) -> Option<Vec<Option<String>>> {
        let mut changed = false;
        let cells: Vec<Option<String>> = cells
            .map(|cell| {
                cell.map(|c| match rule(c) {
                    Some(new) => {
                        changed = true;
                        new
                    }
                    None => c.to_owned(),
                })
            })
            .collect();
        changed.then_some(cells)
    }
    match column.data_type() {
        DataType::Utf8 => rewritten(column.as_string::<i32>().iter(), rule)
            .map_or_else(|| column.clone(), |c| Arc::new(StringArray::from(c))),
        DataType::LargeUtf8 => rewritten(column.as_string::<i64>().iter(), rule)
            .map_or_else(|| column.clone(), |c| Arc::new(LargeStringArray::from(c))),
        DataType::Utf8View => rewritten(column.as_string_view().iter(), rule)
            .map_or_else(|| column.clone(), |c| Arc::new(StringViewArray::from(c))),
        _ => column.clone(),
    }
}
