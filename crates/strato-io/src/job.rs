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

    /// `job`'s tables brought up to the file's as `part` gives them, in the job's ids.
    fn sync_tables(&mut self, job: &mut Trace, part: &mut Part) {
        for text in part.new_strings.drain(..) {
            self.strings.push(job.strings.intern(&text));
        }
        let before = self.before;
        before.restore(job);
        job.ranks.append(&mut part.ranks);
        job.processes
            .extend(part.processes.drain(..).map(|p| Process {
                rank: before.rank(p.rank),
                ..p
            }));
        job.tracks.extend(part.tracks.drain(..).map(|t| Track {
            rank: before.rank(t.rank),
            ..t
        }));
        job.devices.extend(part.devices.drain(..).map(|d| Device {
            rank: d.rank.map(|r| before.rank(r)),
            ..d
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

/// A batch as the thread reading its file hands it over: the strings the file's import added
/// since the batch before, a copy of the file's other tables as they are now, and the batch's
/// events (in the file's ids).
struct Part {
    new_strings: Vec<String>,
    ranks: Vec<strato_trace::Rank>,
    processes: Vec<Process>,
    tracks: Vec<Track>,
    devices: Vec<Device>,
    events: Trace,
}

/// What the thread reading a file sends, in order: its batches, then how the file ended.
enum Sent {
    Batch(Part),
    /// The file's complete tables (no events).
    Done(Trace),
    /// Not a file that streams (a TensorFlow trace viewer file, found at its end).
    NotStreamed,
    Failed(crate::Error),
}

/// Batches of a file read ahead while an earlier file is handed over, per file being read.
const READ_AHEAD: usize = 2;

/// Reads `path` as [`crate::import_file_streaming`] reads it and sends what it hands over to
/// `to`; stops when `stop` is set or the receiver is gone.
fn read_file(
    path: &std::path::Path,
    options: &crate::ImportOptions,
    batch_events: usize,
    to: &std::sync::mpsc::SyncSender<Sent>,
    stop: &std::sync::atomic::AtomicBool,
) {
    let mut strings_sent = 0;
    let mut send = |batch: &mut Trace| {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("the job's read stopped".to_owned());
        }
        let new_strings = (strings_sent..batch.strings.len())
            .map(|at| batch.strings.get(StrId(at as u32)).to_owned())
            .collect();
        strings_sent = batch.strings.len();
        let mut events = Trace::default();
        std::mem::swap(&mut events.spans, &mut batch.spans);
        std::mem::swap(&mut events.instants, &mut batch.instants);
        std::mem::swap(&mut events.counters, &mut batch.counters);
        std::mem::swap(&mut events.flows, &mut batch.flows);
        std::mem::swap(&mut events.args, &mut batch.args);
        let part = Part {
            new_strings,
            ranks: batch.ranks.clone(),
            processes: batch.processes.clone(),
            tracks: batch.tracks.clone(),
            devices: batch.devices.clone(),
            events,
        };
        to.send(Sent::Batch(part))
            .map_err(|_| "the job's read stopped".to_owned())
    };
    let read = crate::open_input(path, options)
        .and_then(|input| chrome::import_streaming(path, input, options, batch_events, &mut send));
    let end = match read {
        Ok(file) if tf::is_trace_viewer(&file) => Sent::NotStreamed,
        Ok(file) => Sent::Done(file),
        Err(e) => Sent::Failed(e),
    };
    let _ = to.send(end);
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
    // The files are read ahead on `jobs - 1` threads (at least one; each at most `READ_AHEAD`
    // batches ahead) and handed over here, one after the other in input order: the thread
    // handing over keeps a core busy too. (128 ranks x 5 MB on 2 cores, `ops`: one reader
    // 5.60 s / 127 MB, two 5.83 s / 254 MB, none 7.92 s / 124 MB.)
    let stop = std::sync::atomic::AtomicBool::new(false);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..opened.len())
        .map(|_| std::sync::mpsc::sync_channel::<Sent>(READ_AHEAD))
        .unzip();
    let readers = options
        .effective_jobs()
        .saturating_sub(1)
        .clamp(1, opened.len());
    std::thread::scope(|scope| {
        for _ in 0..readers {
            scope.spawn(|| loop {
                let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (Some(path), Some(to)) = (opened.get(at), senders.get(at)) else {
                    return;
                };
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                // A reader that panicked says so, in its file's turn: the thread handing over
                // never waits for a file no one reads.
                let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    read_file(path, options, batch_events, to, &stop);
                }));
                if read.is_err() {
                    let failed = crate::Error::new(
                        path,
                        crate::ErrorKind::Output("reading it failed (a panic, a bug)".into()),
                    );
                    let _ = to.send(Sent::Failed(failed));
                }
            });
        }
        let handed = hand_over(&opened, receivers, sink);
        if !matches!(handed, Ok(Some(_))) {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        handed
    })
}

/// The parts of each file (`receivers`, in input order) put in the job's ids and handed to
/// `sink`; the job's tables once every file is read. Returning drops the receivers, so that
/// a thread still reading stops.
fn hand_over(
    files: &[&PathBuf],
    receivers: Vec<std::sync::mpsc::Receiver<Sent>>,
    sink: &mut EventSink<'_>,
) -> Result<Option<Trace>> {
    let mut job = Trace::default();
    let mut spans_before = 0u32;
    for (path, parts) in files.iter().zip(receivers) {
        let mut ids = FileIds {
            before: Before::of(&job),
            strings: Vec::new(),
            spans_before,
        };
        let mut spans = 0u32;
        let mut file = loop {
            let Ok(sent) = parts.recv() else {
                return Err(crate::Error::new(
                    path,
                    crate::ErrorKind::Output("the thread reading it ended early".into()),
                ));
            };
            let mut part = match sent {
                Sent::Batch(part) => part,
                Sent::Done(file) => break file,
                Sent::NotStreamed => return Ok(None),
                Sent::Failed(e) => return Err(e),
            };
            ids.sync_tables(&mut job, &mut part);
            spans += part.events.spans.len() as u32;
            ids.move_events(&mut job, &mut part.events);
            let taken = sink(&mut job);
            job.clear_events();
            job.flows.clear();
            if let Err(message) = taken {
                return Err(crate::Error::new(path, crate::ErrorKind::Output(message)));
            }
        };
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
