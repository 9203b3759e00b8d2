//! Typed, null-checked access to the columns of one record batch ([`Rows`]): primitive and
//! text columns, and name/category columns resolved to string ids ([`IdColumn`]).

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, DictionaryArray, PrimitiveArray, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Int32Type, Int64Type, UInt32Type, UInt64Type};
use strato_trace::{StrId, StringTable};

use crate::error::{Result, StoreError, StoreErrorKind};

/// One record batch of a table, with typed, null-checked column access.
pub(super) struct Rows<'a> {
    pub(super) path: &'a Path,
    pub(super) batch: RecordBatch,
    /// Row number of the batch's first row in the table.
    pub(super) base: usize,
}

impl<'a> Rows<'a> {
    pub(super) fn len(&self) -> usize {
        self.batch.num_rows()
    }

    fn err(&self, kind: StoreErrorKind) -> StoreError {
        StoreError::new(self.path, kind)
    }

    pub(super) fn bad(&self, column: &str, i: usize, message: String) -> StoreError {
        self.err(StoreErrorKind::BadValue {
            column: column.into(),
            row: self.base + i,
            message,
        })
    }

    /// True when the batch has the column (see [`crate::schema::Col::may_be_absent`]).
    pub(super) fn has(&self, name: &str) -> bool {
        self.batch.column_by_name(name).is_some()
    }

    fn column(&self, name: &str) -> Result<&ArrayRef> {
        self.batch
            .column_by_name(name)
            .ok_or_else(|| self.err(StoreErrorKind::MissingColumn(name.into())))
    }

    fn type_error(&self, name: &str, found: &DataType, expected: &DataType) -> StoreError {
        self.err(StoreErrorKind::ColumnType {
            column: name.into(),
            found: found.to_string(),
            expected: expected.to_string(),
        })
    }

    pub(super) fn prim<T: ArrowPrimitiveType>(&self, name: &'static str) -> Result<Prim<'_, T>> {
        let column = self.column(name)?;
        let array = column
            .as_any()
            .downcast_ref::<PrimitiveArray<T>>()
            .ok_or_else(|| self.type_error(name, column.data_type(), &T::DATA_TYPE))?;
        Ok(Prim {
            rows: self,
            name,
            array,
        })
    }

    pub(super) fn u32(&self, name: &'static str) -> Result<Prim<'_, UInt32Type>> {
        self.prim(name)
    }

    pub(super) fn u64(&self, name: &'static str) -> Result<Prim<'_, UInt64Type>> {
        self.prim(name)
    }

    pub(super) fn i64(&self, name: &'static str) -> Result<Prim<'_, Int64Type>> {
        self.prim(name)
    }

    pub(super) fn text(&self, name: &'static str) -> Result<Text<'_>> {
        let column = self.column(name)?;
        let wrong = || self.type_error(name, column.data_type(), &DataType::Utf8);
        let inner = if let Some(plain) = column.as_any().downcast_ref::<StringArray>() {
            TextInner::Plain(plain)
        } else if let Some(dict) = column.as_any().downcast_ref::<DictionaryArray<Int32Type>>() {
            let values = dict
                .values()
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(wrong)?;
            TextInner::Dict(dict.keys(), values)
        } else {
            return Err(wrong());
        };
        Ok(Text {
            rows: self,
            name,
            inner,
        })
    }

    /// Checks that the `id` column numbers the rows 0, 1, 2, ... in order.
    pub(super) fn check_id(&self, id: &Prim<'_, UInt32Type>, i: usize) -> Result<()> {
        let value = id.req(i)?;
        if value as usize != self.base + i {
            return Err(self.bad(
                "id",
                i,
                format!("id {value} out of order (rows must be stored in id order)"),
            ));
        }
        Ok(())
    }
}

/// A primitive column of a batch.
pub(super) struct Prim<'a, T: ArrowPrimitiveType> {
    rows: &'a Rows<'a>,
    pub(super) name: &'static str,
    array: &'a PrimitiveArray<T>,
}

impl<T: ArrowPrimitiveType> Prim<'_, T> {
    pub(super) fn opt(&self, i: usize) -> Option<T::Native> {
        self.array.is_valid(i).then(|| self.array.value(i))
    }

    pub(super) fn req(&self, i: usize) -> Result<T::Native> {
        self.opt(i).ok_or_else(|| {
            self.rows.err(StoreErrorKind::Null {
                column: self.name.into(),
                row: self.rows.base + i,
            })
        })
    }
}

enum TextInner<'a> {
    Plain(&'a StringArray),
    Dict(&'a PrimitiveArray<Int32Type>, &'a StringArray),
}

/// A text column of a batch, plain or dictionary-encoded.
pub(super) struct Text<'a> {
    rows: &'a Rows<'a>,
    name: &'static str,
    inner: TextInner<'a>,
}

impl<'a> Text<'a> {
    pub(super) fn opt(&self, i: usize) -> Result<Option<&'a str>> {
        match self.inner {
            TextInner::Plain(array) => Ok(array.is_valid(i).then(|| array.value(i))),
            TextInner::Dict(keys, values) => {
                if keys.is_null(i) {
                    return Ok(None);
                }
                let key = keys.value(i);
                match usize::try_from(key).ok().filter(|&k| k < values.len()) {
                    Some(k) => Ok(values.is_valid(k).then(|| values.value(k))),
                    None => Err(self.rows.bad(
                        self.name,
                        i,
                        format!("dictionary key {key} out of range"),
                    )),
                }
            }
        }
    }

    pub(super) fn req(&self, i: usize) -> Result<&'a str> {
        self.opt(i)?.ok_or_else(|| {
            self.rows.err(StoreErrorKind::Null {
                column: self.name.into(),
                row: self.rows.base + i,
            })
        })
    }
}

