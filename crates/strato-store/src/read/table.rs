//! One Parquet table opened for reading ([`Table`]): checked against the metadata and the
//! schema, projected to the columns and rows asked for, decoded batch by batch without ever
//! letting a damaged file panic the caller ([`guard`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::arrow::ProjectionMask;

use super::columns::Rows;
use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::Metadata;
use crate::schema::TableDef;

/// Rows per record batch while reading.
const BATCH_ROWS: usize = 64 * 1024;

/// One open table: checked columns, projected to the ones the reader needs.
pub(super) struct Table {
    pub(super) path: PathBuf,
    batches: ParquetRecordBatchReader,
    expected_rows: u64,
}

impl Table {
    /// Every row, every column of `def` (those the file has).
    pub(super) fn open(dir: &Path, meta: &Metadata, def: &TableDef) -> Result<Table> {
        Table::open_projected(dir, meta, def, &[], None)
    }

    /// Every row, the columns of `def` but `skip` (not decoded; still checked to be there).
    pub(super) fn open_columns(
        dir: &Path,
        meta: &Metadata,
        def: &TableDef,
        skip: &[&str],
    ) -> Result<Table> {
        Table::open_projected(dir, meta, def, skip, None)
    }

    /// Only the rows numbered `rows` (sorted, distinct), every column: only the row groups
    /// holding one are read, and only those rows decoded. A row beyond the table is an error.
    pub(super) fn open_rows(
        dir: &Path,
        meta: &Metadata,
        def: &TableDef,
        rows: &[u32],
    ) -> Result<Table> {
        Table::open_projected(dir, meta, def, &[], Some(rows))
    }

    fn open_projected(
        dir: &Path,
        meta: &Metadata,
        def: &TableDef,
        skip: &[&str],
        only_rows: Option<&[u32]>,
    ) -> Result<Table> {
        let path = dir.join(def.file());
        let listed = meta.tables.get(def.name).ok_or_else(|| {
            StoreError::new(
                dir.join(crate::meta::METADATA_FILE),
                StoreErrorKind::Metadata(format!("table '{}' is not listed", def.name)),
            )
        })?;
        let file = File::open(&path).map_err(|e| StoreError::new(&path, e))?;
        let parquet_err = |e: parquet::errors::ParquetError| {
            StoreError::new(&path, StoreErrorKind::Parquet(e.to_string()))
        };
        let mut builder = guard(&path, || ParquetRecordBatchReaderBuilder::try_new(file))?
            .map_err(parquet_err)?;
        let found_rows = builder.metadata().file_metadata().num_rows();
        if u64::try_from(found_rows).ok() != Some(listed.rows) {
            return Err(StoreError::new(
                &path,
                StoreErrorKind::RowCount {
                    expected: listed.rows,
                    found: u64::try_from(found_rows).unwrap_or(0),
                },
            ));
        }
        let file_schema = builder.schema().clone();
        let mut roots = Vec::new();
        for col in def.columns.iter().filter(|c| !c.derived) {
            let Some((index, field)) = file_schema.column_with_name(col.name) else {
                if col.may_be_absent {
                    continue;
                }
                return Err(StoreError::new(
                    &path,
                    StoreErrorKind::MissingColumn(col.name.into()),
                ));
            };
            if !col.ty.accepts(field.data_type()) {
                return Err(StoreError::new(
                    &path,
                    StoreErrorKind::ColumnType {
                        column: col.name.into(),
                        found: field.data_type().to_string(),
                        expected: col.ty.arrow().to_string(),
                    },
                ));
            }
            if !skip.contains(&col.name) {
                roots.push(index);
            }
        }
        let mut expected_rows = listed.rows;
        if let Some(only_rows) = only_rows {
            if let Some(&beyond) = only_rows.iter().find(|&&r| u64::from(r) >= listed.rows) {
                return Err(StoreError::new(
                    &path,
                    StoreErrorKind::InvalidTrace(format!(
                        "row {beyond} is referenced but the table has {} rows",
                        listed.rows
                    )),
                ));
            }
            let group_rows: Vec<u64> = builder
                .metadata()
                .row_groups()
                .iter()
                .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
                .collect();
            let (groups, selection) = select_rows(&group_rows, only_rows);
            builder = builder
                .with_row_groups(groups)
                .with_row_selection(selection);
            expected_rows = only_rows.len() as u64;
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let batches = guard(&path, || {
            builder
                .with_projection(mask)
                .with_batch_size(BATCH_ROWS)
                .build()
        })?
        .map_err(parquet_err)?;
        Ok(Table {
            path,
            batches,
            expected_rows,
        })
    }

    /// Calls `f` on every batch, then checks that the rows add up to the listed count.
    pub(super) fn for_each(self, mut f: impl FnMut(&Rows<'_>) -> Result<()>) -> Result<()> {
        let mut base = 0usize;
        let mut batches = self.batches;
        while let Some(batch) = guard(&self.path, || batches.next())? {
            let batch = batch
                .map_err(|e| StoreError::new(&self.path, StoreErrorKind::Parquet(e.to_string())))?;
            let rows = Rows {
                path: &self.path,
                batch,
                base,
            };
            f(&rows)?;
            base += rows.len();
        }
        if base as u64 != self.expected_rows {
            return Err(StoreError::new(
                &self.path,
                StoreErrorKind::RowCount {
                    expected: self.expected_rows,
                    found: base as u64,
                },
            ));
        }
        Ok(())
    }
}

/// The row groups (of `group_rows` rows each) that hold one of `rows` (sorted row numbers of
/// the whole file), and the selection of exactly those rows within them.
pub(super) fn select_rows(group_rows: &[u64], rows: &[u32]) -> (Vec<usize>, RowSelection) {
    let (mut groups, mut selectors) = (Vec::new(), Vec::new());
    let (mut next, mut group_start) = (0usize, 0u64);
    for (g, &n) in group_rows.iter().enumerate() {
        let group_end = group_start + n;
        let mut at = group_start;
        let first = next;
        while let Some(&r) = rows.get(next).filter(|&&r| u64::from(r) < group_end) {
            let r = u64::from(r);
            if r > at {
                push_selector(&mut selectors, (r - at) as usize, true);
            }
            push_selector(&mut selectors, 1, false);
            at = r + 1;
            next += 1;
        }
        if next > first {
            groups.push(g);
            if group_end > at {
                push_selector(&mut selectors, (group_end - at) as usize, true);
            }
        }
        group_start = group_end;
    }
    (groups, RowSelection::from(selectors))
}

/// Appends `rows` skipped or selected rows, merged with the last selector when alike.
fn push_selector(selectors: &mut Vec<RowSelector>, rows: usize, skip: bool) {
    match selectors.last_mut() {
        Some(last) if last.skip == skip => last.row_count += rows,
        _ => selectors.push(match skip {
            true => RowSelector::skip(rows),
            false => RowSelector::select(rows),
        }),
    }
}

/// Runs a step of the Parquet decoder, turning a panic into an error about `path`: the
/// decoder trusts some lengths and offsets in the file, and a damaged file must not bring the
/// caller down. (The default panic hook still prints the panic to stderr.)
fn guard<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        StoreError::new(
            path,
            StoreErrorKind::Parquet(format!("decoder failed on damaged data: {message}")),
        )
    })
}
