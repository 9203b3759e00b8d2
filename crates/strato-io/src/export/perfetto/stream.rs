//! The Perfetto export of a trace that is never held: [`PerfettoStream`] takes a streamed
//! import's batches, keeps their slices in sorted runs spilled to anonymous temporary files
//! (an external sort: slices on one Perfetto track must be written in nesting order, and a
//! file's events come in any order), and writes the same file as [`super::write_with`] once
//! the import has returned the trace's tables.
//!
//! Memory is one run's buffer ([`RUN_BYTES`]), one read buffer per run and the tables with
//! their flows; the disk holds about the events' size (names as ids, args as text) until
//! the stream is dropped. The temporary files have no name: nothing is left behind, whatever
//! ends the process.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use strato_trace::{Level, Ns, StrId, Trace, TrackId, TrackKind};

use super::{group_level, Args, Extras, InstantEvent, Slice, Writer};
use crate::spill::{
    decode_optional, encode_optional, level_of, read_array, u32_of, u64_of, Log, READ_BUFFER,
};

/// The bytes of slices (their encoded records, args text included, and their sort index) held
/// before a sorted run is spilled.
pub const RUN_BYTES: usize = 8 << 20;

/// A streamed Perfetto export: [`PerfettoStream::batch`] for each batch of a streamed import,
/// then [`PerfettoStream::finish`] with what the import returned.
///
/// The file is byte for byte what [`super::write_with`] writes of the whole trace, when the
/// batches hold the trace's spans in order (span `i` of the trace is the `i`-th span
/// batched: flows name spans by that index) and `extras` are the same.
pub struct PerfettoStream {
    dir: PathBuf,
    strata_tracks: bool,
    /// Slices of the current run: their records, one after the other, and per slice its
    /// place in the order with the range of its record.
    run: Vec<u8>,
    run_index: Vec<(Key, usize, usize)>,
    /// Sorted runs spilled so far.
    runs: Vec<File>,
    instants: Log,
    counters: Log,
    spans: u32,
    /// Earliest time of any event (the writer shifts negative times).
    min: Option<Ns>,
    run_limit: usize,
}

impl std::fmt::Debug for PerfettoStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfettoStream")
            .field("spans", &self.spans)
            .field("runs", &self.runs.len())
            .finish_non_exhaustive()
    }
}

impl PerfettoStream {
    /// A stream that spills into anonymous files in `dir` (the output's directory is a good
    /// choice: it has room for about as much as the file written); `strata_tracks` as
    /// [`Extras::strata_tracks`] will be at [`PerfettoStream::finish`].
    pub fn new(dir: &Path, strata_tracks: bool) -> io::Result<Self> {
        Self::with_run_bytes(dir, strata_tracks, RUN_BYTES)
    }

    /// [`PerfettoStream::new`] spilling a run every `run_bytes` (tests: many runs on a small
    /// trace).
    pub fn with_run_bytes(dir: &Path, strata_tracks: bool, run_bytes: usize) -> io::Result<Self> {
        Ok(PerfettoStream {
            dir: dir.to_path_buf(),
            strata_tracks,
            run: Vec::new(),
            run_index: Vec::new(),
            runs: Vec::new(),
            instants: Log::new(dir)?,
            counters: Log::new(dir)?,
            spans: 0,
            min: None,
            run_limit: run_bytes.max(1),
        })
    }

    /// Takes the spans, instants and counter samples of `batch` (a streamed import's batch:
    /// its tracks are the trace's so far, its args index its own args table) out of it;
    /// flows and the other tables stay.
    pub fn batch(&mut self, batch: &mut Trace) -> io::Result<()> {
        let taken = self.take(batch);
        batch.clear_events();
        taken
    }

