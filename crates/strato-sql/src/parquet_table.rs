//! A profile's table read from its Parquet file while a query runs: only the columns the query
//! uses (Parquet column projection), only the row groups whose statistics can match its
//! filters (row-group pruning), one batch at a time. So a query over a profile holds what its
//! operators keep and one batch per partition, never the table.
//!
//! This module owns the reading; [`crate::Session::over_profile`] decides which files are read
//! this way (those whose schema is the writer's: `strato_store::table_schema`).
//!
//! Rules:
//! - the rows and their types are exactly those of the file (the filters the scan is given are
//!   only used to skip row groups: DataFusion still applies them to every row);
//! - a table's row groups are split into contiguous runs, one per partition (at most the
//!   session's target partitions), so each partition reads its rows in file order;
//! - a file that cannot be read fails the query with its path in the message.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session as PlanningSession, TableProvider};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::LexOrdering;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::StreamExt;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::ParquetMetaData;

/// One Parquet file as a table: its schema and footer, read once when the session opens it
/// (every scan's partitions reuse the footer instead of reading and decoding it again).
#[derive(Debug)]
pub(crate) struct ParquetTable {
    path: PathBuf,
    schema: SchemaRef,
    reader_metadata: ArrowReaderMetadata,
    metadata: Arc<ParquetMetaData>,
}

/// Why a file cannot be a [`ParquetTable`].
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The file cannot be opened, or its footer is not Parquet: the message says which.
    Unreadable(String),
    /// The file's schema is not `expected` (another schema version, or rewritten by another
    /// engine): read it through the store's checking reader instead.
    OtherSchema,
}

impl ParquetTable {
    /// The file at `path`, if its Arrow schema has exactly `expected`'s fields (names, types,
    /// nullability; schema-level metadata aside).
    pub(crate) fn open(path: &Path, expected: &SchemaRef) -> Result<ParquetTable, OpenError> {
        let unreadable =
            |e: &dyn std::fmt::Display| OpenError::Unreadable(format!("{}: {e}", path.display()));
        let file = File::open(path).map_err(|e| unreadable(&e))?;
        let reader_metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::default())
            .map_err(|e| unreadable(&e))?;
        if reader_metadata.schema().fields() != expected.fields() {
            return Err(OpenError::OtherSchema);
        }
        Ok(ParquetTable {
            path: path.to_path_buf(),
            schema: Arc::clone(expected),
            metadata: Arc::clone(reader_metadata.metadata()),
            reader_metadata,
        })
    }

    /// The row groups that may hold a row matching every filter of `filters` (all of them when
    /// the filters say nothing the statistics can decide).
    fn row_groups_matching(
        &self,
        state: &dyn PlanningSession,
        filters: &[Expr],
    ) -> Result<Vec<usize>> {
        let all: Vec<usize> = (0..self.metadata.num_row_groups()).collect();
        let Some(predicate) = conjunction(filters.iter().cloned()) else {
            return Ok(all);
        };
        let df_schema = DFSchema::try_from(Arc::clone(&self.schema))?;
        let physical = state.create_physical_expr(predicate, &df_schema)?;
        // A filter the pruning rewriter cannot handle only means no row group is skipped.
        let Ok(pruning) = PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(&self.schema))
            .try_build(physical)
        else {
            return Ok(all);
        };
        let statistics = RowGroupStatistics { table: self };
        match pruning.prune(&statistics) {
            Ok(keep) => Ok(all.into_iter().filter(|&g| keep[g]).collect()),
            Err(_) => Ok(all),
        }
    }
}

#[async_trait]
impl TableProvider for ParquetTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Inexact: the filters choose row groups; DataFusion still filters the rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn PlanningSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let row_groups = self.row_groups_matching(state, filters)?;
        let columns: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&columns)?);
        let parts = state
            .config()
            .target_partitions()
            .min(row_groups.len())
            .max(1);
        let batch_size = state.config().batch_size();
        let partitions: Vec<Arc<dyn PartitionStream>> = contiguous_runs(&row_groups, parts)
            .into_iter()
            .map(|row_groups| {
                Arc::new(RowGroupRun {
                    path: self.path.clone(),
                    reader_metadata: self.reader_metadata.clone(),
                    schema: Arc::clone(&schema),
                    columns: columns.clone(),
                    row_groups,
                    batch_size,
                }) as Arc<dyn PartitionStream>
            })
            .collect();
        let exec = StreamingTableExec::try_new(
            schema,
            partitions,
            None,
            Vec::<LexOrdering>::new(),
            false,
            limit,
        )?;
        Ok(Arc::new(exec))
    }
}

