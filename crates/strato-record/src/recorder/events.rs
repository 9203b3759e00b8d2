//! The recording functions a program calls: spans, instants, counters, tracks and metadata,
//! each pushed to the calling thread's buffer (registered on first use) or the session's.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use strato_trace::Level;

use super::clock::{gettid, now_ns};
use super::records::{extra, Ev, Meta, TrackRec};
use super::session::{
    intern, lock, Local, Session, ThreadBuf, ENABLED, GENERATION, LOCAL, STATE, UNTRACED,
};
use super::{StrRef, TrackRef};

/// Runs `f` with the calling thread's buffer and session, registering the thread on first use.
#[inline]
fn with_buf(f: impl FnOnce(&Session, &ThreadBuf)) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    LOCAL.with(|local| {
        let Ok(mut local) = local.try_borrow_mut() else {
            return;
        };
        let gen = GENERATION.load(Ordering::Acquire);
        if local.gen != gen {
            register(&mut local, gen);
        }
        if let (Some(session), Some(buf)) = (&local.session, &local.buf) {
            f(session, buf);
        }
    });
}

#[cold]
fn register(local: &mut Local, gen: u64) {
    local.gen = gen;
    local.buf = None;
    local.session = lock(&STATE).clone();
    let Some(session) = local.session.clone() else {
        return;
    };
    session.ensure_writer();
    let track = session.add_track(TrackRec::Thread {
        tid: gettid(),
        name: 0,
    });
    let buf = Arc::new(ThreadBuf {
        track,
        events: Mutex::new(Vec::with_capacity(1024)),
    });
    lock(&session.registry).push(Arc::clone(&buf));
    local.buf = Some(buf);
}

#[inline]
fn push(session: &Session, buf: &ThreadBuf, ev: Ev, ts: i64) {
    let untraced = UNTRACED.with(|c| c.replace(0));
    let mut events = lock(&buf.events);
    if untraced > 0 {
        events.push(Ev::Untraced {
            track: buf.track,
            ts,
            count: untraced,
        });
    }
    events.push(ev);
    if events.len() == session.config.flush_events {
        drop(events);
        session.wake_writer(false);
    }
}

/// Counts `n` book-keeping invocations on this thread that recorded nothing (profile-hook calls
/// for Python functions and unclassified builtins); written with the thread's next event.
#[inline]
pub fn add_untraced(n: u64) {
    UNTRACED.with(|c| c.set(c.get() + n));
}

/// Opens a span on the calling thread's track at `now_ns()`; returns the timestamp.
#[inline]
pub fn begin(level: Level, category: StrRef, name: StrRef) -> i64 {
    let ts = now_ns();
    with_buf(|s, b| {
        let ev = Ev::Begin {
            track: b.track,
            ts,
            level: level.code(),
            cat: category.0,
            name: name.0,
            extra: None,
        };
        push(s, b, ev, ts);
    });
    ts
}

/// [`begin`] with a correlation id and/or an args JSON object.
pub fn begin_with(
    level: Level,
    category: StrRef,
    name: StrRef,
    correlation: Option<u64>,
    args: Option<&str>,
) -> i64 {
    let ts = now_ns();
    with_buf(|s, b| {
        let ev = Ev::Begin {
            track: b.track,
            ts,
            level: level.code(),
            cat: category.0,
            name: name.0,
            extra: extra(correlation, args),
        };
        push(s, b, ev, ts);
    });
    ts
}

/// Closes the innermost open span of the calling thread's track at `now_ns()`.
#[inline]
pub fn end() -> i64 {
    let ts = now_ns();
    with_buf(|s, b| push(s, b, Ev::End { track: b.track, ts }, ts));
    ts
}

/// The calling thread's track (None when not recording).
pub fn thread_track() -> Option<TrackRef> {
    let mut out = None;
    with_buf(|_, b| out = Some(TrackRef(b.track)));
    out
}

/// The thread track of thread `tid` of this process, for events written on its behalf by
/// another thread (a framework profiler's events merged when it stops): the calling thread's
/// own track when `tid` is the caller, else one track per `tid` per session. A thread that
/// also records events itself gets its own track too; importers key thread tracks by
/// `(pid, tid)`, so both land on one.
pub fn thread_track_of(tid: i64) -> Option<TrackRef> {
    if tid == gettid() {
        return thread_track();
    }
    let s = session()?;
    let mut foreign = lock(&s.foreign_threads);
    if let Some(&id) = foreign.get(&tid) {
        return Some(TrackRef(id));
    }
    let id = s.add_track(TrackRec::Thread { tid, name: 0 });
    foreign.insert(tid, id);
    Some(TrackRef(id))
}

