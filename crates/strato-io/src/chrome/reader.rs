//! The streaming event reader: parses each element the splitter hands over (fast with serde,
//! again leniently when the fast reading refuses a value, see [`crate::json_lenient`]), caps
//! long names and args ([`super::MAX_STRING_BYTES`], [`super::MAX_ARGS_BYTES`]), dispatches
//! the event by phase to its handler, and hands batches of events to a streaming import's sink.
//!
//! It owns what parsing counted ([`ParseCounts`]) and the errors about one event (its times,
//! the memory budget), which the splitter can only carry as text.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use strato_trace::{checked_time, parse_decimal_to_ns, Ns, TimeParseError};

use super::schema::{EventView, KnownArgs, RawEvent, TF_EAGER_ARGS};
use super::{Builder, MAX_ARGS_BYTES, MAX_STRING_BYTES};
use crate::json_lenient;
use crate::{Error, ErrorKind, Result};

/// What the parsing entry counted: events, cut strings, salvage.
#[derive(Default)]
pub(super) struct ParseCounts {
    /// Elements of `traceEvents` parsed.
    pub(super) events: u64,
    /// Names/categories cut to [`MAX_STRING_BYTES`], and the bytes cut from them.
    pub(super) truncated_strings: u64,
    pub(super) truncated_string_bytes: u64,
    /// `args` objects replaced for passing [`MAX_ARGS_BYTES`].
    pub(super) truncated_args: u64,
    /// Lone surrogates replaced by U+FFFD in decoded strings ([`crate::json_lenient`]).
    pub(super) replaced_surrogates: u64,
}

/// Cuts `text` to [`MAX_STRING_BYTES`] at a character boundary, counting what was cut.
pub(super) fn cap_string(text: &mut Option<Cow<'_, str>>, counts: &mut ParseCounts) {
    let Some(t) = text else { return };
    if t.len() <= MAX_STRING_BYTES {
        return;
    }
    let mut cut = MAX_STRING_BYTES;
    while !t.is_char_boundary(cut) {
        cut -= 1;
    }
    counts.truncated_strings += 1;
    counts.truncated_string_bytes += (t.len() - cut) as u64;
    match t {
        Cow::Borrowed(b) => *b = &b[..cut],
        Cow::Owned(o) => {
            o.truncate(cut);
            o.shrink_to_fit();
        }
    }
}

impl<'p, 's> Builder<'p, 's> {
    /// An error about one event (named, with its byte offset), for times that cannot be used.
    pub(super) fn event_err(
        &mut self,
        ev: &EventView<'_>,
        offset: u64,
        what: impl std::fmt::Display,
    ) -> Error {
        let kind = ErrorKind::Invalid(format!(
            "event {:?} at byte {offset}: {what}",
            ev.name.unwrap_or("")
        ));
        self.fatal(kind)
    }

    /// Keeps `kind` as the error that stops the import (see `fatal`) and returns it too.
    pub(super) fn fatal(&mut self, kind: ErrorKind) -> Error {
        let text = kind.to_string();
        self.fatal = Some(Error::new(self.path, kind));
        Error::new(self.path, ErrorKind::Invalid(text))
    }

    /// The event's `ts`: required, and in the valid time range.
    pub(super) fn event_ts(&mut self, ev: &EventView<'_>, offset: u64) -> Result<Ns> {
        self.notes().events_read += 1;
        let ts = match self.time(ev.ts) {
            Ok(Some(ts)) => ts,
            Ok(None) => return Err(self.event_err(ev, offset, "no \"ts\"")),
            Err(e) => return Err(self.event_err(ev, offset, format!("bad timestamp: {e}"))),
        };
        checked_time(i128::from(ts)).map_err(|e| self.event_err(ev, offset, e))
    }