/// `items` split into `parts` contiguous runs whose lengths differ by at most one (`parts`
/// empty runs when `items` is empty and `parts` is 1: a partition that yields nothing).
fn contiguous_runs(items: &[usize], parts: usize) -> Vec<Vec<usize>> {
    let parts = parts.max(1);
    let (base, extra) = (items.len() / parts, items.len() % parts);
    let mut runs = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 0..parts {
        let len = base + usize::from(i < extra);
        runs.push(items[start..start + len].to_vec());
        start += len;
    }
    runs
}

/// One partition of a scan: a contiguous run of row groups, read in order, the query's columns
/// only.
#[derive(Debug)]
struct RowGroupRun {
    path: PathBuf,
    /// The table's footer, decoded once ([`ParquetTable::open`]).
    reader_metadata: ArrowReaderMetadata,
    /// The projected schema (the query's columns, in the query's order).
    schema: SchemaRef,
    /// The table's column indices of [`Self::schema`]'s fields.
    columns: Vec<usize>,
    row_groups: Vec<usize>,
    batch_size: usize,
}

impl RowGroupRun {
    /// The run's batches, projected to [`Self::schema`].
    fn batches(&self) -> Result<impl Iterator<Item = Result<RecordBatch>> + Send + 'static> {
        let path = self.path.clone();
        let failed = move |e: &dyn std::fmt::Display| {
            DataFusionError::Execution(format!("{}: {e}", path.display()))
        };
        let file = File::open(&self.path).map_err(|e| failed(&e))?;
        // Parquet's reader returns the projected columns in file order: `order` puts them in
        // the query's.
        let mut in_file_order = self.columns.clone();
        in_file_order.sort_unstable();
        in_file_order.dedup();
        let order: Vec<usize> = self
            .columns
            .iter()
            .map(|c| in_file_order.binary_search(c).unwrap_or_default())
            .collect();
        let mask = ProjectionMask::roots(
            self.reader_metadata
                .metadata()
                .file_metadata()
                .schema_descr(),
            in_file_order.iter().copied(),
        );
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.reader_metadata.clone())
                .with_projection(mask)
                .with_row_groups(self.row_groups.clone())
                .with_batch_size(self.batch_size)
                .build()
                .map_err(|e| failed(&e))?;
        let schema = Arc::clone(&self.schema);
        Ok(reader.map(move |batch| {
            let batch = batch.map_err(|e| failed(&e))?;
            let columns: Vec<ArrayRef> =
                order.iter().map(|&i| Arc::clone(batch.column(i))).collect();
            let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
            Ok(RecordBatch::try_new_with_options(
                Arc::clone(&schema),
                columns,
                &options,
            )?)
        }))
    }
}

impl PartitionStream for RowGroupRun {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let stream = match self.batches() {
            Ok(batches) => futures::stream::iter(batches).boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        };
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        ))
    }
}

/// The row groups' column statistics (min, max, nulls, rows) from the footer, for pruning.
struct RowGroupStatistics<'a> {
    table: &'a ParquetTable,
}

impl RowGroupStatistics<'_> {
    fn converter(&self, column: &Column) -> Option<StatisticsConverter<'_>> {
        StatisticsConverter::try_new(
            &column.name,
            &self.table.schema,
            self.table.metadata.file_metadata().schema_descr(),
        )
        .ok()
    }
}