/// A complete span on any track of this session.
#[allow(clippy::too_many_arguments)]
pub fn span(
    track: TrackRef,
    start: i64,
    end: i64,
    level: Level,
    category: StrRef,
    name: StrRef,
    correlation: Option<u64>,
    args: Option<&str>,
) {
    with_buf(|s, b| {
        let ev = Ev::Span {
            track: track.0,
            start,
            end,
            level: level.code(),
            cat: category.0,
            name: name.0,
            extra: extra(correlation, args),
        };
        push(s, b, ev, start);
    });
}

/// A point event on any track of this session.
pub fn instant(
    track: TrackRef,
    ts: i64,
    level: Level,
    category: StrRef,
    name: StrRef,
    args: Option<&str>,
) {
    with_buf(|s, b| {
        let ev = Ev::Instant {
            track: track.0,
            ts,
            level: level.code(),
            cat: category.0,
            name: name.0,
            args: args.map(Into::into),
        };
        push(s, b, ev, ts);
    });
}

/// A counter sample on a counter track.
pub fn counter(track: TrackRef, ts: i64, value: f64) {
    with_buf(|s, b| {
        push(
            s,
            b,
            Ev::Counter {
                track: track.0,
                ts,
                value,
            },
            ts,
        )
    });
}

fn session() -> Option<Arc<Session>> {
    lock(&STATE).clone()
}

/// The track of a device queue (one per `(device, queue)` per session).
pub fn queue_track(device: i64, queue: i64, name: &str) -> Option<TrackRef> {
    let s = session()?;
    let mut queues = lock(&s.queues);
    if let Some(&id) = queues.get(&(device, queue)) {
        return Some(TrackRef(id));
    }
    let name = intern(name).0;
    let id = s.add_track(TrackRec::Queue {
        device,
        queue,
        name,
    });
    queues.insert((device, queue), id);
    Some(TrackRef(id))
}

/// The track of a counter (one per `(name, device)` per session; `device` -1 = the process).
pub fn counter_track(name: &str, unit: &str, device: i64) -> Option<TrackRef> {
    let s = session()?;
    let mut counters = lock(&s.counters);
    if let Some(&id) = counters.get(&(name.to_owned(), device)) {
        return Some(TrackRef(id));
    }
    let (n, u) = (intern(name).0, intern(unit).0);
    let id = s.add_track(TrackRec::Counter {
        name: n,
        unit: u,
        device,
    });
    counters.insert((name.to_owned(), device), id);
    Some(TrackRef(id))
}

fn push_meta(m: Meta) {
    if let Some(s) = session() {
        lock(&s.meta).push(m);
    }
}

/// Names this process in the profile.
pub fn set_process_name(name: &str) {
    push_meta(Meta::ProcessName(intern(name).0));
}

/// Names the calling thread's track.
pub fn set_thread_name(name: &str) {
    if let Some(track) = thread_track() {
        push_meta(Meta::TrackName(track.0, intern(name).0));
    }
}

/// Stores a JSON value under `key` in the rank's metadata.
pub fn metadata(key: &str, json: &str) {
    push_meta(Meta::Metadata(intern(key).0, json.to_owned()));
}

/// Describes a device (`props_json`: a JSON object).
pub fn device(index: i64, name: &str, props_json: &str) {
    push_meta(Meta::Device {
        index,
        name: intern(name).0,
        props: props_json.to_owned(),
    });
}

/// Records how a source clock maps to this file's clock (see the format doc).
pub fn clock_sync(
    name: &str,
    domain: &str,
    offset_ns: i64,
    drift_ppb: f64,
    anchor_ns: i64,
    error_ns: Option<i64>,
    method: &str,
) {
    push_meta(Meta::Clock {
        name: intern(name).0,
        domain: intern(domain).0,
        offset_ns,
        drift_ppb,
        anchor_ns,
        error_ns: error_ns.unwrap_or(-1),
        method: intern(method).0,
    });
}
