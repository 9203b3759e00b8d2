//! [`import_paths_streaming`]: several trace files read one after the other as one job, their
//! events handed to a sink batch by batch in the job's ids (issue 28: an analysis that streams
//! one file, such as the op and layer tables, held every event of every rank of a job).
//!
//! [`import_paths`](crate::import_paths) imports each file and appends it to the job
//! ([`Trace::append`]): a file's ranks, processes, tracks and devices come after those of the
//! files before it, its strings are interned into the job's, its span ids follow theirs. Here
//! each batch a file's import hands over is put in those same ids before the sink sees it: the
//! batch's trace holds the job's tables (the files before, complete; this file's as they are
//! so far) and the batch's events renumbered. Once a file is read, its complete tables are
//! appended as `import_paths` appends them, and the job's rank claims are noted at the end, so
//! the trace returned has the tables `import_paths` gives, without the events.

use std::path::PathBuf;

use strato_trace::{
    CounterSample, Device, Flow, FlowEnd, Instant, Process, RankId, Span, SpanId, StrId, Trace,
    Track, TrackId,
};

use crate::chrome::EventSink;
use crate::{chrome, input, ranks, tf, Format, Result};

/// The job's table sizes before a file: where the file's ranks, processes, tracks and devices
/// start in the job's ids.
#[derive(Debug, Clone, Copy)]
struct Before {
    ranks: usize,
    processes: usize,
    tracks: usize,
    devices: usize,
}

impl Before {
    fn of(job: &Trace) -> Before {
        Before {
            ranks: job.ranks.len(),
            processes: job.processes.len(),
            tracks: job.tracks.len(),
            devices: job.devices.len(),
        }
    }

    /// Drops from `job` the tables of the file being read (they are put back as they are
    /// now, or appended complete).
    fn restore(&self, job: &mut Trace) {
        job.ranks.truncate(self.ranks);
        job.processes.truncate(self.processes);
        job.tracks.truncate(self.tracks);
        job.devices.truncate(self.devices);
    }

    fn rank(&self, id: RankId) -> RankId {
        RankId(id.0 + self.ranks as u32)
    }

    fn track(&self, id: TrackId) -> TrackId {
        TrackId(id.0 + self.tracks as u32)
    }
}

/// One file's ids in the job's: its strings, and the spans of the files before it.
struct FileIds {
    before: Before,
    strings: Vec<StrId>,
    spans_before: u32,
}

impl FileIds {
    fn string(&self, id: StrId) -> StrId {
        self.strings[id.0 as usize]
    }

    fn flow_end(&self, end: Option<FlowEnd>) -> Option<FlowEnd> {
        end.map(|e| FlowEnd {
            track: self.before.track(e.track),
            ts: e.ts,
            span: e.span.map(|s| SpanId(s.0 + self.spans_before)),
        })
    }

    /// `job`'s tables brought up to `file`'s as they are now, in the job's ids.
    fn sync_tables(&mut self, job: &mut Trace, file: &Trace) {
        for at in self.strings.len()..file.strings.len() {
            let text = file.strings.get(StrId(at as u32));
            self.strings.push(job.strings.intern(text));
        }
        let before = self.before;
        before.restore(job);
        job.ranks.extend(file.ranks.iter().cloned());
        job.processes.extend(file.processes.iter().map(|p| Process {
            rank: before.rank(p.rank),
            ..p.clone()
        }));
        job.tracks.extend(file.tracks.iter().map(|t| Track {
            rank: before.rank(t.rank),
            ..t.clone()
        }));
        job.devices.extend(file.devices.iter().map(|d| Device {
            rank: d.rank.map(|r| before.rank(r)),
            ..d.clone()
        }));
    }

