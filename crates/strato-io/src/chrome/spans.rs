//! What a kept event becomes: spans (`X` complete events, `B`/`E` pairs), instants (and the
//! per-device "memory allocated" counter fed by `[memory]` instants) and counter samples, with
//! the projection deciding, before anything is interned, which spans are kept.

use strato_trace::projection::KINETO_HOST_CATEGORIES;
use strato_trace::OptionalId;
use strato_trace::{checked_end, CounterSample, Instant, Ns, Span, TrackKind};

use super::placement::CategoryInfo;
use super::schema::{correlation_of, EventView, KnownArgs, Loose};
use super::Builder;
use crate::json_lenient::{self, Fields};
use crate::Result;

impl<'p, 's> Builder<'p, 's> {
    pub(super) fn span_event(
        &mut self,
        ph: &str,
        ev: &EventView<'_>,
        known: &KnownArgs<'_>,
        offset: u64,
    ) -> Result<()> {
        let cat = self.category(ev.cat.unwrap_or(""), known.level.as_deref());
        let track = if cat.on_device {
            // `args.device`/`args.stream` when they hold an index (`0`, `"0"`, `"cuda:0"`,
            // `"stream 7"`), else pid/tid: an unreadable arg never moves a kernel off its queue.
            let index = |arg: Option<&Loose>, fallback: Option<&Loose>| {
                arg.and_then(Loose::as_index)
                    .or_else(|| fallback.and_then(Loose::as_i64))
            };
            let device = index(known.device.as_ref(), ev.pid);
            let queue = index(known.stream.as_ref(), ev.tid);
            match (device, queue) {
                (Some(d), Some(q)) => self.device_track(d, q),
                _ => self.host_track(ev.pid, ev.tid),
            }
        } else if let Some((device, queue)) = self.device_like(ev, cat, known) {
            // Device work under a category no rule names (another accelerator's, a newer
            // profiler's): kept on its device queue as `Other`, and counted by category so
            // that no analysis reports the device idle without saying so.
            let name = strato_trace::unclassified_device_count_name(ev.cat.unwrap_or_default());
            self.notes().count(&name, 1);
            self.device_track(device, queue)
        } else {
            self.host_track(ev.pid, ev.tid)
        };
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let projected = self.options.projection.spans != crate::SpanProjection::All;
        if ph == "X" && projected {
            // Decided before the name is interned: a span left out costs nothing. Its times
            // are still checked below.
            let correlation = correlation_of(known);
            if !self.keeps_span(ev, cat, correlation) {
                return self.checked_span_times(ev, ts, offset).map(|_| ());
            }
        }
        let name = self.trace.intern(ev.name.unwrap_or(""));
        match ph {
            "B" => {
                let args = ev.args.map(str::to_owned);
                self.open_begins
                    .entry(track)
                    .or_default()
                    .push((ts, name, cat, args));
                return Ok(());
            }
            "E" => {
                let Some((start, name, cat, args)) =
                    self.open_begins.get_mut(&track).and_then(Vec::pop)
                else {
                    self.notes().count("unmatched_end_events", 1);
                    return Ok(());
                };
                let args = if self.options.keep_args {
                    args.map(|a| self.trace.add_args(&a))
                } else {
                    None
                };
                if ts < start {
                    self.notes().count("clamped_negative_durations", 1);
                }
                if projected && !self.keeps_span_named(self.trace.str(name), cat, None) {
                    return Ok(());
                }
                self.trace.spans.push(Span {
                    track,
                    start,
                    end: ts.max(start),
                    name,
                    category: cat.id,
                    level: cat.level,
                    correlation: OptionalId::NONE,
                    external_id: OptionalId::NONE,
                    args,
                });
                return Ok(());
            }
            _ => {}
        }
        let end = self.checked_span_times(ev, ts, offset)?;
        let correlation = correlation_of(known);
        let external_id = known
            .external_id
            .as_ref()
            .or(known.external_id_2021.as_ref())
            .and_then(Loose::as_i64)
            .map(|c| c as u64);
        let args = self.args_id(ev, known);
        self.trace.spans.push(Span {
            track,
            start: ts,
            end,
            name,
            category: cat.id,
            level: cat.level,
            correlation: correlation.into(),
            external_id: external_id.into(),
            args,
        });
        Ok(())
    }

    /// Where an event of an unrecognised category that looks like device work belongs:
    /// `(device, queue)` when its args name a `stream` (Kineto writes one only on device-side
    /// activity; the device is `args.device`, else the pid) or its pid/tid is already a device
    /// queue of this file (Kineto writes a device's events at pid = device, tid = stream).
    /// `None` for a recognised category or an event that does not look like device work.
    pub(super) fn device_like(
        &self,
        ev: &EventView<'_>,
        cat: CategoryInfo,
        known: &KnownArgs<'_>,
    ) -> Option<(i64, i64)> {
        if !cat.unrecognised {
            return None;
        }
        let pid = ev.pid.and_then(Loose::as_i64);
        let tid = ev.tid.and_then(Loose::as_i64);
        if let Some(queue) = known.stream.as_ref().and_then(Loose::as_index) {
            let device = known.device.as_ref().and_then(Loose::as_index).or(pid)?;
            return Some((device, queue));
        }
        let (pid, tid) = (pid?, tid?);
        self.known_device_track(pid, tid)?;
        Some((self.pid_rank(pid).1, tid))
    }

