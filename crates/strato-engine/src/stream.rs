//! Opening inputs as a stream of event batches: [`Engine::stream_file`] (one Chrome/Kineto
//! JSON file) and [`Engine::stream_stored`] (one profile directory or store), for analyses
//! that reduce events as they come and so never hold the trace.

use std::path::{Path, PathBuf};

use strato_io::ImportOptions;
use strato_trace::Trace;

use crate::{Engine, Result};

/// Drops the events of a batch a streaming sink has consumed (spans, instants, counters and
/// their args; flows and the other tables stay), so memory holds only what the consumer keeps.
pub fn drop_batch_events(trace: &mut Trace) {
    trace.clear_events();
}

impl Engine {
    /// One input, a stored profile or a Chrome/Kineto JSON file, streamed into `take` (a
    /// profile batch by batch, a file as it is read, each batch's events dropped once taken).
    /// `take` gives up with `Err`: a file stops being read, a profile's later batches are not
    /// given to it. `None` when the input does not stream or `take` gave up (the caller knows
    /// why); an input that cannot be read is the error.
    pub(crate) fn stream_one(
        &self,
        inputs: &[PathBuf],
        options: &ImportOptions,
        take: &mut dyn FnMut(&Trace) -> std::result::Result<(), String>,
    ) -> Result<Option<Trace>> {
        let [input] = inputs else { return Ok(None) };
        let mut gave_up = false;
        let streamed = if strato_store::is_profile_dir(input) {
            let mut sink = |batch: &mut Trace| {
                if !gave_up {
                    gave_up = take(batch).is_err();
                }
            };
            self.stream_stored(inputs, options, &mut sink)?
        } else {
            let mut sink = |batch: &mut Trace| {
                let taken = take(batch);
                gave_up = taken.is_err();
                crate::drop_batch_events(batch);
                taken
            };
            match self.stream_file(input, options, &mut sink) {
                Err(_) if gave_up => return Ok(None),
                other => other?,
            }
        };
        Ok(streamed.filter(|_| !gave_up))
    }

    /// One trace file imported as [`Engine::open`] imports it alone, its events handed to
    /// `sink` as they are read instead of kept ([`strato_io::import_file_streaming`]: the trace
    /// returned holds every table but the events; secrets redacted unless `keep_secrets`,
    /// import notes told). `None` when the input does not stream (not a regular Chrome/Kineto
    /// JSON file, or a TensorFlow trace viewer file), or with `graph_capture` (its attribution
    /// needs the whole trace): the caller opens it with [`Engine::open`]. The events are as the
    /// file holds them: graph node links are not applied (an analysis that reads them checks
    /// [`strato_trace::names::has_graph_node_links`] on the trace returned).
    pub fn stream_file(
        &self,
        input: &Path,
        options: &ImportOptions,
        sink: &mut strato_io::chrome::EventSink<'_>,
    ) -> Result<Option<Trace>> {
        if !input.is_file() || self.attributes_graph_capture() {
            return Ok(None);
        }
        let batch = strato_io::chrome::SINK_EVENTS;
        self.imported_streaming(sink, |redacting| {
            strato_io::import_file_streaming(input, options, batch, redacting)
        })
    }

