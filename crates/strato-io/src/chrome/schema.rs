//! The Chrome-trace event as written, read leniently: the fields of one `traceEvents`
//! element ([`RawEvent`], viewed by the handlers as [`EventView`]), the few `args` fields the
//! importer itself interprets ([`KnownArgs`]: correlations, device/stream, TraceFuse's rank,
//! TensorFlow's `is_eager`) and [`Loose`], the value read where a number or a name is expected
//! (`"stream 7"`, `"cuda:0"`, `1e400`, an object `id`).
//!
//! This is where the schema quirks of Kineto (current and 2021 keys), TensorFlow's trace
//! viewer and generic Chrome traces are absorbed; nothing here touches the trace being built.

use std::borrow::Cow;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::json_lenient::{self, Key, LooseStr};

/// An event's launch correlation (`args.correlation`, or TensorFlow's `correlation_id`).
pub(super) fn correlation_of(known: &KnownArgs<'_>) -> Option<u64> {
    known
        .correlation
        .as_ref()
        .or(known.correlation_id.as_ref())
        .and_then(Loose::as_i64)
        .map(|c| c as u64)
}

/// One event as written; strings borrow from the chunk unless they contain escapes. `A` is
/// how `args` is read: as raw text when attributes are kept, else straight into [`KnownArgs`]
/// so the args are scanned once.
///
/// Read by hand ([`EventVisitor`]), not derived: any grammatical value is accepted in any field
/// (see [`crate::json_lenient`]), and a duplicate key keeps its last value, as Python's `json`
/// does.
pub(super) struct RawEvent<'a, A> {
    pub(super) ph: Option<Cow<'a, str>>,
    pub(super) name: Option<Cow<'a, str>>,
    pub(super) cat: Option<Cow<'a, str>>,
    pub(super) pid: Option<Loose>,
    pub(super) tid: Option<Loose>,
    pub(super) ts: Option<&'a RawValue>,
    pub(super) dur: Option<&'a RawValue>,
    /// `id`, or the Chrome format's `id2` (`{"local": ..}` / `{"global": ..}`) by its text.
    pub(super) id: Option<Loose>,
    pub(super) args: Option<A>,
    /// Lone surrogates replaced in the strings decoded (see [`crate::json_lenient`]).
    pub(super) replaced_surrogates: u32,
}

impl<A> Default for RawEvent<'_, A> {
    fn default() -> Self {
        RawEvent {
            ph: None,
            name: None,
            cat: None,
            pid: None,
            tid: None,
            ts: None,
            dur: None,
            id: None,
            args: None,
            replaced_surrogates: 0,
        }
    }
}

/// Takes a string field's text, counting the surrogates its decoding replaced.
pub(super) fn text_of<'a>(value: Option<LooseStr<'a>>, replaced: &mut u32) -> Option<Cow<'a, str>> {
    value.map(|v| {
        *replaced += v.replaced;
        v.text
    })
}

impl<'de, A: Deserialize<'de>> Deserialize<'de> for RawEvent<'de, A> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_map(EventVisitor(std::marker::PhantomData))
    }
}

pub(super) struct EventVisitor<A>(std::marker::PhantomData<A>);

impl<'de, A: Deserialize<'de>> Visitor<'de> for EventVisitor<A> {
    type Value = RawEvent<'de, A>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<M: MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<Self::Value, M::Error> {
        let mut ev = RawEvent::default();
        let mut id2 = None;
        let r = &mut ev.replaced_surrogates;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match &*key.0 {
                b"ph" => ev.ph = text_of(map.next_value()?, r),
                b"name" => ev.name = text_of(map.next_value()?, r),
                b"cat" => ev.cat = text_of(map.next_value()?, r),
                b"pid" => ev.pid = map.next_value()?,
                b"tid" => ev.tid = map.next_value()?,
                b"ts" => ev.ts = map.next_value()?,
                b"dur" => ev.dur = map.next_value()?,
                b"id" => ev.id = map.next_value()?,
                b"id2" => id2 = map.next_value()?,
                b"args" => ev.args = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        ev.id = ev.id.or(id2);
        Ok(ev)
    }
}

