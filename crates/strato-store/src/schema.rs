//! The table definitions of a profile directory: one [`TableDef`] per Parquet file, the single
//! source of truth for the writer's Arrow schemas and the reader's column checks. The
//! human-readable version is `docs/profile-format.md`; keep the two in step.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The storage type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    U32,
    I64,
    U64,
    F64,
    /// Plain UTF-8 text.
    Str,
    /// Dictionary-encoded UTF-8 text (`Dictionary(Int32, Utf8)`): names, categories, levels.
    Dict,
}

impl Ty {
    /// The Arrow type the writer uses.
    pub(crate) fn arrow(self) -> DataType {
        match self {
            Ty::U32 => DataType::UInt32,
            Ty::I64 => DataType::Int64,
            Ty::U64 => DataType::UInt64,
            Ty::F64 => DataType::Float64,
            Ty::Str => DataType::Utf8,
            Ty::Dict => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        }
    }

    /// True when the reader can decode a column of type `found` as this type: text columns
    /// may be plain or dictionary-encoded (a table rewritten by another engine may change
    /// that); numbers must match exactly.
    pub(crate) fn accepts(self, found: &DataType) -> bool {
        match self {
            Ty::Str | Ty::Dict => *found == DataType::Utf8 || *found == Ty::Dict.arrow(),
            _ => *found == self.arrow(),
        }
    }
}

/// One column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col {
    pub name: &'static str,
    pub ty: Ty,
    pub nullable: bool,
    /// Derived for convenience (resolved from other tables); the writer fills it, the reader
    /// ignores it.
    pub derived: bool,
    /// Added after schema version 1 was first written: profiles written before may lack it,
    /// and the reader takes its absence as all nulls.
    pub may_be_absent: bool,
}

const fn col(name: &'static str, ty: Ty) -> Col {
    Col {
        name,
        ty,
        nullable: false,
        derived: false,
        may_be_absent: false,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Col {
    Col {
        name,
        ty,
        nullable: true,
        derived: false,
        may_be_absent: false,
    }
}

/// A nullable column added later (see [`Col::may_be_absent`]).
const fn added(name: &'static str, ty: Ty) -> Col {
    Col {
        name,
        ty,
        nullable: true,
        derived: false,
        may_be_absent: true,
    }
}

const fn derived(name: &'static str, ty: Ty, nullable: bool) -> Col {
    Col {
        name,
        ty,
        nullable,
        derived: true,
        may_be_absent: false,
    }
}

/// `head` then `tail`, for a table whose columns end with a shared run. `N` must be the sum of
/// their lengths (checked when the constant is evaluated).
const fn concat<const N: usize>(head: &[Col], tail: &[Col]) -> [Col; N] {
    assert!(
        head.len() + tail.len() == N,
        "N is not the number of columns"
    );
    let mut out = [col("", Ty::U32); N];
    let mut i = 0;
    while i < N {
        out[i] = if i < head.len() {
            head[i]
        } else {
            tail[i - head.len()]
        };
        i += 1;
    }
    out
}

/// One table: `<name>.parquet`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableDef {
    pub name: &'static str,
    pub columns: &'static [Col],
}

impl TableDef {
    /// The file name inside the profile directory.
    pub(crate) fn file(&self) -> String {
        format!("{}.parquet", self.name)
    }

    /// The Arrow schema the writer uses.
    pub(crate) fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(c.name, c.ty.arrow(), c.nullable))
                .collect::<Vec<_>>(),
        ))
    }
}

use Ty::*;

pub(crate) const STRINGS: TableDef = TableDef {
    name: "strings",
    columns: &[col("id", U32), col("text", Str)],
};

pub(crate) const ARGS: TableDef = TableDef {
    name: "args",
    columns: &[col("id", U32), col("json", Str)],
};

pub(crate) const RANKS: TableDef = TableDef {
    name: "ranks",
    columns: &[
        col("id", U32),
        opt("rank", I64),
        opt("world_size", I64),
        col("source", Str),
        col("format", Str),
        opt("host", Str),
        opt("metadata_json", Str),
        added("import_notes_json", Str),
    ],
};

pub(crate) const PROCESSES: TableDef = TableDef {
    name: "processes",
    columns: &[
        col("rank", U32),
        col("pid", I64),
        opt("name", Str),
        opt("labels", Str),
    ],
};

pub(crate) const TRACKS: TableDef = TableDef {
    name: "tracks",
    columns: &[
        col("id", U32),
        col("rank", U32),
        col("kind", Dict),
        opt("pid", I64),
        opt("tid", I64),
        opt("device", I64),
        opt("queue", I64),
        opt("counter_name", Str),
        opt("counter_unit", Str),
        opt("custom_group", Str),
        opt("custom_name", Str),
        opt("name", Str),
        opt("sort_index", I64),
    ],
};

/// Where an event's track is, the last columns of `spans` and `instants`: derived from
/// `tracks` for convenience.
const TRACK_LOCATION: [Col; 5] = [
    derived("rank", U32, false),
    derived("pid", I64, true),
    derived("tid", I64, true),
    derived("device", I64, true),
    derived("queue", I64, true),
];

pub(crate) const SPANS: TableDef = TableDef {
    name: "spans",
    columns: &concat::<16>(
        &[
            col("id", U32),
            col("track", U32),
            col("start_ns", I64),
            col("end_ns", I64),
            derived("dur_ns", I64, false),
            col("name", Dict),
            col("category", Dict),
            col("level", Dict),
            opt("correlation", U64),
            opt("external_id", U64),
            opt("args_id", U32),
        ],
        &TRACK_LOCATION,
    ),
};

pub(crate) const INSTANTS: TableDef = TableDef {
    name: "instants",
    columns: &concat::<12>(
        &[
            col("id", U32),
            col("track", U32),
            col("ts_ns", I64),
            col("name", Dict),
            col("category", Dict),
            col("level", Dict),
            opt("args_id", U32),
        ],
        &TRACK_LOCATION,
    ),
};

pub(crate) const COUNTERS: TableDef = TableDef {
    name: "counters",
    columns: &[
        col("track", U32),
        col("ts_ns", I64),
        col("value", F64),
        derived("name", Dict, true),
        derived("unit", Dict, true),
        derived("rank", U32, false),
        derived("pid", I64, true),
        derived("device", I64, true),
    ],
};

pub(crate) const FLOWS: TableDef = TableDef {
    name: "flows",
    columns: &[
        col("id", U64),
        col("category", Dict),
        opt("from_track", U32),
        opt("from_ts_ns", I64),
        opt("from_span", U32),
        opt("to_track", U32),
        opt("to_ts_ns", I64),
        opt("to_span", U32),
    ],
};

pub(crate) const DEVICES: TableDef = TableDef {
    name: "devices",
    columns: &[
        opt("rank", U32),
        col("index", I64),
        opt("name", Str),
        opt("sm_count", I64),
        opt("total_memory_bytes", I64),
        opt("compute_major", I64),
        opt("compute_minor", I64),
        opt("clock_rate_khz", I64),
        opt("memory_bandwidth_bytes_per_s", F64),
        opt("extra_json", Str),
    ],
};

/// Every table, in the order they are written and listed in `metadata.json`.
pub(crate) const ALL: [TableDef; 10] = [
    STRINGS, ARGS, RANKS, PROCESSES, TRACKS, SPANS, INSTANTS, COUNTERS, FLOWS, DEVICES,
];
