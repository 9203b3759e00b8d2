//! One profiled launch: everything read about one launch ID across its rows (long form) or its
//! one row (wide form), and the args and roofline inputs derived from its metrics.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::columns::{nonempty, Columns};
use super::values::{normalise, parse_dim3, parse_int, parse_number, Num};

/// Everything read about one launch ID.
pub(super) struct Launch {
    pub(super) id: i64,
    pub(super) kernel: String,
    pub(super) pid: Option<i64>,
    pub(super) process_name: Option<String>,
    pub(super) host: Option<String>,
    pub(super) device: Option<i64>,
    pub(super) stream: Option<i64>,
    pub(super) cc: Option<String>,
    pub(super) args: Map<String, Value>,
    pub(super) metrics: Map<String, Value>,
    /// Normalised numeric values and units by metric name (first occurrence), for derivations.
    pub(super) numbers: FxHashMap<String, (Num, String)>,
    /// Section-qualified numbers (`Section/Label`) for the section-label aliases.
    pub(super) labelled: FxHashMap<String, (Num, String)>,
    /// Text values by metric name (for device attributes of the wide form).
    pub(super) texts: FxHashMap<String, String>,
    pub(super) rules: Vec<Value>,
}

impl Launch {
    pub(super) fn new(id: i64, record: &csv::ByteRecord, c: &Columns) -> Self {
        let mut args = Map::new();
        args.insert("id".into(), Value::from(id));
        let block = nonempty(record, c.block);
        if let Some(v) = block.as_deref().and_then(parse_dim3) {
            args.insert("block".into(), v);
        }
        if let Some(v) = nonempty(record, c.grid).as_deref().and_then(parse_dim3) {
            args.insert("grid".into(), v);
        }
        let cc = nonempty(record, c.cc);
        if let Some(cc) = &cc {
            args.insert("cc".into(), Value::String(cc.clone()));
        }
        let context = nonempty(record, c.context).as_deref().and_then(parse_int);
        if let Some(ctx) = context {
            args.insert("context".into(), Value::from(ctx));
        }
        let stream = nonempty(record, c.stream).as_deref().and_then(parse_int);
        if let Some(s) = stream {
            args.insert("stream".into(), Value::from(s));
        }
        let device = nonempty(record, c.device).as_deref().and_then(parse_int);
        if let Some(d) = device {
            args.insert("device".into(), Value::from(d));
        }
        for (i, name) in &c.extra {
            if let Some(v) = nonempty(record, Some(*i)) {
                let key = name.to_ascii_lowercase().replace(' ', "_");
                args.insert(key, Value::String(v));
            }
        }
        Launch {
            id,
            kernel: nonempty(record, c.kernel).unwrap_or_default(),
            pid: nonempty(record, c.pid).as_deref().and_then(parse_int),
            process_name: nonempty(record, c.process_name),
            host: nonempty(record, c.host),
            device,
            stream,
            cc,
            args,
            metrics: Map::new(),
            numbers: FxHashMap::default(),
            labelled: FxHashMap::default(),
            texts: FxHashMap::default(),
            rules: Vec::new(),
        }
    }

    /// One row of the details long form.
    pub(super) fn add_long_row(&mut self, record: &csv::ByteRecord, c: &Columns) {
        let section = nonempty(record, c.section);
        if let Some(name) = nonempty(record, c.metric_name) {
            if let Some(value) = nonempty(record, c.metric_value) {
                let unit = nonempty(record, c.metric_unit).unwrap_or_default();
                self.add_metric(&name, &value, &unit, section.as_deref());
            }
        }
        let mut rule = Map::new();
        for (i, key) in &c.rules {
            if let Some(v) = nonempty(record, Some(*i)) {
                let value = match parse_number(&v) {
                    Some(n) if key == "speedup" => n.to_json(),
                    _ => Value::String(v),
                };
                rule.insert(key.clone(), value);
            }
        }
        if !rule.is_empty() {
            if let Some(section) = section {
                rule.insert("section".into(), Value::String(section));
            }
            let rule = Value::Object(rule);
            if !self.rules.contains(&rule) {
                self.rules.push(rule);
            }
        }
    }

    /// One row of the `--page raw` wide form.
    pub(super) fn add_wide_row(
        &mut self,
        record: &csv::ByteRecord,
        c: &Columns,
        units: Option<&[String]>,
    ) {
        for (i, name) in &c.metrics {
            if let Some(value) = nonempty(record, Some(*i)) {
                let unit = units
                    .and_then(|u| u.get(*i))
                    .map_or("", String::as_str)
                    .to_owned();
                self.add_metric(name, &value, &unit, None);
            }
        }
    }