/// An event's fields as the handlers read them, whichever way `args` was parsed.
pub(super) struct EventView<'e> {
    pub(super) name: Option<&'e str>,
    pub(super) cat: Option<&'e str>,
    pub(super) pid: Option<&'e Loose>,
    pub(super) tid: Option<&'e Loose>,
    pub(super) ts: Option<&'e RawValue>,
    pub(super) dur: Option<&'e RawValue>,
    pub(super) id: Option<&'e Loose>,
    /// The args object's text, when attributes are kept.
    pub(super) args: Option<&'e str>,
}

/// The `args` fields the importer itself needs; everything else stays in the JSON text. Read
/// by hand like [`RawEvent`]; `args` that is not an object has none of them.
#[derive(Default, Clone)]
pub(super) struct KnownArgs<'a> {
    pub(super) correlation: Option<Loose>,
    /// TensorFlow trace viewer's name for the launch correlation.
    pub(super) correlation_id: Option<Loose>,
    /// `External id` (2021: `external id`).
    pub(super) external_id: Option<Loose>,
    pub(super) external_id_2021: Option<Loose>,
    pub(super) device: Option<Loose>,
    pub(super) stream: Option<Loose>,
    pub(super) name: Option<Cow<'a, str>>,
    pub(super) sort_index: Option<Loose>,
    pub(super) labels: Option<Cow<'a, str>>,
    /// `Device Id` of a `[memory]` instant.
    pub(super) memory_device: Option<Loose>,
    /// `Total Allocated` of a `[memory]` instant.
    pub(super) total_allocated: Option<Loose>,
    /// TraceFuse's rank of an event of a merged multi-rank file (see [`Builder::fused_rank`]).
    pub(super) rank: Option<Loose>,
    /// The level stratoscope's Chrome export writes on every event (`args.level`, a
    /// [`strato_trace::Level`] name): read for a category no level rule names
    /// ([`super::Builder::category`]).
    pub(super) level: Option<Cow<'a, str>>,
    /// TensorFlow trace viewer's mark of an eager op: the trace viewer classification
    /// ([`crate::tf`]) reads it, so it survives args that are not kept ([`TF_EAGER_ARGS`]).
    pub(super) is_eager: bool,
    /// Lone surrogates replaced in the strings decoded.
    pub(super) replaced_surrogates: u32,
}

impl<'de> Deserialize<'de> for KnownArgs<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(KnownArgsVisitor)
    }
}

pub(super) struct KnownArgsVisitor;

