//! Parquet files written chunk by chunk: one table file ([`TableFile`]), an event table fed
//! in batches of any size ([`EventTable`]), and the args table ([`ArgsWriter`]).

use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use parquet::arrow::ArrowWriter;
use strato_trace::ArgsTable;

use super::columns::ids;
use super::ctx::Ctx;
use super::{CHUNK_ROWS, ROW_GROUP_BYTES};
use crate::error::{Result, StoreError, StoreErrorKind};
use crate::schema::TableDef;

/// One Parquet file being written: rows go in as record batches of up to [`CHUNK_ROWS`]; a row
/// group is closed early once its buffered pages pass [`ROW_GROUP_BYTES`].
pub(super) struct TableFile {
    path: PathBuf,
    schema: SchemaRef,
    writer: ArrowWriter<File>,
    pub(super) rows: usize,
}

impl TableFile {
    pub(super) fn create(ctx: &Ctx, def: &TableDef) -> Result<TableFile> {
        let path = ctx.dir.join(def.file());
        let schema = def.schema();
        let file = File::create(&path).map_err(|e| StoreError::new(&path, e))?;
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(ctx.props.clone()))
            .map_err(|e| StoreError::new(&path, StoreErrorKind::Parquet(e.to_string())))?;
        Ok(TableFile {
            path,
            schema,
            writer,
            rows: 0,
        })
    }

    fn parquet_err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::new(&self.path, StoreErrorKind::Parquet(e.to_string()))
    }

    /// Writes one chunk of rows, given as its columns.
    pub(super) fn write(&mut self, columns: Result<Vec<ArrayRef>, ArrowError>) -> Result<()> {
        let columns = columns.map_err(|e| self.parquet_err(e))?;
        let batch =
            RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| self.parquet_err(e))?;
        self.writer.write(&batch).map_err(|e| self.parquet_err(e))?;
        // The writer holds the open row group's encoded pages: close it early when wide
        // rows (args texts) would make it large.
        if self.writer.memory_size() > ROW_GROUP_BYTES {
            self.writer.flush().map_err(|e| self.parquet_err(e))?;
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    /// Finishes the file (footer) and fsyncs it; returns its row count.
    pub(super) fn close(&mut self) -> Result<usize> {
        self.writer.finish().map_err(|e| self.parquet_err(e))?;
        self.writer
            .inner()
            .sync_all()
            .map_err(|e| StoreError::new(&self.path, e))?;
        Ok(self.rows)
    }
}

/// An event table written as events arrive: rows are written in chunks of exactly
/// [`CHUNK_ROWS`] (the last one shorter), whatever the batches they arrive in, so the file is
/// the one a single pass over all the rows writes; the rest waits in `pending`.
pub(super) struct EventTable<T> {
    pub(super) file: TableFile,
    pending: Vec<T>,
}

impl<T: Clone> EventTable<T> {
    pub(super) fn create(ctx: &Ctx, def: &TableDef) -> Result<Self> {
        Ok(EventTable {
            file: TableFile::create(ctx, def)?,
            pending: Vec::new(),
        })
    }

    /// Adds `rows`; `columns(chunk, first_id)` encodes one chunk.
    pub(super) fn put(
        &mut self,
        mut rows: &[T],
        columns: impl Fn(&[T], usize) -> Result<Vec<ArrayRef>, ArrowError>,
    ) -> Result<()> {
        if !self.pending.is_empty() {
            let take = (CHUNK_ROWS - self.pending.len()).min(rows.len());
            self.pending.extend_from_slice(&rows[..take]);
            rows = &rows[take..];
            if self.pending.len() < CHUNK_ROWS {
                return Ok(());
            }
            let first = self.file.rows;
            self.file.write(columns(&self.pending, first))?;
            self.pending.clear();
        }
        let mut chunks = rows.chunks_exact(CHUNK_ROWS);
        for chunk in &mut chunks {
            let first = self.file.rows;
            self.file.write(columns(chunk, first))?;
        }
        self.pending.extend_from_slice(chunks.remainder());
        Ok(())
    }

    /// Writes what is pending and finishes the file; returns its row count.
    pub(super) fn close(
        &mut self,
        columns: impl Fn(&[T], usize) -> Result<Vec<ArrayRef>, ArrowError>,
    ) -> Result<usize> {
        if !self.pending.is_empty() {
            let first = self.file.rows;
            self.file.write(columns(&self.pending, first))?;
            self.pending = Vec::new();
        }
        self.file.close()
    }
}

/// The args table, written as [`EventTable`] writes events (blobs instead of rows).
pub(super) struct ArgsWriter {
    pub(super) file: TableFile,
    pub(super) pending: ArgsTable,
}

impl ArgsWriter {
    pub(super) fn put(&mut self, blobs: &ArgsTable) -> Result<()> {
        let mut next = 0;
        if !self.pending.is_empty() {
            while next < blobs.len() && self.pending.len() < CHUNK_ROWS {
                self.pending
                    .push(blobs.get(next).as_deref().unwrap_or_default());
                next += 1;
            }
            if self.pending.len() < CHUNK_ROWS {
                return Ok(());
            }
            let pending = std::mem::replace(&mut self.pending, ArgsTable::uncompressed());
            self.write_chunk(&pending, 0..pending.len())?;
        }
        while blobs.len() - next >= CHUNK_ROWS {
            self.write_chunk(blobs, next..next + CHUNK_ROWS)?;
            next += CHUNK_ROWS;
        }
        for i in next..blobs.len() {
            self.pending
                .push(blobs.get(i).as_deref().unwrap_or_default());
        }
        Ok(())
    }

    fn write_chunk(&mut self, blobs: &ArgsTable, range: Range<usize>) -> Result<()> {
        let first = self.file.rows;
        let columns = vec![
            ids(first..first + range.len()),
            Arc::new(StringArray::from_iter_values(blobs.range(range))) as ArrayRef,
        ];
        self.file.write(Ok(columns))
    }

    pub(super) fn close(&mut self) -> Result<usize> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.write_chunk(&pending, 0..pending.len())?;
        }
        self.file.close()
    }
}
