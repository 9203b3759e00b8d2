//! From an analysis's JSON shape to Arrow: the one place that turns `strato <command> --json`
//! documents into tables, so Python's tables, `strato sql`'s analysis views and `--csv` of a
//! registered analysis ([`crate::registry`]) have the command's JSON fields as columns by
//! construction.
//!
//! An analysis report is serialised exactly as the command serialises it (its serde shape) and
//! read back as an [`Ordered`] value, which keeps the fields in their declared order (the
//! workspace's `serde_json` sorts object keys). A [`Shape`] then names the list the rows come
//! from (e.g. `ranks` -> `kernels`; a segment that names an object steps into it, e.g.
//! `replay` -> `steps`) and the fields of enclosing objects each row carries (e.g. `rank`).
//! Rules of a row:
//! - scalar fields become columns, in declaration order (inherited fields first);
//! - nested objects are flattened, their fields named `outer.inner`;
//! - lists are left out (each has its own table, i.e. its own [`Shape`]).
//!
//! The columns are the union of the rows' (a row without a column has a null there), with two
//! rules across rows, so that a column never says null where the JSON has a value: a field
//! that is a list in any row is left out of every row (a `grid` that is `[128, 1, 1]` in one
//! row and `null` in another is no column), and a field that is an object in some rows and
//! null in others is only its flattened fields (`collective.kind`, ..., null in the rows where
//! `collective` is null), not a `collective` column.
//!
//! Column types follow the values: all integers -> int64 (uint64 when a value does not fit),
//! any float -> float64, strings -> utf8, booleans -> bool, only nulls -> null; a column whose
//! values mix kinds holds their JSON text.

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, NullArray, StringBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON value whose objects keep their fields in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    List(Vec<Ordered>),
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    /// The value of `value` as its serde JSON shape (what `--json` prints).
    pub fn of<T: serde::Serialize>(value: &T) -> Ordered {
        // Serialising our own report types cannot fail (no maps with non-string keys); a
        // failure would be a bug, surfaced as a null document rather than a panic.
        serde_json::to_string(value)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Ordered::Null)
    }

    /// The field `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn is_scalar(&self) -> bool {
        !matches!(self, Ordered::List(_) | Ordered::Object(_))
    }

    fn json_text(&self) -> String {
        match self {
            Ordered::Null => "null".into(),
            Ordered::Bool(b) => b.to_string(),
            Ordered::Int(i) => i.to_string(),
            Ordered::UInt(u) => u.to_string(),
            Ordered::Float(f) => f.to_string(),
            Ordered::Text(s) => serde_json::Value::String(s.clone()).to_string(),
            Ordered::List(items) => {
                let inner: Vec<String> = items.iter().map(Ordered::json_text).collect();
                format!("[{}]", inner.join(","))
            }
            Ordered::Object(fields) => {
                let inner: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| {
                        format!("{}:{}", serde_json::Value::String(k.clone()), v.json_text())
                    })
                    .collect();
                format!("{{{}}}", inner.join(","))
            }
        }
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = Ordered;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Null)
    }
    fn visit_none<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Ordered, D::Error> {
        Ordered::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Ordered, E> {
        Ok(Ordered::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Ordered, E> {
        Ok(Ordered::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Ordered, E> {
        Ok(i64::try_from(v).map_or(Ordered::UInt(v), Ordered::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Ordered, E> {
        Ok(Ordered::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
        Ok(Ordered::Text(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Ordered, E> {
        Ok(Ordered::Text(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Ordered::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
        let mut fields = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Ordered>()? {
            fields.push((key, value));
        }
        Ok(Ordered::Object(fields))
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        d.deserialize_any(OrderedVisitor)
    }
}

/// Where a table's rows are in a document: the path of list fields from the root (empty: the
/// root object is the one row), and the fields of enclosing objects each row carries.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub path: &'static [&'static str],
    pub inherit: &'static [&'static str],
}

/// One row: (column, value) in column order.
type Row = Vec<(String, Ordered)>;

fn flatten_into(prefix: &str, value: &Ordered, row: &mut Row) {
    match value {
        Ordered::Object(fields) => {
            if !prefix.is_empty() {
                // Marks where an object was, until the rows are known together (see `rows`).
                row.push((prefix.to_owned(), Ordered::Object(Vec::new())));
            }
            for (k, v) in fields {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_into(&name, v, row);
            }
        }
        // Kept as an empty list until the rows are known together (see `rows`).
        Ordered::List(_) => row.push((prefix.to_owned(), Ordered::List(Vec::new()))),
        scalar => row.push((prefix.to_owned(), scalar.clone())),
    }
}

fn collect(node: &Ordered, path: &[&str], shape: &Shape, carried: &Row, out: &mut Vec<Row>) {
    let mut carried = carried.clone();
    for key in shape.inherit {
        if let Some(v) = node.get(key).filter(|v| v.is_scalar()) {
            carried.retain(|(k, _)| k != key);
            carried.push(((*key).to_owned(), v.clone()));
        }
    }
    match path.split_first() {
        None => {
            let mut own = Row::new();
            flatten_into("", node, &mut own);
            let mut row: Row = carried
                .into_iter()
                .filter(|(k, _)| !own.iter().any(|(o, _)| o == k))
                .collect();
            row.extend(own);
            out.push(row);
        }
        Some((first, rest)) => {
            let items = match node.get(first) {
                Some(Ordered::List(items)) => items,
                // An object on the way: its list is further down.
                Some(object @ Ordered::Object(_)) => {
                    return collect(object, rest, shape, &carried, out);
                }
                _ => return,
            };
            // `[]name` after a list: its items are lists; each inner list's items are rows,
            // carrying the inner list's number (from 0) as `name`.
            if let Some((inner, rest)) = rest
                .split_first()
                .and_then(|(seg, rest)| Some((seg.strip_prefix("[]")?, rest)))
            {
                for (number, item) in items.iter().enumerate() {
                    let Ordered::List(inner_items) = item else {
                        continue;
                    };
                    let mut carried = carried.clone();
                    carried.retain(|(k, _)| k != inner);
                    carried.push((inner.to_owned(), Ordered::UInt(number as u64)));
                    for x in inner_items {
                        collect(x, rest, shape, &carried, out);
                    }
                }
                return;
            }
            for item in items {
                collect(item, rest, shape, &carried, out);
            }
        }
    }
}

/// The rows of `doc` at `shape`.
pub fn rows(doc: &Ordered, shape: &Shape) -> Vec<Row> {
    let mut out = Vec::new();
    collect(doc, shape.path, shape, &Row::new(), &mut out);
    // The rules across rows (module docs): fields that are a list in any row, and nulls where
    // other rows have an object, leave every row; so do the markers of lists and objects.
    let mut lists: Vec<String> = Vec::new();
    let mut objects: Vec<String> = Vec::new();
    for row in &out {
        for (k, v) in row {
            let seen = match v {
                Ordered::List(_) => &mut lists,
                Ordered::Object(_) => &mut objects,
                _ => continue,
            };
            if !seen.contains(k) {
                seen.push(k.clone());
            }
        }
    }
    let in_list = |key: &str| {
        lists.iter().any(|l| {
            key == l
                || (key.len() > l.len()
                    && key.starts_with(l.as_str())
                    && key.as_bytes()[l.len()] == b'.')
        })
    };
    for row in &mut out {
        row.retain(|(k, v)| match v {
            Ordered::List(_) | Ordered::Object(_) => false,
            Ordered::Null => !in_list(k) && !objects.contains(k),
            _ => !in_list(k),
        });
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Null,
    Bool,
    Int,
    UInt,
    Float,
    Text,
    Mixed,
}

fn kind_of(v: &Ordered) -> Kind {
    match v {
        Ordered::Null => Kind::Null,
        Ordered::Bool(_) => Kind::Bool,
        Ordered::Int(_) => Kind::Int,
        Ordered::UInt(_) => Kind::UInt,
        Ordered::Float(_) => Kind::Float,
        Ordered::Text(_) => Kind::Text,
        Ordered::List(_) | Ordered::Object(_) => Kind::Mixed,
    }
}

fn join(a: Kind, b: Kind) -> Kind {
    use Kind::*;
    match (a, b) {
        (x, y) if x == y => x,
        (Null, y) | (y, Null) => y,
        (Int, UInt) | (UInt, Int) => UInt,
        (Int | UInt | Float, Int | UInt | Float) => Float,
        _ => Mixed,
    }
}

fn column(kind: Kind, values: &[Option<&Ordered>]) -> (DataType, ArrayRef) {
    match kind {
        Kind::Null => (DataType::Null, Arc::new(NullArray::new(values.len()))),
        Kind::Bool => {
            let mut b = BooleanBuilder::with_capacity(values.len());
            for v in values {
                b.append_option(match v {
                    Some(Ordered::Bool(x)) => Some(*x),
                    _ => None,
                });
            }
            (DataType::Boolean, Arc::new(b.finish()))
        }
        Kind::Int => {
            let mut b = Int64Builder::with_capacity(values.len());
            for v in values {
                b.append_option(match v {
                    Some(Ordered::Int(x)) => Some(*x),
                    _ => None,
                });
            }
            (DataType::Int64, Arc::new(b.finish()))
        }
        Kind::UInt => {
            let mut b = UInt64Builder::with_capacity(values.len());
            for v in values {
                b.append_option(match v {
                    Some(Ordered::UInt(x)) => Some(*x),
                    Some(Ordered::Int(x)) => u64::try_from(*x).ok(),
                    _ => None,
                });
            }
            (DataType::UInt64, Arc::new(b.finish()))
        }
        Kind::Float => {
            let mut b = Float64Builder::with_capacity(values.len());
            for v in values {
                b.append_option(match v {
                    Some(Ordered::Float(x)) => Some(*x),
                    Some(Ordered::Int(x)) => Some(*x as f64),
                    Some(Ordered::UInt(x)) => Some(*x as f64),
                    _ => None,
                });
            }
            (DataType::Float64, Arc::new(b.finish()))
        }
        Kind::Text | Kind::Mixed => {
            let mut b = StringBuilder::with_capacity(values.len(), values.len() * 16);
            for v in values {
                match v {
                    None | Some(Ordered::Null) => b.append_null(),
                    Some(Ordered::Text(s)) => b.append_value(s),
                    Some(other) => b.append_value(other.json_text()),
                }
            }
            (DataType::Utf8, Arc::new(b.finish()))
        }
    }
}

/// The columns of `rows`, in first-seen order (of [`batch`] and [`text_rows`] alike).
fn column_names(rows: &[Row]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for row in rows {
        for (k, _) in row {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    names
}

/// The rows as one record batch (columns in first-seen order; a row without a column has a
/// null there).
pub fn batch(rows: &[Row]) -> RecordBatch {
    let names = column_names(rows);
    let mut fields = Vec::with_capacity(names.len());
    let mut arrays = Vec::with_capacity(names.len());
    for name in &names {
        let values: Vec<Option<&Ordered>> = rows
            .iter()
            .map(|r| r.iter().find(|(k, _)| k == name).map(|(_, v)| v))
            .collect();
        let kind = values
            .iter()
            .flatten()
            .map(|v| kind_of(v))
            .fold(Kind::Null, join);
        let (data_type, array) = column(kind, &values);
        fields.push(Field::new(*name, data_type, true));
        arrays.push(array);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    // The arrays are built from the same rows with the field types just chosen: they agree.
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())))
}

/// The rows as text cells under the column names of [`batch`] (same columns, same order; a
/// missing or null value is an empty cell, a number its shortest text, a mixed value its JSON).
pub fn text_rows(rows: &[Row]) -> (Vec<String>, Vec<Vec<String>>) {
    let names = column_names(rows);
    let cells = rows
        .iter()
        .map(|row| {
            names
                .iter()
                .map(|name| {
                    match row
                        .iter()
                        .find(|(k, _)| k.as_str() == *name)
                        .map(|(_, v)| v)
                    {
                        None | Some(Ordered::Null) => String::new(),
                        Some(Ordered::Text(s)) => s.clone(),
                        Some(other) => other.json_text(),
                    }
                })
                .collect()
        })
        .collect();
    (names.into_iter().map(str::to_owned).collect(), cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    #[test]
    fn a_field_that_is_a_list_or_an_object_in_another_row_is_no_null_column() {
        // `grid` is a list in one row and null in another: no column (it would say null
        // where the JSON has [2, 1]); `c` is an object in one row and null in another: only
        // its fields, null in the other row.
        let doc: Ordered = serde_json::from_str(
            r#"{"rows":[{"n":1,"grid":[2,1],"c":null},{"n":2,"grid":null,"c":{"kind":"ar","bytes":8}}]}"#,
        )
        .expect("valid JSON");
        let table = batch(&rows(
            &doc,
            &Shape {
                path: &["rows"],
                inherit: &[],
            },
        ));
        let names: Vec<&str> = table
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["n", "c.kind", "c.bytes"]);
        assert_eq!(table.column(1).null_count(), 1);
    }

    #[test]
    fn nested_rows_carry_their_parents_fields_and_keep_the_field_order() {
        let doc: Ordered = serde_json::from_str(
            r#"{"window":"whole","ranks":[
                {"rank":0,"zeta":1.5,"alpha":{"x":1,"y":null},"streams":[{"stream":7,"n":2},{"stream":8,"n":3}]},
                {"rank":1,"zeta":2,"alpha":{"x":2,"y":"b"},"streams":[{"stream":9,"n":4}]}]}"#,
        )
        .expect("valid JSON");
        let ranks = batch(&rows(
            &doc,
            &Shape {
                path: &["ranks"],
                inherit: &["window"],
            },
        ));
        let names: Vec<&str> = ranks
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["window", "rank", "zeta", "alpha.x", "alpha.y"]);
        assert_eq!(ranks.num_rows(), 2);
        // 1.5 and 2 share a float column; "y" is text with a null.
        assert_eq!(ranks.column(2).data_type(), &DataType::Float64);
        assert_eq!(ranks.column(4).null_count(), 1);
        let streams = batch(&rows(
            &doc,
            &Shape {
                path: &["ranks", "streams"],
                inherit: &["rank"],
            },
        ));
        assert_eq!(streams.num_rows(), 3);
        let rank = streams.column(0).as_primitive::<Int64Type>();
        assert_eq!(rank.values().to_vec(), vec![0, 0, 1]);
    }

    #[test]
    fn a_path_steps_through_objects_to_its_list() {
        // `replay` is an object holding the list; `missing` names nothing: no rows.
        let doc: Ordered = serde_json::from_str(
            r#"{"replay":{"steps":[{"rank":0,"path":{"idle":3}},{"rank":1,"path":{"idle":4}}],"worst":1.5}}"#,
        )
        .expect("valid JSON");
        let steps = batch(&rows(
            &doc,
            &Shape {
                path: &["replay", "steps"],
                inherit: &[],
            },
        ));
        assert_eq!(steps.num_rows(), 2);
        let names: Vec<&str> = steps
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["rank", "path.idle"]);
        let none = rows(
            &doc,
            &Shape {
                path: &["replay", "missing"],
                inherit: &[],
            },
        );
        assert!(none.is_empty());
    }

    #[test]
    fn an_empty_list_is_an_empty_table_and_mixed_values_keep_their_text() {
        let doc: Ordered =
            serde_json::from_str(r#"{"rows":[{"v":1},{"v":"a"},{"w":2}],"none":[]}"#)
                .expect("valid JSON");
        let empty = batch(&rows(
            &doc,
            &Shape {
                path: &["none"],
                inherit: &[],
            },
        ));
        assert_eq!(empty.num_rows(), 0);
        let mixed = batch(&rows(
            &doc,
            &Shape {
                path: &["rows"],
                inherit: &[],
            },
        ));
        assert_eq!(mixed.column(0).data_type(), &DataType::Utf8);
        let text = mixed.column(0).as_string::<i32>();
        assert_eq!(text.value(0), "1");
        assert_eq!(text.value(1), "a");
        // A row without the field has a null there.
        assert!(text.is_null(2));
    }
}