    fn take(&mut self, batch: &Trace) -> io::Result<()> {
        let split: Vec<bool> = batch
            .tracks
            .iter()
            .map(|t| self.strata_tracks && matches!(t.kind, TrackKind::Thread { .. }))
            .collect();
        for span in &batch.spans {
            self.note_time(span.start);
            let args = batch.args_text(span.args);
            let slice = Slice::of(span, self.spans, group_level(&split, span), args);
            self.spans = self
                .spans
                .checked_add(1)
                .ok_or_else(|| io::Error::other("more than 4 Gi spans: too many to export"))?;
            let from = self.run.len();
            encode_slice(&slice, &mut self.run);
            self.run_index.push((slice.key(), from, self.run.len()));
            let held = self.run.len() + self.run_index.len() * size_of::<(Key, usize, usize)>();
            if held >= self.run_limit {
                self.spill()?;
            }
        }
        for instant in &batch.instants {
            self.note_time(instant.ts);
            let args = batch.args_text(instant.args);
            self.instants.write(&encode_instant(
                &InstantEvent::of(instant, None),
                args.as_deref(),
            ))?;
        }
        for sample in &batch.counters {
            self.note_time(sample.ts);
            let mut record = Vec::with_capacity(20);
            record.extend_from_slice(&sample.track.0.to_le_bytes());
            record.extend_from_slice(&sample.ts.to_le_bytes());
            record.extend_from_slice(&sample.value.to_le_bytes());
            self.counters.write(&record)?;
        }
        Ok(())
    }

    fn note_time(&mut self, ts: Ns) {
        self.min = Some(self.min.map_or(ts, |m| m.min(ts)));
    }

    /// Sorts the current run and writes it to a file of its own (the run's buffers are kept
    /// for the next).
    fn spill(&mut self) -> io::Result<()> {
        self.run_index.sort_unstable_by_key(|&(key, _, _)| key);
        let mut out = BufWriter::new(tempfile::tempfile_in(&self.dir)?);
        for &(_, from, to) in &self.run_index {
            out.write_all(&self.run[from..to])?;
        }
        let mut file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.rewind()?;
        self.runs.push(file);
        self.run.clear();
        self.run_index.clear();
        Ok(())
    }

    /// Writes the file to `out`: `trace` is what the streamed import returned (every table,
    /// its flows bound to the spans batched; its names redacted as the whole import's are),
    /// `extras` what the analyses add ([`Extras::strata_tracks`] as given to
    /// [`PerfettoStream::new`]).
    pub fn finish<W: Write>(mut self, trace: &Trace, extras: &Extras, out: W) -> io::Result<()> {
        if extras.strata_tracks != self.strata_tracks {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the stream was started with other strata tracks than its extras ask for",
            ));
        }
        let named = trace
            .flows
            .iter()
            .flat_map(|f| [f.from.as_ref(), f.to.as_ref()])
            .flatten()
            .filter_map(|end| end.span)
            .any(|span| span.0 >= self.spans);
        if named {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a flow names a span the stream was not given",
            ));
        }
        let mut writer = Writer::new(trace, self.min, out);
        writer.strata_tracks = self.strata_tracks;
        writer.tracks()?;
        writer.bind_flows(&trace.flows);
        if self.runs.is_empty() {
            // Nothing spilled: the run is sorted and read back in memory.
            self.run_index.sort_unstable_by_key(|&(key, _, _)| key);
            let run = &self.run;
            writer.slices(self.run_index.iter().map(|&(_, from, to)| {
                decode_slice(&mut &run[from..to])?
                    .ok_or_else(|| io::Error::other("spill: an empty record"))
            }))?;
        } else {
            if !self.run.is_empty() {
                self.spill()?;
            }
            let runs = std::mem::take(&mut self.runs);
            writer.slices(Merge::new(runs)?)?;
        }
        let mut instants = self.instants.reader()?;
        writer.instants(std::iter::from_fn(|| {
            decode_instant(&mut instants).transpose()
        }))?;
        let mut counters = self.counters.reader()?;
        writer.counters(std::iter::from_fn(|| {
            decode_counter(&mut counters).transpose()
        }))?;
        writer.extras(extras)?;
        writer.out.flush()
    }
}

/// The k-way merge of sorted runs: slices in [`Slice::key`] order.
struct Merge {
    readers: Vec<BufReader<File>>,
    heads: Vec<Option<Slice<'static>>>,
    heap: BinaryHeap<Reverse<(Key, usize)>>,
}

