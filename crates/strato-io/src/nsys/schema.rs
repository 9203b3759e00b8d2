//! SQL access tolerant of schema drift: which tables exist and which of their columns this
//! importer reads ([`Schema`], from `sqlite_master` and `pragma table_info`), `SELECT`s where a
//! missing column reads as NULL and string ids are resolved ([`Select`]), lenient cell readers
//! (integers from reals or numeric text, text, JSON), `ENUM_*` tables ([`Enum`]), the nsys id
//! conventions (serialized global thread ids, versioned runtime names) and the export's
//! metadata, host and session-start tables.
//!
//! Nothing here builds the trace; every table reader of the importer goes through it.

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::{
    META_NEW, META_OLD, NSYS_TABLES, OTHER_READ_TABLES, SESSION_START, STRINGS, SYSTEM_ENV,
};

/// SQLite's message on one line: a damaged schema makes SQLite quote the `CREATE TABLE` text,
/// comments and newlines included. Whitespace runs become one space; past 300 characters the
/// text is cut (with `...`).
pub(super) fn one_line(message: &str) -> String {
    const MAX_CHARS: usize = 300;
    let mut out = String::with_capacity(message.len().min(MAX_CHARS + 3));
    for (i, word) in message.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    if let Some((cut, _)) = out.char_indices().nth(MAX_CHARS) {
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// The tables that exist and the columns of those this importer reads.
#[derive(Debug, Default)]
pub(super) struct Schema {
    pub(super) tables: FxHashMap<String, Vec<String>>,
}

impl Schema {
    pub(super) fn probe(conn: &Connection) -> rusqlite::Result<Schema> {
        let mut schema = Schema::default();
        let tables = "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')";
        for_each_row(conn, tables, |row| {
            if let Some(name) = text(row, 0) {
                if NSYS_TABLES.contains(&name.as_ref())
                    || OTHER_READ_TABLES.contains(&name.as_ref())
                {
                    schema.tables.insert(name.into_owned(), Vec::new());
                }
            }
        })?;
        for (table, columns) in schema.tables.iter_mut() {
            let sql = format!("PRAGMA table_info({})", quote(table));
            for_each_row(conn, &sql, |row| {
                if let Some(name) = text(row, 1) {
                    columns.push(name.into_owned());
                }
            })?;
        }
        Ok(schema)
    }

    /// A [`Select`] over `table`, or `None` when the file has no such table.
    pub(super) fn select(&self, table: &'static str) -> Option<Select<'_>> {
        self.has(table).then(|| Select::new(self, table))
    }

    pub(super) fn has(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    pub(super) fn has_col(&self, table: &str, column: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|cols| cols.iter().any(|c| c == column))
    }
}

/// Quotes an SQL identifier.
pub(super) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Runs `sql` and calls `each` with every row, streaming.
pub(super) fn for_each_row(
    conn: &Connection,
    sql: &str,
    mut each: impl FnMut(&Row),
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        each(row);
    }
    Ok(())
}

/// Runs `sql` and returns the first value `pick` finds in a row (rows where it finds none are
/// skipped).
pub(super) fn first_value<T>(
    conn: &Connection,
    sql: &str,
    mut pick: impl FnMut(&Row) -> Option<T>,
) -> rusqlite::Result<Option<T>> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        if let Some(v) = pick(row) {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// Builds a `SELECT` over one table where a missing column reads as NULL and string-id columns
/// are resolved through `StringIds` with a `LEFT JOIN`.
pub(super) struct Select<'s> {
    pub(super) schema: &'s Schema,
    pub(super) table: &'static str,
    pub(super) exprs: Vec<String>,
    pub(super) joins: String,
    pub(super) tail: String,
}

impl<'s> Select<'s> {
    pub(super) fn new(schema: &'s Schema, table: &'static str) -> Self {
        Select {
            schema,
            table,
            exprs: Vec::new(),
            joins: String::new(),
            tail: String::new(),
        }
    }

    pub(super) fn push(&mut self, expr: String) -> usize {
        self.exprs.push(expr);
        self.exprs.len() - 1
    }

    /// `t.column`, or NULL when the table lacks it.
    pub(super) fn col(&mut self, column: &str) -> usize {
        if self.schema.has_col(self.table, column) {
            self.push(format!("t.{}", quote(column)))
        } else {
            self.push("NULL".into())
        }
    }

    /// The `StringIds` text of the id in `column`, or NULL.
    pub(super) fn string(&mut self, column: &str) -> usize {
        if self.schema.has_col(self.table, column) && self.schema.has_col(STRINGS, "value") {
            let alias = format!("s{}", self.exprs.len());
            self.joins.push_str(&format!(
                " LEFT JOIN {} AS {alias} ON {alias}.id = t.{}",
                quote(STRINGS),
                quote(column)
            ));
            self.push(format!("{alias}.value"))
        } else {
            self.push("NULL".into())
        }
    }

    pub(super) fn sql(&self) -> String {
        format!(
            "SELECT {} FROM {} AS t{}{}",
            self.exprs.join(", "),
            quote(self.table),
            self.joins,
            self.tail
        )
    }
}

/// An integer cell, tolerating reals and numeric text; NULL and anything else is `None`.
pub(super) fn int(row: &Row, i: usize) -> Option<i64> {
    match row.get_ref(i).ok()? {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(f) if f.is_finite() => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// A text cell (numbers are formatted); NULL and blobs are `None`.
pub(super) fn text<'r>(row: &'r Row, i: usize) -> Option<Cow<'r, str>> {
    match row.get_ref(i).ok()? {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t)),
        ValueRef::Integer(v) => Some(Cow::Owned(v.to_string())),
        ValueRef::Real(f) => Some(Cow::Owned(f.to_string())),
        _ => None,
    }
}

