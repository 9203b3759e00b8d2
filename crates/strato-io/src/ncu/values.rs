//! Metric values and units: ncu's numbers (thousands separators, `n/a`, integers kept exact),
//! units scaled to base units (time to ns, bytes, rates), `(x, y, z)` dimensions.

use serde_json::{Map, Value};
use strato_trace::parse_decimal_to_ns;

/// A parsed number: integers stay exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(super) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    pub(super) fn as_i64(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i),
            Num::Float(_) => None,
        }
    }

    pub(super) fn add(self, other: Num) -> Num {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a
                .checked_add(b)
                .map_or(Num::Float(a as f64 + b as f64), Num::Int),
            (a, b) => Num::Float(a.as_f64() + b.as_f64()),
        }
    }

    pub(super) fn to_json(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

/// Removes thousands separators when they group digits by three (`53,261,312`); `None` when
/// the text is not a plain decimal number.
pub(super) fn clean_number(text: &str) -> Option<String> {
    let text = text.trim();
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    if body.is_empty()
        || !body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b',' | b'.' | b'e' | b'E' | b'-' | b'+'))
        || !body
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || b == b'.')
    {
        return None;
    }
    if body.contains(',') {
        let int_end = body.find(['.', 'e', 'E']).unwrap_or(body.len());
        if body[int_end..].contains(',') {
            return None;
        }
        let mut groups = body[..int_end].split(',');
        let first = groups.next()?;
        if first.is_empty() || first.len() > 3 || groups.any(|g| g.len() != 3) {
            return None;
        }
    }
    Some(text.replace(',', ""))
}

/// Parses a metric value: integers exactly, decimals as `f64`.
pub(super) fn parse_number(text: &str) -> Option<Num> {
    let cleaned = clean_number(text)?;
    if let Ok(i) = cleaned.parse::<i64>() {
        return Some(Num::Int(i));
    }
    cleaned
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Num::Float)
}

/// Unit normalisation: `(normalised unit, multiplier)` for times (to ns) and sizes (to bytes,
/// ncu's decimal prefixes; binary ones when written `Kibyte`...).
pub(super) fn unit_scale(unit: &str) -> Option<(&'static str, i64)> {
    Some(match unit {
        "ns" | "nsecond" => ("ns", 1),
        "us" | "usecond" => ("ns", 1_000),
        "ms" | "msecond" => ("ns", 1_000_000),
        "s" | "second" => ("ns", 1_000_000_000),
        "byte" => ("byte", 1),
        "Kbyte" => ("byte", 1_000),
        "Mbyte" => ("byte", 1_000_000),
        "Gbyte" => ("byte", 1_000_000_000),
        "Tbyte" => ("byte", 1_000_000_000_000),
        "Kibyte" => ("byte", 1 << 10),
        "Mibyte" => ("byte", 1 << 20),
        "Gibyte" => ("byte", 1 << 30),
        "Tibyte" => ("byte", 1 << 40),
        _ => return None,
    })
}

/// One metric after normalisation.
pub(super) struct Metric {
    pub(super) json: Value,
    pub(super) number: Option<Num>,
    pub(super) unit: String,
}

/// Normalises a value with its unit: times to ns, sizes to bytes (exact decimal scaling), the
/// original value and unit kept as `source_value` / `source_unit` when they changed.
pub(super) fn normalise(value: &str, unit: &str, section: Option<&str>) -> Metric {
    let mut object = Map::new();
    let number = parse_number(value);
    let (out_unit, number) = match (number, unit_scale(unit)) {
        (Some(n), Some((to, scale))) => {
            if to != unit {
                object.insert("source_unit".into(), Value::String(unit.to_owned()));
            }
            if scale == 1 {
                (to.to_owned(), Some(n))
            } else {
                object.insert("source_value".into(), n.to_json());
                let cleaned = clean_number(value).unwrap_or_default();
                let scaled = parse_decimal_to_ns(&cleaned, scale)
                    .map(Num::Int)
                    .unwrap_or(Num::Float(n.as_f64() * scale as f64));
                (to.to_owned(), Some(scaled))
            }
        }
        (n, _) => (unit.to_owned(), n),
    };
    let value_json = match number {
        Some(n) => n.to_json(),
        None => Value::String(value.to_owned()),
    };
    object.insert("value".into(), value_json);
    object.insert("unit".into(), Value::String(out_unit.clone()));
    if let Some(section) = section.filter(|s| !s.is_empty()) {
        object.insert("section".into(), Value::String(section.to_owned()));
    }
    Metric {
        json: Value::Object(object),
        number,
        unit: out_unit,
    }
}

/// `(32, 32, 1)` -> `[32, 32, 1]`.
pub(super) fn parse_dim3(text: &str) -> Option<Value> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    let dims: Option<Vec<Value>> = inner
        .split(',')
        .map(|p| p.trim().parse::<i64>().ok().map(Value::from))
        .collect();
    dims.filter(|d| !d.is_empty()).map(Value::Array)
}

pub(super) fn parse_int(text: &str) -> Option<i64> {
    parse_number(text).and_then(Num::as_i64)
}
