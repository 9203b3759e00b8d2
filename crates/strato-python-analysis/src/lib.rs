//! `stratoscope._analysis`: the Python analysis API (`stratoscope.open(path) -> Profile`).
//! Thin wrappers: a `Profile` holds one imported trace ([`opening`], the CLI's way in); a
//! registered analysis (`strato_engine::registry`) runs by its name ([`Profile::analysis`],
//! `profile.NAME(...)`), and a registered comparison of two profiles
//! (`strato_engine::comparisons`) by [`Profile::compare`] (`diff` and `diff_kernels` are two of
//! its tables with the command's defaults). Each returns its rows as an Arrow table
//! ([`table::Table`], the Arrow PyCapsule interface).
//!
//! The columns of an analysis table are the fields of `strato <command> --json` by
//! construction: the result is serialised by its own serde shape and
//! `strato_engine::rows` turns the document into rows. python/tests compares every method
//! with the command's JSON on real traces.
//!
//! Kept apart from the recorder extension (`stratoscope._native`, loaded into every recorded
//! process) so that stays small; this one links the importers and analyses.

use std::path::PathBuf;

use pyo3::prelude::*;
use strato_analysis::analyzed::Analyzed;
use strato_trace::Trace;

mod errors;
mod opening;
mod plots;
mod raw;
mod table;

use errors::OpenError;
use table::Table;

/// A profile opened for analysis (`stratoscope.open`).
#[pyclass(frozen, module = "stratoscope._analysis", name = "Profile")]
#[derive(Debug)]
pub struct Profile {
    trace: Trace,
    label: String,
    corrected: bool,
    /// What opening it told (the CLI's stderr lines), in order.
    warnings: Vec<String>,
}

impl Profile {
    /// Registered comparison `name` of this profile (A) with `other` (B): `table` (the main
    /// table, or the first the options allow, when `None`) with `options` as texts.
    fn compared(
        &self,
        py: Python<'_>,
        name: &str,
        other: &Profile,
        table: Option<&str>,
        options: Vec<(String, String)>,
    ) -> PyResult<Table> {
        use strato_engine::comparisons::{find_comparison, COMPARISONS};
        use strato_engine::registry::{table_for, Registered};
        let comparison = find_comparison(name).ok_or_else(|| {
            let names: Vec<&str> = COMPARISONS.iter().map(|c| c.name).collect();
            OpenError::Option(format!(
                "no comparison {name:?} (comparisons: {})",
                names.join(", ")
            ))
        })?;
        let spec = table_for(comparison.name, comparison.tables, table, &options)
            .map_err(OpenError::from)?;
        let values = Registered::options_for_table(spec, &options);
        let outcome = py
            .detach(|| {
                comparison.run_analyzed(
                    (&self.label, &Analyzed::new(&self.trace)),
                    (&other.label, &Analyzed::new(&other.trace)),
                    &values,
                )
            })
            .map_err(|e| match e {
                strato_engine::EngineError::Analysis(why) => OpenError::Analysis(why),
                e => OpenError::from(e),
            })?;
        Ok(Table::new(spec.name, outcome.batch(spec), None))
    }
}

#[pymethods]
impl Profile {
    /// The inputs as given (joined by spaces).
    #[getter]
    fn label(&self) -> &str {
        &self.label
    }

    /// Whether a recording's calibration was applied (overhead-corrected).
    #[getter]
    fn corrected(&self) -> bool {
        self.corrected
    }

    /// What opening the profile told, as the `strato` command prints it on stderr: import
    /// warnings (losses above 0.1 % of the events, salvaged input, unclassified device-like
    /// events, ...), notes on rank claims and graph attribution. Each was also issued as a
    /// `UserWarning` by `stratoscope.open`.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// Ranks (sources) in the profile.
    #[getter]
    fn rank_count(&self) -> usize {
        self.trace.ranks.len()
    }

    /// Spans in the profile.
    #[getter]
    fn span_count(&self) -> usize {
        self.trace.spans.len()
    }

    // ---- analyses -------------------------------------------------------------------------

    /// `strato diff SELF OTHER --json`: one row per operation (`operations[]`, the delta
    /// flattened as `delta.a_ns`, ...); `compare("diff", other)`.
    #[pyo3(signature = (other, *, per_step = false))]
    fn diff(&self, py: Python<'_>, other: &Profile, per_step: bool) -> PyResult<Table> {
        let options = vec![("per_step".to_owned(), per_step.to_string())];
        self.compared(py, "diff", other, Some("diff"), options)
    }

    /// The kernels of `strato diff --json` (`kernels[]`); `compare("diff", other,
    /// table="diff_kernels")`.
    #[pyo3(signature = (other, *, per_step = false))]
    fn diff_kernels(&self, py: Python<'_>, other: &Profile, per_step: bool) -> PyResult<Table> {
        let options = vec![("per_step".to_owned(), per_step.to_string())];
        self.compared(py, "diff", other, Some("diff_kernels"), options)
    }