/// A non-empty text cell.
pub(super) fn nonempty<'r>(row: &'r Row, i: usize) -> Option<Cow<'r, str>> {
    text(row, i).filter(|s| !s.is_empty())
}

/// A cell as JSON.
pub(super) fn json_cell(value: ValueRef) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(v) => Value::from(v),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(format!("<{} bytes>", b.len())),
    }
}

/// Puts an integer cell into `args` under `key` when it is not NULL.
pub(super) fn put_int(args: &mut Map<String, Value>, key: &str, row: &Row, i: usize) {
    if let Some(v) = int(row, i) {
        args.insert(key.to_owned(), Value::from(v));
    }
}

/// Puts a text cell into `args` under `key` when it is not NULL.
pub(super) fn put_text(args: &mut Map<String, Value>, key: &str, row: &Row, i: usize) {
    if let Some(v) = text(row, i) {
        args.insert(key.to_owned(), Value::String(v.into_owned()));
    }
}

/// Puts each integer cell of `cols` under the key at the same place in `keys`.
pub(super) fn put_ints(args: &mut Map<String, Value>, keys: &[&str], row: &Row, cols: &[usize]) {
    for (key, &i) in keys.iter().zip(cols) {
        put_int(args, key, row, i);
    }
}

/// Puts `[x, y, z]` when any of the three cells is not NULL.
pub(super) fn put_dim3(args: &mut Map<String, Value>, key: &str, row: &Row, cols: [usize; 3]) {
    let dims = cols.map(|i| int(row, i));
    if dims.iter().any(Option::is_some) {
        let dims = dims.map(|d| d.map_or(Value::Null, Value::from));
        args.insert(key.to_owned(), Value::Array(dims.to_vec()));
    }
}

/// `cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (the runtime call without its ABI version).
pub(super) fn strip_version(name: &str) -> &str {
    match name.rfind("_v") {
        Some(pos)
            if pos > 0
                && name.len() > pos + 2
                && name[pos + 2..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &name[..pos]
        }
        _ => name,
    }
}