impl PruningStatistics for RowGroupStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.converter(column)?
            .row_group_mins(self.table.metadata.row_groups())
            .ok()
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.converter(column)?
            .row_group_maxes(self.table.metadata.row_groups())
            .ok()
    }

    fn num_containers(&self) -> usize {
        self.table.metadata.num_row_groups()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let counts = self
            .converter(column)?
            .row_group_null_counts(self.table.metadata.row_groups())
            .ok()?;
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: arrow::array::UInt64Array = self
            .table
            .metadata
            .row_groups()
            .iter()
            .map(|g| u64::try_from(g.num_rows()).ok())
            .collect();
        Some(Arc::new(counts))
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<arrow::array::BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, UInt32Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::SessionContext;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A file of `groups` row groups of 10 rows: `id` 0.., `start_ns` 1000 x group + row,
    /// `tag` = group.
    fn file(dir: &Path, groups: usize) -> (PathBuf, SchemaRef) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("start_ns", DataType::Int64, false),
            Field::new("tag", DataType::UInt32, true),
        ]));
        let path = dir.join("t.parquet");
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(10))
            .build();
        let mut writer = ArrowWriter::try_new(
            File::create(&path).unwrap(),
            Arc::clone(&schema),
            Some(props),
        )
        .unwrap();
        for g in 0..groups {
            let ids: Int64Array = (0..10).map(|r| (g * 10 + r) as i64).collect();
            let starts: Int64Array = (0..10).map(|r| (g * 1000 + r) as i64).collect();
            let tags: UInt32Array = (0..10).map(|_| Some(g as u32)).collect();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(ids), Arc::new(starts), Arc::new(tags)],
            )
            .unwrap();
            writer.write(&batch).unwrap();
            writer.flush().unwrap();
        }
        writer.close().unwrap();
        (path, schema)
    }

    #[test]
    fn runs_are_contiguous_and_cover_everything() {
        let items: Vec<usize> = (0..7).collect();
        for parts in 1..10 {
            let runs = contiguous_runs(&items, parts);
            assert_eq!(runs.len(), parts);
            assert_eq!(runs.concat(), items, "{parts} parts");
            let lens: Vec<usize> = runs.iter().map(Vec::len).collect();
            assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
        }
        assert_eq!(contiguous_runs(&[], 1), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn filters_skip_the_row_groups_they_exclude() {
        let dir = tempfile::tempdir().unwrap();
        let (path, schema) = file(dir.path(), 5);
        let table = ParquetTable::open(&path, &schema).unwrap();
        assert_eq!(table.metadata.num_row_groups(), 5);
        let ctx = SessionContext::new();
        let state = ctx.state();
        let col = |n: &str| datafusion::prelude::col(n);
        use datafusion::prelude::lit;
        let cases: [(Vec<Expr>, Vec<usize>); 4] = [
            (vec![], vec![0, 1, 2, 3, 4]),
            (vec![col("start_ns").gt_eq(lit(3000_i64))], vec![3, 4]),
            (
                vec![col("start_ns").gt(lit(1005_i64)), col("tag").lt(lit(3_u32))],
                vec![1, 2],
            ),
            // Nothing the statistics decide: every row group.
            (vec![col("id").not_eq(lit(7_i64))], vec![0, 1, 2, 3, 4]),
        ];
        for (filters, expected) in cases {
            assert_eq!(
                table.row_groups_matching(&state, &filters).unwrap(),
                expected,
                "{filters:?}"
            );
        }
    }

    #[test]
    fn a_query_reads_its_columns_in_its_order_and_counts_without_columns() {
        let dir = tempfile::tempdir().unwrap();
        let (path, schema) = file(dir.path(), 3);
        let table = ParquetTable::open(&path, &schema).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ctx = SessionContext::new();
        ctx.register_table("t", Arc::new(table)).unwrap();
        let rows =
            |sql: &str| rt.block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() });
        let count = rows("SELECT count(*) AS n FROM t");
        let n = count[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0);
        assert_eq!(n, 30);
        let reordered = rows("SELECT tag, id FROM t WHERE start_ns >= 2000 ORDER BY id");
        let batch = arrow::compute::concat_batches(&reordered[0].schema(), &reordered).unwrap();
        assert_eq!(batch.schema().field(0).name(), "tag");
        let ids = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(ids.values().to_vec(), (20..30).collect::<Vec<i64>>());
        let tags = batch
            .column(0)
            .as_any()
            .downcast_ref::<UInt32Array>()
            .unwrap();
        assert!(tags.iter().all(|t| t == Some(2)));
    }

    #[test]
    fn another_schema_is_told_apart_and_garbage_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = file(dir.path(), 1);
        let other = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        assert!(matches!(
            ParquetTable::open(&path, &other),
            Err(OpenError::OtherSchema)
        ));
        let junk = dir.path().join("junk.parquet");
        std::fs::write(&junk, b"not parquet at all").unwrap();
        match ParquetTable::open(&junk, &other) {
            Err(OpenError::Unreadable(message)) => {
                assert!(message.contains("junk.parquet"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
}
