//! Rows to Arrow columns: the event tables' chunks (spans, instants, counter samples) with
//! their per-chunk string dictionaries, and the small column builders every table uses.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, StringArray, UInt32Array,
    UInt64Array,
};
use arrow::datatypes::Int32Type;
use arrow::error::ArrowError;
use std::ops::Range;
use strato_trace::{CounterSample, Instant, Span, StrId, StringTable};

use super::ctx::{level_code, Ctx, Location};

/// The name/category texts one chunk uses, as the dictionary its columns share: a chunk's
/// dictionary holds only what it uses, so the writer never copies the whole string table
/// (the Parquet files do not depend on it: the encoder reads values, not keys).
pub(super) struct ChunkStrings<'s> {
    strings: &'s StringTable,
    keys: std::collections::HashMap<u32, u32>,
    values: Vec<&'s str>,
}

impl<'s> ChunkStrings<'s> {
    pub(super) fn new(strings: &'s StringTable) -> Self {
        ChunkStrings {
            strings,
            keys: Default::default(),
            values: Vec::new(),
        }
    }

    fn key(&mut self, id: StrId) -> Option<u32> {
        let values = &mut self.values;
        let strings = self.strings;
        Some(*self.keys.entry(id.0).or_insert_with(|| {
            values.push(strings.get(id));
            (values.len() - 1) as u32
        }))
    }

    pub(super) fn keyed(&mut self, ids: impl Iterator<Item = StrId>) -> Vec<Option<u32>> {
        ids.map(|id| self.key(id)).collect()
    }

    pub(super) fn dictionary(&self) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(self.values.iter()))
    }
}

pub(super) fn span_columns(
    rows: &[Span],
    first: usize,
    ctx: &Ctx,
    strings: &StringTable,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
    let mut texts = ChunkStrings::new(strings);
    let names = texts.keyed(rows.iter().map(|s| s.name));
    let categories = texts.keyed(rows.iter().map(|s| s.category));
    let dictionary = texts.dictionary();
    Ok(vec![
        ids(first..first + rows.len()),
        u32s(rows.iter().map(|s| Some(s.track.0))),
        i64s(rows.iter().map(|s| Some(s.start))),
        i64s(rows.iter().map(|s| Some(s.end))),
        i64s(rows.iter().map(|s| Some(s.end.saturating_sub(s.start)))),
        dict(names.into_iter(), &dictionary)?,
        dict(categories.into_iter(), &dictionary)?,
        dict(rows.iter().map(|s| Some(level_code(s.level))), &ctx.levels)?,
        u64s(rows.iter().map(|s| s.correlation.get())),
        u64s(rows.iter().map(|s| s.external_id.get())),
        u32s(rows.iter().map(|s| s.args.map(|a| a.0))),
        u32s(loc.iter().map(|l| Some(l.rank))),
        i64s(loc.iter().map(|l| l.pid)),
        i64s(loc.iter().map(|l| l.tid)),
        i64s(loc.iter().map(|l| l.device)),
        i64s(loc.iter().map(|l| l.queue)),
    ])
}

pub(super) fn instant_columns(
    rows: &[Instant],
    first: usize,
    ctx: &Ctx,
    strings: &StringTable,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
    let mut texts = ChunkStrings::new(strings);
    let names = texts.keyed(rows.iter().map(|s| s.name));
    let categories = texts.keyed(rows.iter().map(|s| s.category));
    let dictionary = texts.dictionary();
    Ok(vec![
        ids(first..first + rows.len()),
        u32s(rows.iter().map(|s| Some(s.track.0))),
        i64s(rows.iter().map(|s| Some(s.ts))),
        dict(names.into_iter(), &dictionary)?,
        dict(categories.into_iter(), &dictionary)?,
        dict(rows.iter().map(|s| Some(level_code(s.level))), &ctx.levels)?,
        u32s(rows.iter().map(|s| s.args.map(|a| a.0))),
        u32s(loc.iter().map(|l| Some(l.rank))),
        i64s(loc.iter().map(|l| l.pid)),
        i64s(loc.iter().map(|l| l.tid)),
        i64s(loc.iter().map(|l| l.device)),
        i64s(loc.iter().map(|l| l.queue)),
    ])
}

pub(super) fn counter_columns(
    rows: &[CounterSample],
    ctx: &Ctx,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
    Ok(vec![
        u32s(rows.iter().map(|c| Some(c.track.0))),
        i64s(rows.iter().map(|c| Some(c.ts))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|c| c.value))),
        dict(counter_keys(rows, &loc), &ctx.counter_names)?,
        dict(counter_keys(rows, &loc), &ctx.counter_units)?,
        u32s(loc.iter().map(|l| Some(l.rank))),
        i64s(loc.iter().map(|l| l.pid)),
        i64s(loc.iter().map(|l| l.device)),
    ])
}

/// Keys into the per-track counter name/unit dictionaries: the track id for samples on
/// counter tracks, null for samples on other tracks.
fn counter_keys<'a>(
    rows: &'a [strato_trace::CounterSample],
    loc: &'a [&Location],
) -> impl Iterator<Item = Option<u32>> + 'a {
    rows.iter()
        .zip(loc)
        .map(|(c, l)| l.counter.then_some(c.track.0))
}

/// `range` as a `UInt32` id column.
pub(super) fn ids(range: Range<usize>) -> ArrayRef {
    Arc::new(UInt32Array::from_iter_values(range.map(|i| i as u32)))
}

pub(super) fn u32s(values: impl Iterator<Item = Option<u32>>) -> ArrayRef {
    Arc::new(UInt32Array::from_iter(values))
}

pub(super) fn u64s(values: impl Iterator<Item = Option<u64>>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter(values))
}

pub(super) fn i64s(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from_iter(values))
}

pub(super) fn strs<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

/// A dictionary column whose keys index `values` (shared, not copied, between chunks).
pub(super) fn dict(
    keys: impl Iterator<Item = Option<u32>>,
    values: &ArrayRef,
) -> Result<ArrayRef, ArrowError> {
    let keys = Int32Array::from_iter(keys.map(|k| k.map(|k| k as i32)));
    Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(
        keys,
        values.clone(),
    )?))
}
