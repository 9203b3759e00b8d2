//! What the buffers hold before the writer takes them: events ([`Ev`]), track definitions
//! ([`TrackRec`]) and metadata ([`Meta`]), and how each is encoded into a chunk.

use crate::format::{tag, Enc, FLAG_ARGS, FLAG_CORR};

#[derive(Debug)]
pub(super) enum Ev {
    Begin {
        track: u32,
        ts: i64,
        level: u8,
        cat: u32,
        name: u32,
        extra: Option<Box<Extra>>,
    },
    End {
        track: u32,
        ts: i64,
    },
    Span {
        track: u32,
        start: i64,
        end: i64,
        level: u8,
        cat: u32,
        name: u32,
        extra: Option<Box<Extra>>,
    },
    Instant {
        track: u32,
        ts: i64,
        level: u8,
        cat: u32,
        name: u32,
        args: Option<Box<str>>,
    },
    Counter {
        track: u32,
        ts: i64,
        value: f64,
    },
    Untraced {
        track: u32,
        ts: i64,
        count: u64,
    },
    Start {
        ts: i64,
        level: u64,
    },
    Stop {
        ts: i64,
    },
}

#[derive(Debug)]
pub(super) struct Extra {
    corr: Option<u64>,
    args: Option<Box<str>>,
}

pub(super) fn extra(corr: Option<u64>, args: Option<&str>) -> Option<Box<Extra>> {
    if corr.is_none() && args.is_none() {
        None
    } else {
        Some(Box::new(Extra {
            corr,
            args: args.map(Into::into),
        }))
    }
}

#[derive(Debug)]
pub(super) enum TrackRec {
    Thread { tid: i64, name: u32 },
    Queue { device: i64, queue: i64, name: u32 },
    Counter { name: u32, unit: u32, device: i64 },
}

#[derive(Debug)]
pub(super) enum Meta {
    ProcessName(u32),
    TrackName(u32, u32),
    Metadata(u32, String),
    Clock {
        name: u32,
        domain: u32,
        offset_ns: i64,
        drift_ppb: f64,
        anchor_ns: i64,
        error_ns: i64,
        method: u32,
    },
    Device {
        index: i64,
        name: u32,
        props: String,
    },
}

pub(super) fn encode_meta(enc: &mut Enc, m: Meta) {
    match m {
        Meta::ProcessName(name) => {
            enc.u8(tag::PROCESS_NAME);
            enc.uv(u64::from(name));
        }
        Meta::TrackName(track, name) => {
            enc.u8(tag::TRACK_NAME);
            enc.uv(u64::from(track));
            enc.uv(u64::from(name));
        }
        Meta::Metadata(key, json) => {
            enc.u8(tag::METADATA);
            enc.uv(u64::from(key));
            enc.text(&json);
        }
        Meta::Clock {
            name,
            domain,
            offset_ns,
            drift_ppb,
            anchor_ns,
            error_ns,
            method,
        } => {
            enc.u8(tag::CLOCK);
            enc.uv(u64::from(name));
            enc.uv(u64::from(domain));
            enc.sv(offset_ns);
            enc.f64(drift_ppb);
            enc.sv(anchor_ns);
            enc.sv(error_ns);
            enc.uv(u64::from(method));
        }
        Meta::Device { index, name, props } => {
            enc.u8(tag::DEVICE);
            enc.sv(index);
            enc.uv(u64::from(name));
            enc.text(&props);
        }
    }
}

fn encode_flags(enc: &mut Enc, extra: &Option<Box<Extra>>) {
    match extra {
        None => enc.u8(0),
        Some(x) => {
            let mut flags = 0;
            if x.corr.is_some() {
                flags |= FLAG_CORR;
            }
            if x.args.is_some() {
                flags |= FLAG_ARGS;
            }
            enc.u8(flags);
            if let Some(c) = x.corr {
                enc.uv(c);
            }
            if let Some(a) = &x.args {
                enc.text(a);
            }
        }
    }
}

pub(super) fn encode_event(enc: &mut Enc, ev: &Ev) {
    match ev {
        Ev::Begin {
            track,
            ts,
            level,
            cat,
            name,
            extra,
        } => {
            enc.u8(tag::BEGIN);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.u8(*level);
            enc.uv(u64::from(*cat));
            enc.uv(u64::from(*name));
            encode_flags(enc, extra);
        }
        Ev::End { track, ts } => {
            enc.u8(tag::END);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
        }
        Ev::Span {
            track,
            start,
            end,
            level,
            cat,
            name,
            extra,
        } => {
            enc.u8(tag::SPAN);
            enc.uv(u64::from(*track));
            enc.ts(*start);
            enc.uv(end.saturating_sub(*start).max(0) as u64);
            enc.u8(*level);
            enc.uv(u64::from(*cat));
            enc.uv(u64::from(*name));
            encode_flags(enc, extra);
        }
        Ev::Instant {
            track,
            ts,
            level,
            cat,
            name,
            args,
        } => {
            enc.u8(tag::INSTANT);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.u8(*level);
            enc.uv(u64::from(*cat));
            enc.uv(u64::from(*name));
            match args {
                None => enc.u8(0),
                Some(a) => {
                    enc.u8(FLAG_ARGS);
                    enc.text(a);
                }
            }
        }
        Ev::Counter { track, ts, value } => {
            enc.u8(tag::COUNTER);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.f64(*value);
        }
        Ev::Untraced { track, ts, count } => {
            enc.u8(tag::UNTRACED);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.uv(*count);
        }
        Ev::Start { ts, level } => {
            enc.u8(tag::START);
            enc.ts(*ts);
            enc.uv(*level);
        }
        Ev::Stop { ts } => {
            enc.u8(tag::STOP);
            enc.ts(*ts);
        }
    }
}
