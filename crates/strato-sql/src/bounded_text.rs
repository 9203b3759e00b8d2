//! Bounded versions of the SQL functions whose output size is set by a number rather than by
//! the size of their inputs: `repeat(s, n)`, `lpad(s, n[, fill])`, `rpad(s, n[, fill])`.
//! DataFusion's own versions accept up to 2 GiB per value, so `repeat('x', 2147483647)`, or a
//! modest count over every row of a table, allocates gigabytes before any memory pool sees it
//! (expression results are not accounted). Every other string function's output is bounded by
//! its inputs' sizes, which the query limits and the result bound keep in check.
//!
//! Rule: one call (one batch of rows, or the one constant value the planner folds) may build
//! at most [`MAX_BUILT_TEXT_BYTES`]; the size is computed from the arguments before anything
//! is built (`repeat`: the string's bytes times the count, summed over the rows; `lpad`/`rpad`:
//! 4 bytes, the most a character takes, per character of the target length). Past it, the
//! query fails with one line naming the function. Below it, the result is DataFusion's own.

use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};

/// Most bytes of text one call of `repeat`, `lpad` or `rpad` may build: 64 MiB.
pub const MAX_BUILT_TEXT_BYTES: u64 = 64 << 20;

/// How a function's output size follows from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(s, n)`: bytes of `s` times `n`.
    Repeat,
    /// `lpad`/`rpad(s, n[, fill])`: `n` characters of at most 4 bytes.
    Pad,
}

/// A DataFusion function behind the size check of the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Bounded {
    inner: Arc<ScalarUDF>,
    growth: Growth,
    limit: u64,
}

/// The bounded `repeat`, `lpad` and `rpad`, each built at most `limit` bytes per call, to be
/// registered over DataFusion's (same names, signatures and results).
pub fn bounded_functions(limit: u64) -> Vec<ScalarUDF> {
    use datafusion::functions::{string, unicode};
    [
        (string::repeat(), Growth::Repeat),
        (unicode::lpad(), Growth::Pad),
        (unicode::rpad(), Growth::Pad),
    ]
    .into_iter()
    .map(|(inner, growth)| {
        ScalarUDF::new_from_impl(Bounded {
            inner,
            growth,
            limit,
        })
    })
    .collect()
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let size = built_bytes(self.growth, &args)?;
        if size > self.limit {
            return exec_err!(
                "{}() would build {} MiB of text in one batch, more than the limit of {} MiB \
                 (docs/sql.md)",
                self.inner.name(),
                size >> 20,
                self.limit >> 20
            );
        }
        self.inner.invoke_with_args(args)
    }
}

/// The most bytes `growth`'s function builds for `args` (saturating).
fn built_bytes(growth: Growth, args: &ScalarFunctionArgs) -> Result<u64> {
    let (Some(text), Some(count)) = (args.args.first(), args.args.get(1)) else {
        return Ok(0);
    };
    let all_scalar = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let rows = if all_scalar { 1 } else { args.number_rows };
    let counts = counts(count, rows)?;
    let mut total: u64 = 0;
    match growth {
        Growth::Repeat => {
            let lengths = byte_lengths(text, rows)?;
            for (len, n) in lengths.iter().zip(&counts) {
                total = total.saturating_add(len.saturating_mul(*n));
            }
        }
        Growth::Pad => {
            for n in &counts {
                total = total.saturating_add(n.saturating_mul(4));
            }
        }
    }
    Ok(total)
}

/// The non-negative counts (0 for null or negative) of an integer argument, one per row.
fn counts(value: &ColumnarValue, rows: usize) -> Result<Vec<u64>> {
    let positive = |n: Option<i64>| n.map_or(0, |n| u64::try_from(n).unwrap_or(0));
    match value {
        ColumnarValue::Scalar(ScalarValue::Int64(n)) => Ok(vec![positive(*n); rows]),
        ColumnarValue::Scalar(ScalarValue::Null) => Ok(vec![0; rows]),
        ColumnarValue::Array(array) if array.data_type() == &DataType::Int64 => Ok(array
            .as_primitive::<arrow::datatypes::Int64Type>()
            .iter()
            .map(positive)
            .collect()),
        other => exec_err!("unexpected count argument of type {}", other.data_type()),
    }
}