/// Resolves a name/category text column to string ids of the rebuilt string table. For a
/// dictionary column the dictionary is resolved once and reused while the reader hands out
/// the same dictionary (a whole row group), so the per-row cost is an array index.
pub(super) struct IdColumn {
    name: &'static str,
    cache: Option<(ArrayRef, Vec<Option<StrId>>)>,
}

impl IdColumn {
    pub(super) fn new(name: &'static str) -> Self {
        IdColumn { name, cache: None }
    }

    pub(super) fn resolve(&mut self, rows: &Rows<'_>, strings: &StringTable) -> Result<Vec<StrId>> {
        let missing = |i: usize, text: &str| {
            rows.bad(self.name, i, format!("{text:?} is not in strings.parquet"))
        };
        let column = rows.column(self.name)?;
        let mut out = Vec::with_capacity(rows.len());
        if let Some(dict) = column.as_any().downcast_ref::<DictionaryArray<Int32Type>>() {
            let values = dict.values();
            let fresh = !matches!(&self.cache, Some((cached, _)) if Arc::ptr_eq(cached, values));
            if fresh {
                let text = rows.text(self.name)?;
                let TextInner::Dict(_, strs) = text.inner else {
                    return Err(rows.type_error(self.name, column.data_type(), &DataType::Utf8));
                };
                let ids = (0..strs.len())
                    .map(|k| {
                        strs.is_valid(k)
                            .then(|| strings.lookup(strs.value(k)))
                            .flatten()
                    })
                    .collect();
                self.cache = Some((values.clone(), ids));
            }
            let ids = self.cache.as_ref().map_or(&[][..], |(_, ids)| &ids[..]);
            let keys = dict.keys();
            for i in 0..rows.len() {
                let id = if keys.is_null(i) {
                    None
                } else {
                    usize::try_from(keys.value(i))
                        .ok()
                        .and_then(|k| ids.get(k))
                        .copied()
                        .flatten()
                };
                match id {
                    Some(id) => out.push(id),
                    None => {
                        // Slow path, for the message: null, out of range, or unknown text.
                        let text = rows.text(self.name)?;
                        let text = text.req(i)?;
                        return Err(missing(i, text));
                    }
                }
            }
        } else {
            let text = rows.text(self.name)?;
            for i in 0..rows.len() {
                let t = text.req(i)?;
                out.push(strings.lookup(t).ok_or_else(|| missing(i, t))?);
            }
        }
        Ok(out)
    }
}
