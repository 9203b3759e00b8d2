//! The reader: checks a profile directory (marker, version, every table's columns, types,
//! nulls, row counts, ids) and rebuilds the [`Trace`] exactly. A damaged profile is an error
//! naming the file, never a panic.
//!
//! Layout (each file reads only this one and those listed before it): `columns.rs` (typed,
//! null-checked access to a batch), `table.rs` (opening and checking one Parquet table),
//! `select.rs` (which spans and args blobs a read keeps), `tables.rs` (the tables without
//! events), `events.rs` (spans, instants, counter samples, flows and their args).

mod columns;
mod events;
mod select;
mod table;
mod tables;

use std::path::{Path, PathBuf};

use strato_trace::{ClockInfo, Trace};

use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::Metadata;
use events::{read_counters, read_device_args, read_flows, read_instants, read_spans};
use select::ArgsRead;
use tables::{read_args, read_devices, read_processes, read_ranks, read_strings, read_tracks};

pub(crate) use tables::visit_args;

/// See [`crate::read`]; `options` says which tables, columns and rows (see
/// [`crate::ReadOptions`]).
pub(crate) fn read(dir: &Path, options: &crate::ReadOptions) -> Result<Trace> {
    let meta = Metadata::read(dir)?;
    let mut trace = Trace {
        clock: ClockInfo::clone(&meta.clock),
        ..Trace::default()
    };
    trace.strings = read_strings(dir, &meta)?;
    let args = args_read(options);
    if args == ArgsRead::All {
        read_args(dir, &meta, &mut trace)?;
    }
    read_ranks(dir, &meta, &mut trace)?;
    read_processes(dir, &meta, &mut trace)?;
    read_tracks(dir, &meta, &mut trace)?;
    let span_ids = read_spans(dir, &meta, options, args, &mut trace, None)?;
    if options.instants {
        read_instants(dir, &meta, args, &mut trace, None)?;
    }
    if options.counters {
        read_counters(dir, &meta, &mut trace, None)?;
    }
    if options.flows {
        read_flows(dir, &meta, span_ids.as_deref(), &mut trace, None)?;
    }
    read_devices(dir, &meta, &mut trace)?;
    if args.selects() {
        read_device_args(dir, &meta, &mut trace)?;
    }
    trace
        .validate()
        .map_err(|e| StoreError::new(dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
    Ok(trace)
}

fn args_read(options: &crate::ReadOptions) -> ArgsRead {
    match (options.args, options.args_scope) {
        (false, _) => ArgsRead::None,
        (true, crate::ArgsScope::All) => ArgsRead::All,
        (true, crate::ArgsScope::DeviceOps) => ArgsRead::DeviceOps,
        (true, crate::ArgsScope::Dependencies) => ArgsRead::Dependencies,
    }
}

/// Called after each batch of events a streamed read has put in the trace.
type BatchDone<'a> = &'a mut dyn FnMut(&mut Trace) -> Result<()>;

/// A profile opened for a streamed read ([`crate::stream_with`]): its tables but the events
/// (strings, ranks, processes, tracks, devices, clock), checked; the events are read by
/// [`TablesRead::stream_events`].
pub(crate) struct TablesRead {
    dir: PathBuf,
    meta: Metadata,
    /// The tables; no event, no args blob.
    pub(crate) trace: Trace,
}

/// Reads the tables of the profile at `dir` but its events (see [`TablesRead`]).
pub(crate) fn read_tables(dir: &Path) -> Result<TablesRead> {
    let meta = Metadata::read(dir)?;
    let mut trace = Trace {
        clock: ClockInfo::clone(&meta.clock),
        ..Trace::default()
    };
    trace.strings = read_strings(dir, &meta)?;
    read_ranks(dir, &meta, &mut trace)?;
    read_processes(dir, &meta, &mut trace)?;
    read_tracks(dir, &meta, &mut trace)?;
    read_devices(dir, &meta, &mut trace)?;
    trace
        .validate()
        .map_err(|e| StoreError::new(dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
    Ok(TablesRead {
        dir: dir.to_path_buf(),
        meta,
        trace,
    })
}

impl TablesRead {
    /// Reads the events `options` keeps batch by batch (spans, then instants, counter samples
    /// and flows), each batch put in the tables' trace alone, with only its own args blobs
    /// (ids renumbered to index them; only the rows of `args.parquet` holding one are read),
    /// flow ends without span (the spans are gone), checked, handed to `sink`, then dropped.
    /// Returns the tables (no event).
    pub(crate) fn stream_events(
        mut self,
        options: &crate::ReadOptions,
        sink: &mut dyn FnMut(&mut Trace),
    ) -> Result<Trace> {
        let args = args_read(options);
        let (dir, meta) = (self.dir, self.meta);
        let mut done = |t: &mut Trace| -> Result<()> {
            if args != ArgsRead::None
                && (t.spans.iter().any(|s| s.args.is_some())
                    || t.instants.iter().any(|e| e.args.is_some()))
            {
                read_device_args(&dir, &meta, t)?;
            }
            for f in &mut t.flows {
                for end in [&mut f.from, &mut f.to].into_iter().flatten() {
                    end.span = None;
                }
            }
            t.validate()
                .map_err(|e| StoreError::new(&dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
            sink(t);
            t.spans.clear();
            t.instants.clear();
            t.counters.clear();
            t.flows.clear();
            t.args = strato_trace::ArgsTable::uncompressed();
            Ok(())
        };
        let trace = &mut self.trace;
        read_spans(&dir, &meta, options, args, trace, Some(&mut done))?;
        if options.instants {
            read_instants(&dir, &meta, args, trace, Some(&mut done))?;
        }
        if options.counters {
            read_counters(&dir, &meta, trace, Some(&mut done))?;
        }
        if options.flows {
            read_flows(&dir, &meta, None, trace, Some(&mut done))?;
        }
        Ok(self.trace)
    }
}

#[cfg(test)]
mod tests;