/// `pid` and `tid` of a serialized global thread id (the higher bits are the VM / host).
pub(super) fn split_global_tid(g: i64) -> (i64, i64) {
    ((g >> 24) & 0xFF_FFFF, g & 0xFF_FFFF)
}

/// The process part (VM / host bits included) of a global thread or process id: equal for the
/// threads of one process and its `globalPid`.
pub(super) fn process_key(g: i64) -> i64 {
    g >> 24
}

/// An `ENUM_*` table: id -> (name, label).
#[derive(Debug, Default)]
pub(super) struct Enum {
    pub(super) values: FxHashMap<i64, (String, String)>,
}

impl Enum {
    pub(super) fn load(
        conn: &Connection,
        schema: &Schema,
        table: &'static str,
    ) -> rusqlite::Result<Enum> {
        let mut out = Enum::default();
        let Some(mut q) = schema.select(table) else {
            return Ok(out);
        };
        let id = q.col("id");
        let name = q.col("name");
        let label = q.col("label");
        for_each_row(conn, &q.sql(), |row| {
            if let Some(key) = int(row, id) {
                let name = text(row, name).unwrap_or_default().into_owned();
                let label = text(row, label).unwrap_or_default().into_owned();
                out.values.insert(key, (name, label));
            }
        })?;
        Ok(out)
    }

    pub(super) fn label(&self, id: i64) -> Option<&str> {
        self.values
            .get(&id)
            .map(|(name, label)| if label.is_empty() { name } else { label })
            .map(String::as_str)
    }

    pub(super) fn name(&self, id: i64) -> Option<&str> {
        self.values.get(&id).map(|(name, _)| name.as_str())
    }

    /// The label of `id` as JSON text, or `id` itself when the table does not list it.
    pub(super) fn label_value(&self, id: i64) -> Value {
        self.label(id)
            .map_or(Value::from(id), |l| Value::String(l.to_owned()))
    }
}

/// The export metadata table (`META_DATA_EXPORT`, 2024+, or `EXPORT_META_DATA`, <=2023) as a
/// JSON object of name -> value.
pub(super) fn read_metadata(
    conn: &Connection,
    schema: &Schema,
) -> rusqlite::Result<Map<String, Value>> {
    let mut out = Map::new();
    for table in [META_NEW, META_OLD] {
        let Some(mut q) = schema.select(table) else {
            continue;
        };
        let name = q.col("name");
        let value = q.col("value");
        for_each_row(conn, &q.sql(), |row| {
            if let Some(key) = text(row, name) {
                let v = row.get_ref(value).map_or(Value::Null, json_cell);
                out.entry(key.into_owned()).or_insert(v);
            }
        })?;
    }
    Ok(out)
}

/// The profiled host's name (`TARGET_INFO_SYSTEM_ENV`, `Hostname`). `EXPORT_HOST` in the
/// metadata is the machine that ran the export, not the profiled one, so it is not used.
pub(super) fn read_host(conn: &Connection, schema: &Schema) -> rusqlite::Result<Option<String>> {
    if !schema.has_col(SYSTEM_ENV, "name") || !schema.has_col(SYSTEM_ENV, "value") {
        return Ok(None);
    }
    let sql = format!(
        "SELECT value FROM {} WHERE name = 'Hostname'",
        quote(SYSTEM_ENV)
    );
    first_value(conn, &sql, |row| nonempty(row, 0).map(Cow::into_owned))
}

/// UTC ns since the epoch at the session start (timestamp 0 of the file).
pub(super) fn read_session_start(
    conn: &Connection,
    schema: &Schema,
) -> rusqlite::Result<Option<i64>> {
    if !schema.has_col(SESSION_START, "utcEpochNs") {
        return Ok(None);
    }
    let sql = format!("SELECT utcEpochNs FROM {}", quote(SESSION_START));
    first_value(conn, &sql, |row| int(row, 0))
}
