//! `stratoscope.Table`: one analysis result (or raw trace table) as an Arrow record batch,
//! handed to Python through the Arrow PyCapsule interface (`__arrow_c_stream__`): `pyarrow.table(t)`,
//! `polars.from_arrow(t)` and `pyarrow.table(t).to_pandas()` read its buffers without copying
//! them. In Jupyter it displays itself (`_repr_html_`) as the report's SVG plot of the result
//! (when the result has one) above the first rows as a table.

use arrow::array::RecordBatchIterator;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use strato_report::html::Html;

/// Rows shown by `_repr_html_` (the table holds them all).
const HTML_ROWS: usize = 20;

/// An analysis result as an Arrow table.
#[pyclass(frozen, module = "stratoscope._analysis", name = "Table")]
#[derive(Debug)]
pub struct Table {
    name: String,
    batch: RecordBatch,
    svg: Option<String>,
}

impl Table {
    pub fn new(name: impl Into<String>, batch: RecordBatch, svg: Option<String>) -> Table {
        Table {
            name: name.into(),
            batch,
            svg,
        }
    }

    /// The plot, if the result has one.
    pub fn plot(&self) -> Option<&str> {
        self.svg.as_deref()
    }

    /// The notebook display: name, plot, first rows.
    pub fn html(&self) -> String {
        let mut out = format!(
            "<div class=\"stratoscope\"><p><b>{}</b>: {} rows</p>",
            strato_report::html::esc(&self.name),
            self.batch.num_rows()
        );
        if let Some(svg) = &self.svg {
            out.push_str(&crate::plots::styled(svg));
        }
        out.push_str(&self.html_table());
        if self.batch.num_rows() > HTML_ROWS {
            out.push_str(&format!(
                "<p>first {HTML_ROWS} of {} rows</p>",
                self.batch.num_rows()
            ));
        }
        out.push_str("</div>");
        out
    }

    /// The first rows as the report's HTML table.
    fn html_table(&self) -> String {
        let schema = self.batch.schema();
        let header: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let numeric: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.data_type().is_numeric())
            .map(|(i, _)| i)
            .collect();
        let options = FormatOptions::default().with_null("");
        let formatters: Vec<Option<ArrayFormatter<'_>>> = self
            .batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).ok())
            .collect();
        let shown = self.batch.num_rows().min(HTML_ROWS);
        let rows: Vec<Vec<String>> = (0..shown)
            .map(|r| {
                formatters
                    .iter()
                    .map(|f| {
                        f.as_ref()
                            .map_or_else(String::new, |f| f.value(r).to_string())
                    })
                    .collect()
            })
            .collect();
        let mut h = Html::new();
        h.table(&header, &numeric, &rows);
        h.finish()
    }
}

#[pymethods]
impl Table {
    /// The Arrow PyCapsule stream of the table (one record batch). `requested_schema` is
    /// accepted and ignored, as the protocol allows: the table has one schema.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(vec![Ok(self.batch.clone())], self.batch.schema());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The table's name (the method that made it).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// Column names, in order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// The SVG plot of the result, if it has one.
    #[getter]
    fn svg(&self) -> Option<&str> {
        self.svg.as_deref()
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    /// The table as a `pyarrow.Table` (zero-copy).
    fn to_pyarrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let pa = slf.py().import("pyarrow")?;
        pa.getattr("table")?.call1((slf,))
    }

    /// The table as a `pandas.DataFrame` (through pyarrow).
    fn to_pandas<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Table::to_pyarrow(slf)?.call_method0("to_pandas")
    }

    /// The table as a `polars.DataFrame` (zero-copy).
    fn to_polars<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let pl = slf.py().import("polars")?;
        pl.getattr("from_arrow")?.call1((Table::to_pyarrow(slf)?,))
    }

    fn _repr_html_(&self) -> String {
        self.html()
    }

    fn __repr__(&self) -> String {
        format!(
            "<stratoscope.Table {}: {} rows x {} columns>",
            self.name,
            self.batch.num_rows(),
            self.batch.num_columns()
        )
    }
}