type Key = (TrackId, Level, Ns, Reverse<Ns>, u32);

impl Merge {
    fn new(runs: Vec<File>) -> io::Result<Self> {
        let mut merge = Merge {
            readers: runs
                .into_iter()
                .map(|f| BufReader::with_capacity(READ_BUFFER, f))
                .collect(),
            heads: Vec::new(),
            heap: BinaryHeap::new(),
        };
        merge.heads = vec![None; merge.readers.len()];
        for run in 0..merge.readers.len() {
            merge.advance(run)?;
        }
        Ok(merge)
    }

    /// Reads run `run`'s next slice into its head.
    fn advance(&mut self, run: usize) -> io::Result<()> {
        let next = decode_slice(&mut self.readers[run])?;
        if let Some(slice) = &next {
            self.heap.push(Reverse((slice.key(), run)));
        }
        self.heads[run] = next;
        Ok(())
    }
}

impl Iterator for Merge {
    type Item = io::Result<Slice<'static>>;

    fn next(&mut self) -> Option<Self::Item> {
        let Reverse((_, run)) = self.heap.pop()?;
        let slice = self.heads[run].take()?;
        Some(self.advance(run).map(|()| slice))
    }
}

fn encode_slice(s: &Slice<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(&s.track.0.to_le_bytes());
    out.push(s.group.code());
    out.extend_from_slice(&s.start.to_le_bytes());
    out.extend_from_slice(&s.end.to_le_bytes());
    out.extend_from_slice(&s.index.to_le_bytes());
    out.extend_from_slice(&s.name.0.to_le_bytes());
    out.extend_from_slice(&s.category.0.to_le_bytes());
    out.push(s.level.code());
    encode_optional(
        s.correlation,
        s.external_id,
        s.args.as_ref().map(Args::as_str),
        out,
    );
}

fn encode_instant(i: &InstantEvent<'_>, args: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.extend_from_slice(&i.track.0.to_le_bytes());
    out.extend_from_slice(&i.ts.to_le_bytes());
    out.extend_from_slice(&i.name.0.to_le_bytes());
    out.extend_from_slice(&i.category.0.to_le_bytes());
    out.push(i.level.code());
    encode_optional(None, None, args, &mut out);
    out
}

fn decode_slice(input: &mut impl Read) -> io::Result<Option<Slice<'static>>> {
    let Some(track) = read_array::<4>(input, true)? else {
        return Ok(None);
    };
    let group = level_of(input)?;
    let start = u64_of(input)? as Ns;
    let end = u64_of(input)? as Ns;
    let index = u32_of(input)?;
    let name = StrId(u32_of(input)?);
    let category = StrId(u32_of(input)?);
    let level = level_of(input)?;
    let (correlation, external_id, args) = decode_optional(input)?;
    let args = args.map(Args::Owned);
    Ok(Some(Slice {
        track: TrackId(u32::from_le_bytes(track)),
        group,
        start,
        end,
        index,
        name,
        category,
        level,
        correlation,
        external_id,
        args,
    }))
}

fn decode_instant(input: &mut impl Read) -> io::Result<Option<InstantEvent<'static>>> {
    let Some(track) = read_array::<4>(input, true)? else {
        return Ok(None);
    };
    let ts = u64_of(input)? as Ns;
    let name = StrId(u32_of(input)?);
    let category = StrId(u32_of(input)?);
    let level = level_of(input)?;
    let (_, _, args) = decode_optional(input)?;
    let args = args.map(Args::Owned);
    Ok(Some(InstantEvent {
        track: TrackId(u32::from_le_bytes(track)),
        ts,
        name,
        category,
        level,
        args,
    }))
}

fn decode_counter(input: &mut impl Read) -> io::Result<Option<(TrackId, Ns, f64)>> {
    let Some(track) = read_array::<4>(input, true)? else {
        return Ok(None);
    };
    let ts = u64_of(input)? as Ns;
    let value = f64::from_bits(u64_of(input)?);
    Ok(Some((TrackId(u32::from_le_bytes(track)), ts, value)))
}