    /// A registered comparison (`stratoscope.comparisons()` lists them) of this profile (A,
    /// the baseline) with `other` (B): `table` (its main table when `None`) as an Arrow table,
    /// its options as keywords; `strato NAME A B --json`'s fields as columns.
    #[pyo3(signature = (name, other, *, table = None, **options))]
    fn compare(
        &self,
        py: Python<'_>,
        name: &str,
        other: &Profile,
        table: Option<&str>,
        options: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Table> {
        self.compared(py, name, other, table, option_texts(options)?)
    }

    // ---- registered analyses (strato_engine::registry) -------------------------------------

    /// A registered analysis by name (`stratoscope.analyses()` lists them): `table` (its main
    /// table when `None`) as an Arrow table, its options as keywords; `strato NAME --json`'s
    /// fields as columns.
    #[pyo3(signature = (name, *, table = None, **options))]
    fn analysis(
        &self,
        py: Python<'_>,
        name: &str,
        table: Option<&str>,
        options: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Table> {
        let analysis = strato_engine::registry::find(name).ok_or_else(|| {
            let names: Vec<&str> = strato_engine::registry::ANALYSES
                .iter()
                .map(|a| a.name)
                .collect();
            OpenError::Option(format!(
                "no analysis {name:?} (analyses: {})",
                names.join(", ")
            ))
        })?;
        let spec = analysis.table(table).map_err(OpenError::from)?;
        let values =
            strato_engine::registry::Registered::options_for_table(spec, &option_texts(options)?);
        let outcome = py
            .detach(|| analysis.run_trace(&self.trace, &values))
            .map_err(|e| match e {
                // Why it cannot run on this profile, after the profile's name (as the CLI's
                // line names the input).
                strato_engine::EngineError::Analysis(why) => {
                    OpenError::Analysis(format!("{}: {why}", self.label))
                }
                e => OpenError::from(e),
            })?;
        let svg = plots::of_table(spec.name, outcome.doc());
        Ok(Table::new(spec.name, outcome.batch(spec), svg))
    }

    /// `profile.NAME(**options)` for a registered analysis NAME (snake_case): its main table,
    /// or another with `table=`; `profile.TABLE(**options)` for a table of a registered
    /// analysis (`profile.kernel_ops(top=5)`).
    fn __getattr__(slf: &Bound<'_, Self>, name: &str) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let partial = py.import("functools")?.getattr("partial")?;
        let method = slf.getattr("analysis")?;
        if name.starts_with('_') {
            // Python's own protocols (`__array__`, `_ipython_display_`, ...): not analyses.
        } else if let Some(analysis) = strato_engine::registry::find(name) {
            return Ok(partial.call1((method, analysis.name))?.unbind());
        } else if let Some((analysis, table)) = strato_engine::registry::find_table(name) {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("table", table.name)?;
            return Ok(partial
                .call((method, analysis.name), Some(&kwargs))?
                .unbind());
        }
        Err(pyo3::exceptions::PyAttributeError::new_err(format!(
            "'Profile' object has no attribute '{name}'"
        )))
    }

    // ---- raw tables -----------------------------------------------------------------------

    /// One row per span (`args`: the attributes' JSON text, with `args=True`).
    #[pyo3(signature = (*, args = false))]
    fn spans(&self, py: Python<'_>, args: bool) -> Table {
        Table::new("spans", py.detach(|| raw::spans(&self.trace, args)), None)
    }

    /// One row per flow (both ends).
    fn flows(&self, py: Python<'_>) -> Table {
        Table::new("flows", py.detach(|| raw::flows(&self.trace)), None)
    }

    /// One row per counter sample.
    fn counters(&self, py: Python<'_>) -> Table {
        Table::new("counters", py.detach(|| raw::counters(&self.trace)), None)
    }

    /// One row per track (thread, device queue, counter).
    fn tracks(&self, py: Python<'_>) -> Table {
        Table::new("tracks", py.detach(|| raw::tracks(&self.trace)), None)
    }

    /// One row per rank (source).
    fn ranks(&self) -> Table {
        Table::new("ranks", raw::ranks(&self.trace), None)
    }

    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let summary = format!(
            "<p><b>stratoscope profile</b> {}: {} ranks, {} spans{}</p>",
            strato_report::html::esc(&self.label),
            self.trace.ranks.len(),
            self.trace.spans.len(),
            if self.corrected {
                " (overhead-corrected)"
            } else {
                ""
            }
        );
        // The device time per rank (registered `gpu-time`, default options) with its plot.
        let gpu = self.analysis(py, "gpu-time", None, None)?;
        let ranks = self.ranks();
        let mut out = format!("<div class=\"stratoscope\">{summary}");
        if let Some(svg) = gpu.plot() {
            out.push_str(&plots::styled(svg));
        }
        out.push_str("</div>");
        out.push_str(&ranks.html());
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "<stratoscope.Profile {}: {} ranks, {} spans>",
            self.label,
            self.trace.ranks.len(),
            self.trace.spans.len()
        )
    }
}