    /// What `import` gives, streaming its events to `sink` through a sink that redacts each
    /// batch's attribute blobs before anyone sees them, with its tables as [`Engine::open`]
    /// leaves them: shared rank claims noted, secrets redacted (unless `keep_secrets`), import
    /// notes told.
    fn imported_streaming(
        &self,
        sink: &mut strato_io::chrome::EventSink<'_>,
        import: impl FnOnce(&mut strato_io::chrome::EventSink<'_>) -> strato_io::Result<Option<Trace>>,
    ) -> Result<Option<Trace>> {
        let redacts = self.redacts();
        let mut redacting = |batch: &mut Trace| {
            if redacts {
                strato_io::redact::redact_args(&mut batch.args);
            }
            sink(batch)
        };
        let imported = import(&mut redacting);
        self.listener().import_finished();
        let Some(mut trace) = imported? else {
            return Ok(None);
        };
        self.note_shared_rank_claims(&trace);
        if redacts {
            strato_io::redact::redact_trace(&mut trace);
        }
        self.warn_import_notes(&trace);
        Ok(Some(trace))
    }

    /// Several rank files (or directories of them: [`Engine::rank_files`]'s `files`) imported
    /// as [`Engine::open`] imports them together, their events handed to `sink` file after
    /// file as they are read, in the job's ids ([`strato_io::job::import_paths_streaming`]:
    /// the trace returned holds the job's tables but no events; secrets redacted unless
    /// `keep_secrets`, import notes told once, for the job). `None` when a file does not
    /// stream (as [`Engine::stream_file`]), or with `graph_capture`: the caller opens the job
    /// whole. The events are as the files hold them (graph node links not applied).
    pub fn stream_job(
        &self,
        files: &[PathBuf],
        options: &ImportOptions,
        sink: &mut strato_io::chrome::EventSink<'_>,
    ) -> Result<Option<Trace>> {
        if self.attributes_graph_capture() {
            return Ok(None);
        }
        let batch = strato_io::chrome::SINK_EVENTS;
        self.imported_streaming(sink, |redacting| {
            strato_io::job::import_paths_streaming(files, options, batch, redacting)
        })
    }

    /// One stored profile or store (`inputs` is that one directory) read as [`Engine::open`]
    /// reads it, its events handed to `sink` batch by batch instead of kept
    /// ([`strato_store::stream_with`], [`strato_store::partitioned::stream_store`]: only the
    /// tables, columns and row groups `options` reads, one batch of events in memory). The
    /// trace returned holds every table but the events (secrets redacted unless
    /// `keep_secrets`, import notes told).
    ///
    /// `None` when the input is not one stored profile or store, or when [`Engine::open`]
    /// would change its events: with `graph_capture`, or when flows are read and the profile
    /// holds graph node links (their attribution needs the whole trace). In that last case
    /// `sink` has already seen the events: the caller starts over with [`Engine::open`].
    pub fn stream_stored(
        &self,
        inputs: &[PathBuf],
        options: &ImportOptions,
        sink: &mut dyn FnMut(&mut Trace),
    ) -> Result<Option<Trace>> {
        let [input] = inputs else { return Ok(None) };
        if self.attributes_graph_capture() {
            return Ok(None);
        }
        let read = crate::store_read_options(options);
        // A profile imported with `--keep-secrets` holds them: each batch's attribute blobs are
        // redacted before the sink sees them.
        let redacts = self.redacts();
        let mut redacting = |batch: &mut Trace| {
            if redacts {
                strato_io::redact::redact_args(&mut batch.args);
            }
            sink(batch)
        };
        let mut trace = if strato_store::is_profile_dir(input) {
            strato_store::stream_with(input, &read, &mut redacting)?
        } else if strato_store::partitioned::is_store_dir(input) {
            strato_store::partitioned::stream_store(input, &read, &mut redacting)?
        } else {
            return Ok(None);
        };
        if read.flows && strato_trace::names::has_graph_node_links(&trace) {
            return Ok(None);
        }
        self.warn_import_notes(&trace);
        if redacts {
            strato_io::redact::redact_trace(&mut trace);
        }
        Ok(Some(trace))
    }
}

/// Whether `input` may be a job of one rank read this way: a regular file (a JSON trace; its
/// ranks show as it streams), or a profile directory of one rank (its metadata says).
pub(crate) fn one_rank_input(input: &Path) -> bool {
    if strato_store::is_profile_dir(input) {
        return strato_store::read_metadata(input)
            .ok()
            .and_then(|m| m.tables.get("ranks").map(|t| t.rows == 1))
            .unwrap_or(false);
    }
    input.is_file()
}