    /// `batch`'s events moved into `job`, in the job's ids (`job` holds no events before).
    fn move_events(&self, job: &mut Trace, batch: &mut Trace) {
        let track = |t: TrackId| self.before.track(t);
        job.spans.extend(batch.spans.drain(..).map(|s| Span {
            track: track(s.track),
            name: self.string(s.name),
            category: self.string(s.category),
            ..s
        }));
        job.instants
            .extend(batch.instants.drain(..).map(|e| Instant {
                track: track(e.track),
                name: self.string(e.name),
                category: self.string(e.category),
                ..e
            }));
        job.counters
            .extend(batch.counters.drain(..).map(|c| CounterSample {
                track: track(c.track),
                ..c
            }));
        job.flows.extend(batch.flows.drain(..).map(|f| Flow {
            id: f.id,
            category: self.string(f.category),
            from: self.flow_end(f.from),
            to: self.flow_end(f.to),
        }));
        // The args stay the batch's: the events' ids into them are unchanged.
        std::mem::swap(&mut job.args, &mut batch.args);
    }
}

/// The files of `paths` (rank files, directories of them) imported as
/// [`import_paths`](crate::import_paths) imports them, each file's events handed to `sink` in
/// batches of `batch_events` as they are read, in the job's ids (see the module docs): each
/// batch's trace holds the job's tables so far and the batch's events (spans, instants,
/// counter samples, the complete flows, their args). The trace returned holds the job's
/// tables and no events.
///
/// Only files that each stream ([`crate::import_file_streaming`]: regular Chrome/Kineto JSON
/// files, not TensorFlow trace viewer files) are read so: for any other input `Ok(None)` is
/// returned, before any event is handed over unless a file turns out to be a trace viewer
/// file at its end (`None` then too: the caller discards what it was handed and imports the
/// job whole). `sink` giving up (`Err`) stops the read with that error.
pub fn import_paths_streaming(
    paths: &[PathBuf],
    options: &crate::ImportOptions,
    batch_events: usize,
    sink: &mut EventSink<'_>,
) -> Result<Option<Trace>> {
    let inputs = ranks::expand_inputs(paths)?;
    if !inputs.recordings.is_empty() || inputs.files.is_empty() {
        return Ok(None);
    }
    // Every file is checked before any event is handed over.
    let mut opened = Vec::with_capacity(inputs.files.len());
    for path in &inputs.files {
        if input::is_stdin(path) || !path.is_file() {
            return Ok(None);
        }
        let mut input = crate::open_input(path, options)?;
        if input.recording
            || !input.regular_file
            || crate::sniffed_format(path, &mut input)? != Format::ChromeJson
        {
            return Ok(None);
        }
        drop(input);
        opened.push(path);
    }
    let mut job = Trace::default();
    let mut spans_before = 0u32;
    for path in opened {
        let input = crate::open_input(path, options)?;
        let mut ids = FileIds {
            before: Before::of(&job),
            strings: Vec::new(),
            spans_before,
        };
        let mut spans = 0u32;
        let mut into_job = |batch: &mut Trace| {
            ids.sync_tables(&mut job, batch);
            spans += batch.spans.len() as u32;
            ids.move_events(&mut job, batch);
            let taken = sink(&mut job);
            job.clear_events();
            job.flows.clear();
            batch.clear_events();
            taken
        };
        let mut file = chrome::import_streaming(path, input, options, batch_events, &mut into_job)?;
        if tf::is_trace_viewer(&file) {
            return Ok(None);
        }
        // The file's complete tables, appended as `import_paths` appends them (tracks, ranks
        // and strings renumbered there); the flows it kept (those not handed over) point at
        // spans numbered after those of the files before.
        ids.before.restore(&mut job);
        let after_earlier = |end: &mut Option<FlowEnd>| {
            if let Some(span) = end.as_mut().and_then(|e| e.span.as_mut()) {
                span.0 += spans_before;
            }
        };
        for flow in &mut file.flows {
            after_earlier(&mut flow.from);
            after_earlier(&mut flow.to);
        }
        job.append(file);
        spans_before += spans;
    }
    ranks::note_rank_claims(&mut job);
    Ok(Some(job))
}