/// The byte lengths (0 for null) of a text argument, one per row.
fn byte_lengths(value: &ColumnarValue, rows: usize) -> Result<Vec<u64>> {
    let len = |s: Option<&str>| s.map_or(0, |s| s.len() as u64);
    match value {
        ColumnarValue::Scalar(
            ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s),
        ) => Ok(vec![len(s.as_deref()); rows]),
        ColumnarValue::Scalar(ScalarValue::Null) => Ok(vec![0; rows]),
        ColumnarValue::Array(array) => match array.data_type() {
            DataType::Utf8 => Ok(array.as_string::<i32>().iter().map(len).collect()),
            DataType::LargeUtf8 => Ok(array.as_string::<i64>().iter().map(len).collect()),
            DataType::Utf8View => Ok(array.as_string_view().iter().map(len).collect()),
            other => exec_err!("unexpected text argument of type {other}"),
        },
        other => exec_err!("unexpected text argument of type {}", other.data_type()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::Field;
    use datafusion::common::config::ConfigOptions;

    fn args(values: Vec<ColumnarValue>, rows: usize) -> ScalarFunctionArgs {
        ScalarFunctionArgs {
            arg_fields: values
                .iter()
                .map(|v| Arc::new(Field::new("a", v.data_type(), true)))
                .collect(),
            args: values,
            number_rows: rows,
            return_field: Arc::new(Field::new("r", DataType::Utf8, true)),
            config_options: Arc::new(ConfigOptions::default()),
        }
    }

    #[test]
    fn sizes_are_computed_from_the_arguments() {
        // Known by construction: 3 rows "ab", null, "xyz" repeated 2, 5, -1 times build
        // 2*2 + 0 + 0 = 4 bytes; padded to 2, 5, -1 characters, at most 4*(2+5) = 28 bytes.
        let text = ColumnarValue::Array(Arc::new(StringArray::from(vec![
            Some("ab"),
            None,
            Some("xyz"),
        ])));
        let count = ColumnarValue::Array(Arc::new(Int64Array::from(vec![2, 5, -1])));
        let a = args(vec![text, count], 3);
        assert_eq!(built_bytes(Growth::Repeat, &a).unwrap(), 4);
        assert_eq!(built_bytes(Growth::Pad, &a).unwrap(), 28);
        // A scalar call counts once; a scalar string over an array of counts, once per row.
        let scalar = args(
            vec![
                ColumnarValue::Scalar(ScalarValue::Utf8(Some("x".into()))),
                ColumnarValue::Scalar(ScalarValue::Int64(Some(i64::from(i32::MAX)))),
            ],
            8192,
        );
        assert_eq!(
            built_bytes(Growth::Repeat, &scalar).unwrap(),
            i32::MAX as u64
        );
        let per_row = args(
            vec![
                ColumnarValue::Scalar(ScalarValue::Utf8(Some("xy".into()))),
                ColumnarValue::Array(Arc::new(Int64Array::from(vec![10; 100]))),
            ],
            100,
        );
        assert_eq!(built_bytes(Growth::Repeat, &per_row).unwrap(), 2000);
    }

    #[test]
    fn over_the_limit_is_refused_under_it_computed() {
        let repeat = bounded_functions(1000).remove(0);
        assert_eq!(repeat.name(), "repeat");
        let call = |n: i64| {
            repeat.invoke_with_args(args(
                vec![
                    ColumnarValue::Scalar(ScalarValue::Utf8(Some("ab".into()))),
                    ColumnarValue::Scalar(ScalarValue::Int64(Some(n))),
                ],
                1,
            ))
        };
        match call(500).unwrap() {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(s))) => assert_eq!(s, "ab".repeat(500)),
            other => panic!("{other:?}"),
        }
        let e = call(501).unwrap_err().to_string();
        assert!(e.contains("repeat() would build"), "{e}");
    }
}