impl<'de> Visitor<'de> for KnownArgsVisitor {
    type Value = KnownArgs<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an args object")
    }

    fn visit_map<M: MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<Self::Value, M::Error> {
        let mut a = KnownArgs::default();
        let r = &mut a.replaced_surrogates;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match &*key.0 {
                b"correlation" => a.correlation = map.next_value()?,
                b"correlation_id" => a.correlation_id = map.next_value()?,
                b"External id" => a.external_id = map.next_value()?,
                b"external id" => a.external_id_2021 = map.next_value()?,
                b"device" => a.device = map.next_value()?,
                b"stream" => a.stream = map.next_value()?,
                b"name" => a.name = text_of(map.next_value()?, r),
                b"sort_index" => a.sort_index = map.next_value()?,
                b"labels" => a.labels = text_of(map.next_value()?, r),
                b"Device Id" => a.memory_device = map.next_value()?,
                b"Total Allocated" => a.total_allocated = map.next_value()?,
                b"rank" => a.rank = map.next_value()?,
                b"level" => a.level = text_of(map.next_value()?, r),
                b"is_eager" => {
                    map.next_value::<IgnoredAny>()?;
                    a.is_eager = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(a)
    }

    // `args` that is not an object (an array, a string, a number, a literal) carries none of
    // the fields read here; its text is still kept verbatim when args are kept.
    fn visit_seq<S: de::SeqAccess<'de>>(
        self,
        mut seq: S,
    ) -> std::result::Result<Self::Value, S::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(KnownArgs::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
}

/// The args an event marked `is_eager` keeps when its own args are not kept: the one field the
/// trace viewer classification reads from args (the others it reads are kept as correlations).
/// Without it an import with args off classified eager TensorFlow ops as host code, so
/// `breakdown`/`kernels` on the JSON disagreed with the same commands on its stored profile.
pub(super) const TF_EAGER_ARGS: &str = r#"{"is_eager":true}"#;

/// A JSON value read leniently where a number or a name is expected: integers, floats (of any
/// size: `1e400` is infinite, never an error), or text: a string's value (`"stream 7"` gives 7
/// as an integer), or the text of any other value as written (an array or object `id`).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Loose {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Loose {
    pub(super) fn as_i64(&self) -> Option<i64> {
        match self {
            Loose::Int(v) => Some(*v),
            Loose::Float(v) if v.fract() == 0.0 && v.abs() < 9.0e18 => Some(*v as i64),
            Loose::Float(_) => None,
            Loose::Text(t) => parse_int_text(t),
        }
    }

    /// A device or stream index: an integer, or text ending in one after a name and a `:`,
    /// space or `#` (`"cuda:0"`, `"GPU 1"`, `"hip:2"`, `"stream 7"`, `"stream#7"`).
    pub(super) fn as_index(&self) -> Option<i64> {
        self.as_i64().or_else(|| match self {
            Loose::Text(t) => {
                let t = t.trim();
                let cut = t.rfind([':', ' ', '#'])?;
                let (name, number) = (&t[..cut], &t[cut + 1..]);
                let named = name
                    .chars()
                    .all(|c| c.is_ascii_alphabetic() || "/_: ".contains(c));
                if named && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
                    number.parse().ok()
                } else {
                    None
                }
            }
            _ => None,
        })
    }

    pub(super) fn as_f64(&self) -> Option<f64> {
        match self {
            Loose::Int(v) => Some(*v as f64),
            Loose::Float(v) => Some(*v),
            Loose::Text(t) => t.trim().parse().ok(),
        }
    }

    pub(super) fn text(&self) -> String {
        match self {
            Loose::Int(v) => v.to_string(),
            Loose::Float(v) => v.to_string(),
            Loose::Text(t) => t.clone(),
        }
    }

    /// Reads one JSON value's raw text (grammatical).
    pub(super) fn from_raw(raw: &str) -> Loose {
        match json_lenient::trim_json(raw) {
            "true" => Loose::Int(1),
            "false" => Loose::Int(0),
            "null" => Loose::Text(String::new()),
            t => match json_lenient::number(t) {
                Some(Ok(v)) => Loose::Int(v),
                Some(Err(v)) => Loose::Float(v),
                None => {
                    let text = LooseStr::from_raw(t);
                    json_lenient::note_replaced(text.replaced);
                    Loose::Text(text.text.into_owned())
                }
            },
        }
    }
}

pub(super) fn parse_int_text(text: &str) -> Option<i64> {
    let t = text.trim();
    t.parse::<i64>().ok().or_else(|| {
        t.strip_prefix("stream ")
            .and_then(|n| n.trim().parse().ok())
    })
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        if json_lenient::is_lenient() {
            // Through the raw text: no number is out of range, no value of the wrong type.
            let raw = <&'de RawValue>::deserialize(deserializer)?;
            return Ok(Loose::from_raw(raw.get()));
        }
        // Fast: scalars serde can hold (an array, an object or a number beyond f64 fails the
        // event, which is then read again leniently, see `json_lenient`).
        struct LooseVisitor;
        impl<'de> Visitor<'de> for LooseVisitor {
            type Value = Loose;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Loose, E> {
                Ok(Loose::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Loose, E> {
                Ok(i64::try_from(v).map_or(Loose::Float(v as f64), Loose::Int))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Loose, E> {
                Ok(Loose::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Loose, E> {
                Ok(Loose::Text(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Loose, E> {
                Ok(Loose::Int(i64::from(v)))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Loose, E> {
                Ok(Loose::Text(String::new()))
            }
        }
        deserializer.deserialize_any(LooseVisitor)
    }
}