    pub(super) fn add_metric(
        &mut self,
        name: &str,
        value: &str,
        unit: &str,
        section: Option<&str>,
    ) {
        let metric = normalise(value, unit, section);
        if let Some(n) = metric.number {
            self.numbers
                .entry(name.to_owned())
                .or_insert((n, metric.unit.clone()));
            if let Some(s) = section {
                self.labelled
                    .entry(format!("{s}/{name}"))
                    .or_insert((n, metric.unit.clone()));
            }
        } else {
            self.texts
                .entry(name.to_owned())
                .or_insert_with(|| value.to_owned());
        }
        let mut key = name.to_owned();
        if self.metrics.contains_key(&key) {
            key = match section {
                Some(s) => format!("{s}/{name}"),
                None => name.to_owned(),
            };
            let mut n = 2;
            while self.metrics.contains_key(&key) {
                key = format!("{name}#{n}");
                n += 1;
            }
        }
        self.metrics.insert(key, metric.json);
    }

    /// A metric's normalised number when its unit is `unit` (any unit when `None`).
    pub(super) fn number(&self, name: &str, unit: Option<&str>) -> Option<Num> {
        let (n, u) = self.numbers.get(name)?;
        unit.is_none_or(|want| want == u).then_some(*n)
    }

    /// The derived roofline inputs; a key is absent when its inputs are.
    pub(super) fn derived(&self) -> Map<String, Value> {
        let mut out = Map::new();
        // FLOPs: per precision when all three counters of it are present.
        let mut total: Option<Num> = None;
        let mut partial = false;
        for (prefix, key) in [("f", "fp32"), ("d", "fp64"), ("h", "fp16")] {
            let get = |op: &str| {
                self.number(
                    &format!("sm__sass_thread_inst_executed_op_{prefix}{op}_pred_on.sum"),
                    None,
                )
            };
            let (add, mul, fma) = (get("add"), get("mul"), get("fma"));
            match (add, mul, fma) {
                (Some(a), Some(m), Some(f)) => {
                    let flops = a.add(m).add(f).add(f);
                    out.insert(format!("flops_{key}"), flops.to_json());
                    total = Some(total.map_or(flops, |t| t.add(flops)));
                }
                (None, None, None) => {}
                _ => partial = true,
            }
        }
        if let (Some(total), false) = (total, partial) {
            out.insert("flops".into(), total.to_json());
        }
        // DRAM bytes.
        let bytes = |names: [&str; 2]| names.into_iter().find_map(|n| self.number(n, Some("byte")));
        let read = bytes(["dram__bytes_read.sum", "dram__bytes_op_read.sum"]);
        let write = bytes(["dram__bytes_write.sum", "dram__bytes_op_write.sum"]);
        let dram = match (read, write) {
            (Some(r), Some(w)) => Some(r.add(w)),
            _ => self.number("dram__bytes.sum", Some("byte")),
        };
        if let Some(d) = dram {
            out.insert("dram_bytes".into(), d.to_json());
        }
        // Whole nanoseconds as an integer (a duration outside the valid time range is refused
        // by the builder before these args are kept).
        if let Some(d) = self.duration_ns() {
            out.insert("duration_ns".into(), Value::from(d as i64));
        }
        let occupancy = self
            .number("sm__warps_active.avg.pct_of_peak_sustained_active", None)
            .or_else(|| self.labelled_number("Occupancy/Achieved Occupancy", "%"));
        if let Some(o) = occupancy {
            out.insert("occupancy_pct".into(), o.to_json());
        }
        out
    }

    pub(super) fn labelled_number(&self, key: &str, unit: &str) -> Option<Num> {
        let (n, u) = self.labelled.get(key)?;
        (u == unit).then_some(*n)
    }

    /// `gpu__time_duration.sum` in ns (or the Speed Of Light section's `Duration`, which is
    /// that metric under its display label); `None` when absent or not a time. The number is
    /// exact (not saturated): see [`Builder::push`] for the range check.
    pub(super) fn duration_ns(&self) -> Option<f64> {
        let n = self
            .number("gpu__time_duration.sum", Some("ns"))
            .or_else(|| self.labelled_number("GPU Speed Of Light Throughput/Duration", "ns"))
            .or_else(|| self.labelled_number("GPU Speed Of Light/Duration", "ns"))?;
        Some(match n {
            Num::Int(i) => i as f64,
            Num::Float(f) => f.round(),
        })
    }

    /// True when the launch has a duration metric that is not a time in ns (unparseable text
    /// or another unit).
    pub(super) fn has_unusable_duration(&self) -> bool {
        ["gpu__time_duration.sum", "Duration"]
            .iter()
            .any(|k| self.texts.contains_key(*k) || self.numbers.contains_key(*k))
    }
}