    /// Stops the import when what it keeps would pass the memory budget.
    pub(super) fn check_memory(&mut self) -> Result<()> {
        match self.memory.check(&self.trace) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fatal(ErrorKind::MemoryBudget {
                limit_bytes: e.limit_bytes,
            })),
        }
    }

    /// A `ts` or `dur` field in ns: `None` when absent or `null`.
    pub(super) fn time(
        &self,
        raw: Option<&RawValue>,
    ) -> std::result::Result<Option<Ns>, TimeParseError> {
        let Some(raw) = raw else { return Ok(None) };
        let text = raw.get();
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or(text);
        if text == "null" {
            return Ok(None);
        }
        parse_decimal_to_ns(text, 1000).map(Some)
    }

    /// Parses one event: from the front of the window read so far when `!complete` (`None`
    /// when it cannot, for whatever reason: the splitter then finds the event's end and calls
    /// again), or exactly `bytes` when `complete` (an error is then the event's own).
    pub(super) fn event(
        &mut self,
        bytes: &[u8],
        offset: u64,
        complete: bool,
    ) -> std::result::Result<Option<usize>, String> {
        let read = |b: &mut Self| {
            if b.options.keep_args {
                b.event_with_raw_args(bytes, offset, complete)
            } else {
                b.event_lean(bytes, offset, complete)
            }
        };
        // A parse error (not a semantic one, which is `fatal`) comes before any effect of the
        // event: the fast reading refused a value, or the window cut the event. Read the whole
        // event again leniently (see `json_lenient`); only then is an error the event's own.
        let parsed = match read(self) {
            Err(_) if self.fatal.is_none() && !complete => Ok(None),
            Err(_) if self.fatal.is_none() => {
                let lenient = json_lenient::lenient();
                let read = read(self);
                // Surrogates replaced in pid / tid / id, which `Loose` cannot count itself.
                self.parse.replaced_surrogates += u64::from(lenient.take_replaced());
                read
            }
            other => other,
        };
        let parsed = match parsed {
            Ok(Some(used)) => {
                self.parse.events += 1;
                self.hand_over_when_full().map(|()| Some(used))
            }
            other => other,
        };
        parsed.map_err(|e| match e.kind {
            ErrorKind::Json { message, .. } => message,
            other => other.to_string(),
        })
    }

    /// Hands the events to the sink (streaming import) once a batch is held.
    pub(super) fn hand_over_when_full(&mut self) -> Result<()> {
        let held = self.trace.spans.len() + self.trace.instants.len() + self.trace.counters.len();
        if self.sink.is_some() && held >= self.batch_events {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Hands every event held to the sink, keeping what binding flows needs of the spans.
    pub(super) fn hand_over(&mut self) -> Result<()> {
        let Some(sink) = self.sink.as_mut() else {
            return Ok(());
        };
        let places_flows = self.options.projection.flows && self.options.projection.flow_ends;
        if places_flows {
            self.handed_spans.keep(&self.trace.spans);
        }
        // Placed flows are still being filled in (by index): the sink does not see them.
        let held_flows = if places_flows {
            std::mem::take(&mut self.trace.flows)
        } else {
            Vec::new()
        };
        let outcome = sink(&mut self.trace);
        if places_flows {
            self.trace.flows = held_flows;
        }
        if let Err(message) = outcome {
            return Err(self.fatal(ErrorKind::Output(message)));
        }
        Ok(())
    }

    /// Parses one event of type `E`: all of `bytes` when `complete` (else an error), or from
    /// the front of `bytes` when not (`Ok(None)` on any failure: the event may be cut off).
    pub(super) fn parse_front<'a, E: Deserialize<'a>>(
        &self,
        bytes: &'a [u8],
        offset: u64,
        complete: bool,
    ) -> Result<Option<(E, usize)>> {
        if complete {
            return serde_json::from_slice::<E>(bytes)
                .map(|ev| Some((ev, bytes.len())))
                .map_err(|e| self.err(offset, format!("bad event: {e}")));
        }
        let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<E>();
        match stream.next() {
            Some(Ok(ev)) => Ok(Some((ev, stream.byte_offset()))),
            _ => Ok(None),
        }
    }

    pub(super) fn event_with_raw_args(
        &mut self,
        bytes: &[u8],
        offset: u64,
        complete: bool,
    ) -> Result<Option<usize>> {
        let Some((mut ev, used)) =
            self.parse_front::<RawEvent<'_, &RawValue>>(bytes, offset, complete)?
        else {
            return Ok(None);
        };
        // Args that are not an object carry no field the importer reads (and a bare number
        // in them may be one serde cannot hold).
        let mut known: KnownArgs<'_> = match ev.args {
            Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get())
                .map_err(|e| self.err(offset, format!("bad args: {e}")))?,
            _ => KnownArgs::default(),
        };
        self.parse.replaced_surrogates +=
            u64::from(ev.replaced_surrogates + known.replaced_surrogates);
        cap_string(&mut ev.name, &mut self.parse);
        cap_string(&mut ev.cat, &mut self.parse);
        cap_string(&mut known.name, &mut self.parse);
        let replaced;
        let raw_args = match ev.args.map(RawValue::get) {
            Some(text) if text.len() > MAX_ARGS_BYTES => {
                self.parse.truncated_args += 1;
                replaced = format!("{{\"strato_truncated_args_bytes\":{}}}", text.len());
                Some(replaced.as_str())
            }
            other => other,
        };
        self.event_inner(&ev, raw_args, &known, offset)?;
        Ok(Some(used))
    }

    pub(super) fn event_lean(
        &mut self,
        bytes: &[u8],
        offset: u64,
        complete: bool,
    ) -> Result<Option<usize>> {
        let parsed = match self.parse_front::<RawEvent<'_, KnownArgs<'_>>>(bytes, offset, complete)
        {
            // The one grammatical event the lenient reading refuses here: `args` a bare number
            // serde cannot hold (`1e400`). The raw-args reading never refuses one.
            Err(_) if complete && json_lenient::is_lenient() => {
                return self.event_with_raw_args(bytes, offset, true)
            }
            other => other?,
        };
        let Some((mut ev, used)) = parsed else {
            return Ok(None);
        };
        if ev.ph.as_deref() == Some("C") {
            // Counter values are arbitrary keys of args: read this event again with its text.
            return self
                .event_with_raw_args(&bytes[..used], offset, true)
                .map(|_| Some(used));
        }
        self.parse.replaced_surrogates += u64::from(ev.replaced_surrogates);
        cap_string(&mut ev.name, &mut self.parse);
        cap_string(&mut ev.cat, &mut self.parse);
        if let Some(args) = ev.args.as_mut() {
            self.parse.replaced_surrogates += u64::from(args.replaced_surrogates);
            cap_string(&mut args.name, &mut self.parse);
        }
        let default = KnownArgs::default();
        let known = ev.args.as_ref().unwrap_or(&default);
        self.event_inner(&ev, None, known, offset)?;
        Ok(Some(used))
    }

    pub(super) fn event_inner<A>(
        &mut self,
        raw: &RawEvent<'_, A>,
        raw_args: Option<&str>,
        known: &KnownArgs<'_>,
        offset: u64,
    ) -> Result<()> {
        let Some(ph) = raw.ph.as_deref() else {
            return Ok(());
        };
        self.fused_rank(raw.pid.as_ref(), known.rank.as_ref());
        let ev = EventView {
            name: raw.name.as_deref(),
            cat: raw.cat.as_deref(),
            pid: raw.pid.as_ref(),
            tid: raw.tid.as_ref(),
            ts: raw.ts,
            dur: raw.dur,
            id: raw.id.as_ref(),
            args: raw_args,
        };
        match ph {
            "X" | "B" | "E" => self.span_event(ph, &ev, known, offset),
            "i" | "I" | "n" => self.instant_event(&ev, known, offset),
            "C" => self.counter_event(&ev, offset),
            "s" | "f" => self.flow_event(ph, &ev, offset),
            // A step is where one leg of a flow arrives and the next leaves: `s` -> `t` -> `f`
            // under one id is kept as its legs, `s` -> `t` and `t` -> `f`, each complete.
            "t" => {
                self.flow_event("f", &ev, offset)?;
                self.flow_event("s", &ev, offset)
            }
            "M" => {
                self.metadata_event(&ev, known);
                Ok(())
            }
            // Async (b/e), object (N/O/D), sample (P) and other phases are not modelled yet.
            _ => Ok(()),
        }
    }

    /// Stores the event's args when the options keep them: all, or with
    /// [`crate::ArgsScope::DeviceOps`] only those of device categories, with
    /// [`crate::ArgsScope::Dependencies`] those the dependency analyses read (the event's category
    /// was registered by [`Builder::category`] before this is called). An event whose args are
    /// not kept but mark it `is_eager` keeps [`TF_EAGER_ARGS`].
    pub(super) fn args_id(
        &mut self,
        ev: &EventView<'_>,
        known: &KnownArgs<'_>,
    ) -> Option<strato_trace::ArgsId> {
        let category = || self.categories.get(ev.cat.unwrap_or(""));
        let on_device = || category().is_some_and(|c| c.on_device);
        let kept = self.options.keep_args
            && match self.options.args_scope {
                crate::ArgsScope::All => true,
                crate::ArgsScope::DeviceOps => on_device(),
                crate::ArgsScope::Dependencies => category().is_some_and(|c| {
                    strato_trace::args_of::dependency_args(
                        c.level,
                        c.on_device,
                        ev.name.unwrap_or(""),
                    )
                }),
            };
        match ev.args {
            Some(raw) if kept => Some(self.trace.add_args(raw)),
            _ if known.is_eager => Some(self.trace.add_args(TF_EAGER_ARGS)),
            _ => None,
        }
    }
}