/// Opens trace files, a directory of ranks, a profile directory, a partitioned store or a
/// recording (a directory of `*.strato` files), as the `strato` command's inputs do.
#[pyfunction(name = "open")]
#[pyo3(signature = (*paths, level_map = None, salvage = false, keep_secrets = false, graph_capture = None))]
fn open_profile(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    level_map: Option<PathBuf>,
    salvage: bool,
    keep_secrets: bool,
    graph_capture: Option<PathBuf>,
) -> PyResult<Profile> {
    let options = strato_engine::OpenOptions {
        level_map,
        salvage,
        keep_secrets,
        graph_capture,
        jobs: None,
    };
    let label = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let opened = py.detach(|| opening::open(&paths, options))?;
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    for line in &opened.warnings {
        // A line with a NUL byte (it came from the data) is cut there rather than lost.
        let text = line.split('\0').next().unwrap_or_default();
        let message = std::ffi::CString::new(text).unwrap_or_default();
        PyErr::warn(py, category.as_any(), &message, 1)?;
    }
    Ok(Profile {
        trace: opened.trace,
        label,
        corrected: opened.corrected,
        warnings: opened.warnings,
    })
}

/// Python keyword options as the registry takes them: (name, text); `True`/`False` as
/// `true`/`false`, numbers and strings as their text, a list or tuple as its items' texts
/// separated by commas.
fn option_texts(
    options: Option<&Bound<'_, pyo3::types::PyDict>>,
) -> PyResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    let Some(options) = options else {
        return Ok(out);
    };
    for (key, value) in options.iter() {
        let key: String = key.extract()?;
        let text = if let Ok(b) = value.cast::<pyo3::types::PyBool>() {
            b.is_true().to_string()
        } else if value.is_instance_of::<pyo3::types::PyList>()
            || value.is_instance_of::<pyo3::types::PyTuple>()
        {
            // A list option (`period=[0.1, 1]`): its items' texts, comma-separated.
            let items: Vec<String> = value
                .try_iter()?
                .map(|item| item.and_then(|i| Ok(i.str()?.to_string())))
                .collect::<PyResult<_>>()?;
            items.join(",")
        } else {
            value.str()?.to_string()
        };
        out.push((key, text));
    }
    Ok(out)
}

/// A registered analysis's or comparison's declaration as a dict (name, method, summary,
/// window, doc, options, tables).
fn described(
    py: Python<'_>,
    declared: strato_engine::registry::Declaration,
) -> PyResult<Py<pyo3::types::PyDict>> {
    use pyo3::types::{PyDict, PyList};
    let d = PyDict::new(py);
    d.set_item("name", declared.name)?;
    d.set_item("method", declared.name.replace('-', "_"))?;
    d.set_item("summary", declared.summary)?;
    d.set_item("window", declared.window)?;
    d.set_item("doc", declared.doc)?;
    let options: Vec<(&str, &str, &str)> = declared
        .options
        .iter()
        .map(|o| (o.name, o.help, o.default))
        .collect();
    d.set_item("options", options)?;
    let tables = PyList::empty(py);
    for t in declared.tables {
        let table = PyDict::new(py);
        table.set_item("name", t.name)?;
        table.set_item("about", t.about)?;
        table.set_item("path", t.path.to_vec())?;
        table.set_item("inherit", t.inherit.to_vec())?;
        table.set_item("options", t.options.to_vec())?;
        tables.append(table)?;
    }
    d.set_item("tables", tables)?;
    Ok(d.unbind())
}

/// The registered analyses: per analysis its name, Python method, summary, window, doc page,
/// options (name, help, default) and tables (name, what a row is, and where its rows are in
/// `strato NAME --json`: the path of lists and the fields of enclosing objects carried).
#[pyfunction]
fn analyses(py: Python<'_>) -> PyResult<Vec<Py<pyo3::types::PyDict>>> {
    strato_engine::registry::ANALYSES
        .iter()
        .map(|a| described(py, a.declaration()))
        .collect()
}

/// The registered comparisons of two profiles (`Profile.compare(NAME, other)`), described as
/// [`analyses`] describes analyses.
#[pyfunction]
fn comparisons(py: Python<'_>) -> PyResult<Vec<Py<pyo3::types::PyDict>>> {
    strato_engine::comparisons::COMPARISONS
        .iter()
        .map(|c| described(py, c.declaration()))
        .collect()
}

#[pymodule]
fn _analysis(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Profile>()?;
    m.add_function(wrap_pyfunction!(analyses, m)?)?;
    m.add_function(wrap_pyfunction!(comparisons, m)?)?;
    m.add_class::<Table>()?;
    m.add_function(wrap_pyfunction!(open_profile, m)?)?;
    errors::register(m)?;
    Ok(())
}