    /// The end of an `X` event (`ts + dur`), checked, with a missing `dur` read as 0 and a
    /// negative one clamped to 0 (both counted).
    pub(super) fn checked_span_times(
        &mut self,
        ev: &EventView<'_>,
        ts: Ns,
        offset: u64,
    ) -> Result<Ns> {
        let mut dur = match self.time(ev.dur) {
            Ok(Some(dur)) => dur,
            Err(e) => return Err(self.event_err(ev, offset, format!("bad dur: {e}"))),
            Ok(None) => {
                self.notes().count("missing_durations_read_as_0", 1);
                0
            }
        };
        if dur < 0 {
            dur = 0;
            self.notes().count("clamped_negative_durations", 1);
        }
        checked_end(ts, dur).map_err(|e| self.event_err(ev, offset, format!("end (ts + dur): {e}")))
    }

    /// Whether [`crate::ImportOptions::projection`] keeps this span.
    pub(super) fn keeps_span(
        &self,
        ev: &EventView<'_>,
        cat: CategoryInfo,
        correlation: Option<u64>,
    ) -> bool {
        self.keeps_span_named(ev.name.unwrap_or(""), cat, correlation)
    }

    pub(super) fn keeps_span_named(
        &self,
        name: &str,
        cat: CategoryInfo,
        correlation: Option<u64>,
    ) -> bool {
        match self.options.projection.spans {
            crate::SpanProjection::All => true,
            crate::SpanProjection::DeviceAndLaunches => {
                cat.on_device
                    || correlation.is_some()
                    || name.starts_with("ProfilerStep#")
                    || !KINETO_HOST_CATEGORIES.contains(&self.trace.str(cat.id))
            }
        }
    }

    pub(super) fn instant_event(
        &mut self,
        ev: &EventView<'_>,
        known: &KnownArgs<'_>,
        offset: u64,
    ) -> Result<()> {
        let cat = self.category(ev.cat.unwrap_or(""), known.level.as_deref());
        let track = self.host_track(ev.pid, ev.tid);
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let name_text = ev.name.unwrap_or("");
        if name_text == "[memory]" {
            if let (Some(device), Some(total)) = (
                known.memory_device.as_ref().and_then(Loose::as_i64),
                known.total_allocated.as_ref().and_then(Loose::as_f64),
            ) {
                let pid = ev.pid.and_then(Loose::as_i64).unwrap_or(0);
                let counter = self.memory_counter(pid, device);
                if self.options.projection.counters {
                    self.trace.counters.push(CounterSample {
                        track: counter,
                        ts,
                        value: total,
                    });
                }
            }
        }
        if !self.options.projection.instants {
            return Ok(());
        }
        let name = self.trace.intern(name_text);
        let args = self.args_id(ev, known);
        self.trace.instants.push(Instant {
            track,
            ts,
            name,
            category: cat.id,
            level: cat.level,
            args,
        });
        Ok(())
    }

    pub(super) fn counter_event(&mut self, ev: &EventView<'_>, offset: u64) -> Result<()> {
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let Some(raw) = ev.args else { return Ok(()) };
        // One series per numeric key, in key order (a duplicate key's last value); args that
        // are not an object hold none. A number beyond f64 (`1e400`, which Python reads as
        // infinity) is no sample: dropped and counted.
        let (fields, replaced) = Fields::parse(raw)
            .map(Fields::into_sorted)
            .unwrap_or_default();
        self.parse.replaced_surrogates += u64::from(replaced);
        let values: Vec<(String, f64)> = fields
            .into_iter()
            .filter_map(|(key, value)| {
                json_lenient::number(value).map(|n| (key, n.map_or_else(|f| f, |i| i as f64)))
            })
            .collect();
        let base = ev.name.unwrap_or("counter").to_owned();
        let pid = ev.pid.and_then(Loose::as_i64);
        let single = values.len() == 1;
        for (key, value) in values {
            let name = if single {
                base.clone()
            } else {
                format!("{base}.{key}")
            };
            let kind = TrackKind::Counter {
                pid,
                device: None,
                name,
                unit: String::new(),
            };
            let track = self.trace.track_for(&mut self.tracks, self.rank, kind);
            if !value.is_finite() {
                self.notes().count("counter_values_out_of_range", 1);
                continue;
            }
            if !self.options.projection.counters {
                continue;
            }
            self.trace.counters.push(CounterSample { track, ts, value });
        }
        Ok(())
    }
}
