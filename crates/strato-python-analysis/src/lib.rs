//! `stratoscope._analysis`: the Python analysis API (`stratoscope.open(path) -> Profile`).
//! Thin wrappers: a `Profile` holds one imported trace ([`opening`], the CLI's way in); each
//! method runs one analysis of `strato-analysis` with the CLI command's defaults and returns
//! its rows as an Arrow table ([`table::Table`], the Arrow PyCapsule interface).
//!
//! The columns of an analysis table are the fields of `strato <command> --json` by
//! construction: the report is serialised by its own serde shape, or, for the commands that
//! shape their JSON in the CLI (gpu-time, collectives, critical-path), by the same fields
//! rebuilt here ([`shapes`]); [`rows`] turns the document into rows. python/tests compares
//! every method with the command's JSON on real traces.
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
use strato_engine::rows::{self, Ordered, Shape};
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

/// `doc`'s rows at `shape` as a table named `name`, with an optional plot.
fn table_of(name: &str, doc: &Ordered, shape: Shape, svg: Option<String>) -> Table {
    Table::new(name, rows::batch(&rows::rows(doc, &shape)), svg)
}

fn shape(path: &'static [&'static str], inherit: &'static [&'static str]) -> Shape {
    Shape { path, inherit }
}

fn list<'a>(doc: &'a Ordered, key: &str) -> &'a [Ordered] {
    match doc.get(key) {
        Some(Ordered::List(items)) => items,
        _ => &[],
    }
}

impl Profile {
    fn gpu_time_doc(&self, window: &str, kernel_wait_us: f64) -> PyResult<Ordered> {
        use strato_analysis::device_time::gpu_time::{gpu_time, GpuTimeOptions, Window};
        let window = match window {
            "whole" => Window::Whole,
            "hta" => Window::Hta,
            other => {
                return Err(OpenError::Option(format!(
                    "gpu_time: window must be 'whole' or 'hta', not {other:?}"
                ))
                .into())
            }
        };
        let options = GpuTimeOptions {
            window,
            kernel_wait_threshold_ns: (kernel_wait_us * 1000.0).round() as i64,
        };
        Ok(Ordered::of(
            &strato_engine::shapes::gpu_time::gpu_time_json(&gpu_time(&self.trace, &options)),
        ))
    }

    fn breakdown_doc(&self, per_step: bool) -> Ordered {
        use strato_analysis::cross_stack::breakdown::{breakdown, BreakdownOptions};
        Ordered::of(&breakdown(
            &Analyzed::new(&self.trace),
            &BreakdownOptions { per_step },
        ))
    }

    fn kernels_doc(&self, top: usize) -> Ordered {
        Ordered::of(&strato_analysis::device_time::kernel_stats::kernel_stats(
            &self.trace,
            top,
        ))
    }

    fn layers_doc(&self, by: &str, trim: f64, batch_size: Option<u64>) -> PyResult<Ordered> {
        use strato_analysis::cross_stack::layers::{layers, LayerSource, LayersOptions};
        if !(0.0..0.5).contains(&trim) {
            return Err(OpenError::Option("layers: trim must be in [0, 0.5)".into()).into());
        }
        let source = match by {
            "op" => LayerSource::Op,
            "annotation" => LayerSource::Annotation,
            other => {
                return Err(OpenError::Option(format!(
                    "layers: by must be 'op' or 'annotation' (modules(): by module), not {other:?}"
                ))
                .into())
            }
        };
        Ok(Ordered::of(&layers(
            &Analyzed::new(&self.trace),
            &LayersOptions {
                source,
                trim,
                batch_size,
            },
        )))
    }

    fn iterations_doc(
        &self,
        iterations: Option<Vec<usize>>,
        k0: Option<usize>,
        epsilon: Option<usize>,
        max_loops: usize,
    ) -> PyResult<Ordered> {
        use strato_analysis::patterns::iterations::{
            attach_lines_up, iterations as mine, IterationOptions,
        };
        let iterations = iterations.unwrap_or_default();
        if iterations.iter().any(|&i| i < 2) {
            return Err(OpenError::Option(
                "iterations: each loop needs at least 2 iterations".into(),
            )
            .into());
        }
        let options = IterationOptions {
            iterations,
            epsilon,
            k0,
            max_loops: max_loops.max(1),
            ..IterationOptions::default()
        };
        let mut report = mine(&self.trace, &options);
        attach_lines_up(&Analyzed::new(&self.trace), &mut report);
        Ok(Ordered::Object(vec![
            ("sequences".into(), Ordered::of(&report.sequences)),
            ("not_found".into(), Ordered::of(&report.not_found)),
        ]))
    }

    fn memory_doc(&self, top: usize, max_points: usize, bins: usize) -> Ordered {
        use strato_analysis::device_time::memory::{memory, MemoryOptions};
        Ordered::of(&memory(
            &self.trace,
            &MemoryOptions {
                max_points,
                bandwidth_bins: bins,
                top_ops: top,
            },
        ))
    }

    fn collectives_doc(&self, stragglers: usize) -> Ordered {
        use strato_analysis::distributed::collectives::{collectives, CollectivesOptions};
        Ordered::of(&strato_engine::shapes::collectives::to_json(&collectives(
            &self.trace,
            &CollectivesOptions { stragglers },
        )))
    }

    fn critical_path_doc(&self) -> PyResult<Ordered> {
        use strato_analysis::paths::critical_path::{critical_path, CriticalPathOptions};
        let trace = &self.trace;
        // The same matching and clock alignment as `strato critical-path` and `collectives`.
        let options = CriticalPathOptions::matched(trace);
        let instances = options.collectives.as_ref().map_or(0, Vec::len);
        let report = critical_path(trace, &options)
            .map_err(|e| OpenError::Analysis(format!("{}: {e}", self.label)))?;
        use strato_engine::shapes::critical_path::{collectives_json, report_json};
        Ok(Ordered::of(&report_json(
            &report,
            collectives_json(trace.ranks.len(), instances),
        )))
    }

    fn findings_doc(
        &self,
        floor: Option<f64>,
        all: bool,
        disable: Vec<String>,
    ) -> PyResult<Ordered> {
        use strato_analysis::advise::{self, AdviseConfig};
        let mut config = AdviseConfig::default();
        for id in &disable {
            if !config.disable(id) {
                return Err(OpenError::Option(format!(
                    "findings: disable {id:?}: no such rule (rules: {})",
                    advise::RULES.join(", ")
                ))
                .into());
            }
        }
        if let Some(floor) = floor {
            config.floor_pct = floor;
        }
        config.all |= all;
        config
            .validate()
            .map_err(|e| OpenError::Option(format!("findings: floor: {e}")))?;
        let cross_rank = advise::CrossRankEvidence::from_trace(&self.trace);
        Ok(Ordered::of(&advise::advise(
            &Analyzed::new(&self.trace),
            &config,
            Some(&cross_rank as &dyn advise::MultiRankEvidence),
        )))
    }

    fn diff_doc(&self, other: &Profile, per_step: bool) -> Ordered {
        use strato_analysis::compare::diff::{self, DiffSide};
        let a = DiffSide::of(&Analyzed::new(&self.trace), per_step);
        let b = DiffSide::of(&Analyzed::new(&other.trace), per_step);
        Ordered::of(&diff::diff(&self.label, a.parts(), &other.label, b.parts()))
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

    /// `strato gpu-time --json`: one row per rank with the scalar fields of its rank object.
    #[pyo3(signature = (*, window = "whole", kernel_wait_us = 30.0))]
    fn gpu_time(&self, py: Python<'_>, window: &str, kernel_wait_us: f64) -> PyResult<Table> {
        let doc = py.detach(|| self.gpu_time_doc(window, kernel_wait_us))?;
        let svg = plots::stacked_fields(
            "device time per rank",
            strato_report::svg::bars::Axis::Percent,
            list(&doc, "ranks"),
            |r| format!("rank {}", plots_text(r.get("rank"))),
            &[
                ("compute_pct", "compute %"),
                ("non_compute_pct", "non-compute %"),
                ("idle_pct", "idle %"),
            ],
        );
        Ok(table_of(
            "gpu_time",
            &doc,
            shape(&["ranks"], &["window"]),
            svg,
        ))
    }

    /// The idle breakdown per stream of `strato gpu-time --json` (`ranks[].streams[]`), with
    /// `rank`.
    #[pyo3(signature = (*, window = "whole", kernel_wait_us = 30.0))]
    fn gpu_time_streams(
        &self,
        py: Python<'_>,
        window: &str,
        kernel_wait_us: f64,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.gpu_time_doc(window, kernel_wait_us))?;
        Ok(table_of(
            "gpu_time_streams",
            &doc,
            shape(&["ranks", "streams"], &["rank"]),
            None,
        ))
    }

    /// Exposed communication per device (`ranks[].exposure[]`), with `rank`.
    #[pyo3(signature = (*, window = "whole", kernel_wait_us = 30.0))]
    fn gpu_time_exposure(
        &self,
        py: Python<'_>,
        window: &str,
        kernel_wait_us: f64,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.gpu_time_doc(window, kernel_wait_us))?;
        Ok(table_of(
            "gpu_time_exposure",
            &doc,
            shape(&["ranks", "exposure"], &["rank"]),
            None,
        ))
    }

    /// `strato breakdown --json`: one row per breakdown row (`processes[].rows[]`), with
    /// `rank` and `pid`.
    #[pyo3(signature = (*, per_step = false))]
    fn breakdown(&self, py: Python<'_>, per_step: bool) -> Table {
        let doc = py.detach(|| self.breakdown_doc(per_step));
        let groups: Vec<(String, Vec<Ordered>)> = list(&doc, "processes")
            .iter()
            .map(|p| {
                (
                    format!(
                        "rank {} pid {}",
                        plots_text(p.get("rank")),
                        plots_text(p.get("pid"))
                    ),
                    list(p, "rows").to_vec(),
                )
            })
            .collect();
        let svg = plots::stacked_groups("time by resource", &groups, "resource", "time_ns", 8);
        table_of(
            "breakdown",
            &doc,
            shape(&["processes", "rows"], &["rank", "pid"]),
            svg,
        )
    }

    /// The processes of `strato breakdown --json` (window and counts per process).
    #[pyo3(signature = (*, per_step = false))]
    fn breakdown_processes(&self, py: Python<'_>, per_step: bool) -> Table {
        let doc = py.detach(|| self.breakdown_doc(per_step));
        table_of(
            "breakdown_processes",
            &doc,
            shape(&["processes"], &[]),
            None,
        )
    }

    /// Per-operation totals of `strato breakdown --json` (`processes[].operations[]`).
    #[pyo3(signature = (*, per_step = false))]
    fn operations(&self, py: Python<'_>, per_step: bool) -> Table {
        let doc = py.detach(|| self.breakdown_doc(per_step));
        table_of(
            "operations",
            &doc,
            shape(&["processes", "operations"], &["rank", "pid"]),
            None,
        )
    }

    /// Level transitions of `strato breakdown --json` (`processes[].transitions[]`).
    #[pyo3(signature = (*, per_step = false))]
    fn transitions(&self, py: Python<'_>, per_step: bool) -> Table {
        let doc = py.detach(|| self.breakdown_doc(per_step));
        table_of(
            "transitions",
            &doc,
            shape(&["processes", "transitions"], &["rank", "pid"]),
            None,
        )
    }

    /// `strato hierarchy --json`: one row per rank (`ranks[]`).
    fn hierarchy(&self, py: Python<'_>) -> Table {
        let doc = py.detach(|| {
            Ordered::of(&strato_analysis::cross_stack::hierarchy::report(
                &Analyzed::new(&self.trace),
            ))
        });
        table_of("hierarchy", &doc, shape(&["ranks"], &[]), None)
    }

    /// `strato kernels --json`: one row per (rank, kernel name) (`ranks[].kernels[]`); `top`
    /// rows per rank, the rest folded into one `(other N)` row (0: all), as the command.
    #[pyo3(signature = (*, top = 20))]
    fn kernels(&self, py: Python<'_>, top: usize) -> Table {
        let doc = py.detach(|| self.kernels_doc(top));
        let groups: Vec<(String, Vec<Ordered>)> = list(&doc, "ranks")
            .iter()
            .map(|r| {
                (
                    format!("rank {}", plots_text(r.get("rank"))),
                    list(r, "kernels").to_vec(),
                )
            })
            .collect();
        let svg = plots::stacked_groups("kernel time per rank", &groups, "name", "total_ns", 8);
        table_of(
            "kernels",
            &doc,
            shape(&["ranks", "kernels"], &["rank"]),
            svg,
        )
    }

    /// Device time per launching op of `strato kernels --json` (`ranks[].ops[]`).
    #[pyo3(signature = (*, top = 20))]
    fn kernel_ops(&self, py: Python<'_>, top: usize) -> Table {
        let doc = py.detach(|| self.kernels_doc(top));
        table_of(
            "kernel_ops",
            &doc,
            shape(&["ranks", "ops"], &["rank"]),
            None,
        )
    }

    /// Per rank of `strato kernels --json`: device ops and time, and the launch / queue /
    /// submit latencies (`launch_latency.mean_ns`, ...).
    #[pyo3(signature = (*, top = 20))]
    fn kernel_latencies(&self, py: Python<'_>, top: usize) -> Table {
        let doc = py.detach(|| self.kernels_doc(top));
        table_of("kernel_latencies", &doc, shape(&["ranks"], &[]), None)
    }

    /// `strato layers --json` (`--by op|annotation`): one row per layer (`layers[]`; the
    /// `cpu` / `gpu` statistics flattened as `cpu.mean_ns`, ...).
    #[pyo3(signature = (*, by = "op", trim = 0.1, batch_size = None))]
    fn layers(
        &self,
        py: Python<'_>,
        by: &str,
        trim: f64,
        batch_size: Option<u64>,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.layers_doc(by, trim, batch_size))?;
        Ok(table_of("layers", &doc, shape(&["layers"], &[]), None))
    }

    /// The per-kernel table of `strato layers --json` (`kernels[]`).
    #[pyo3(signature = (*, by = "op", trim = 0.1, batch_size = None))]
    fn layer_kernels(
        &self,
        py: Python<'_>,
        by: &str,
        trim: f64,
        batch_size: Option<u64>,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.layers_doc(by, trim, batch_size))?;
        Ok(table_of(
            "layer_kernels",
            &doc,
            shape(&["kernels"], &[]),
            None,
        ))
    }

    /// `strato layers --by module --json`: one row per nn.Module (`modules[]`).
    fn modules(&self, py: Python<'_>) -> Table {
        let doc = py.detach(|| {
            Ordered::of(&strato_analysis::cross_stack::modules::modules(
                &Analyzed::new(&self.trace),
            ))
        });
        table_of("modules", &doc, shape(&["modules"], &[]), None)
    }

    /// `strato iterations --json`: one row per mined iteration (`sequences[].iterations[]`),
    /// with the sequence's rank, pid, device, stream and loop.
    #[pyo3(signature = (*, iterations = None, k0 = None, epsilon = None, max_loops = 3))]
    fn iterations(
        &self,
        py: Python<'_>,
        iterations: Option<Vec<usize>>,
        k0: Option<usize>,
        epsilon: Option<usize>,
        max_loops: usize,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.iterations_doc(iterations, k0, epsilon, max_loops))?;
        Ok(table_of(
            "iterations",
            &doc,
            shape(
                &["sequences", "iterations"],
                &["rank_index", "rank", "pid", "device", "stream", "loop"],
            ),
            None,
        ))
    }

    /// The mined loops of `strato iterations --json` (`sequences[]`, summary flattened).
    #[pyo3(signature = (*, iterations = None, k0 = None, epsilon = None, max_loops = 3))]
    fn iteration_loops(
        &self,
        py: Python<'_>,
        iterations: Option<Vec<usize>>,
        k0: Option<usize>,
        epsilon: Option<usize>,
        max_loops: usize,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.iterations_doc(iterations, k0, epsilon, max_loops))?;
        Ok(table_of(
            "iteration_loops",
            &doc,
            shape(&["sequences"], &[]),
            None,
        ))
    }

    /// `strato memory --json`: one row per device's allocation series (`devices[]`).
    #[pyo3(signature = (*, top = 20, max_points = 512, bins = 50))]
    fn memory(&self, py: Python<'_>, top: usize, max_points: usize, bins: usize) -> Table {
        let doc = py.detach(|| self.memory_doc(top, max_points, bins));
        table_of("memory", &doc, shape(&["devices"], &[]), None)
    }

    /// Copies per (rank, device, direction) of `strato memory --json` (`copies[]`).
    #[pyo3(signature = (*, top = 20, max_points = 512, bins = 50))]
    fn memory_copies(&self, py: Python<'_>, top: usize, max_points: usize, bins: usize) -> Table {
        let doc = py.detach(|| self.memory_doc(top, max_points, bins));
        table_of("memory_copies", &doc, shape(&["copies"], &[]), None)
    }

    /// `strato collectives --json`: one row per collective instance (`collectives[]`).
    #[pyo3(signature = (*, stragglers = 5))]
    fn collectives(&self, py: Python<'_>, stragglers: usize) -> Table {
        let doc = py.detach(|| self.collectives_doc(stragglers));
        table_of("collectives", &doc, shape(&["collectives"], &[]), None)
    }

    /// Per rank of `strato collectives --json` (`ranks[]`): arrivals, waits, imposed waits.
    #[pyo3(signature = (*, stragglers = 5))]
    fn collectives_ranks(&self, py: Python<'_>, stragglers: usize) -> Table {
        let doc = py.detach(|| self.collectives_doc(stragglers));
        let svg = plots::stacked_fields(
            "collective wait per rank",
            strato_report::svg::bars::Axis::Duration,
            list(&doc, "ranks"),
            |r| format!("rank {}", plots_text(r.get("rank"))),
            &[("wait_ns", "wait"), ("transfer_part_ns", "transfer")],
        );
        table_of("collectives_ranks", &doc, shape(&["ranks"], &[]), svg)
    }

    /// The worst late arrivals of `strato collectives --json` (`stragglers[]`, cause
    /// flattened as `cause.verdict`, ...).
    #[pyo3(signature = (*, stragglers = 5))]
    fn stragglers(&self, py: Python<'_>, stragglers: usize) -> Table {
        let doc = py.detach(|| self.collectives_doc(stragglers));
        table_of("stragglers", &doc, shape(&["stragglers"], &[]), None)
    }

    /// `strato critical-path --json`: one row per rank (`ranks[]`, time per kind flattened
    /// as `by_kind.<kind>`).
    fn critical_path(&self, py: Python<'_>) -> PyResult<Table> {
        let doc = py.detach(|| self.critical_path_doc())?;
        Ok(table_of(
            "critical_path",
            &doc,
            shape(&["ranks"], &[]),
            None,
        ))
    }

    /// The events on the critical path (`ranks[].events[]`).
    fn critical_path_events(&self, py: Python<'_>) -> PyResult<Table> {
        let doc = py.detach(|| self.critical_path_doc())?;
        Ok(table_of(
            "critical_path_events",
            &doc,
            shape(&["ranks", "events"], &[]),
            None,
        ))
    }

    /// `strato advise --json`: one row per finding (`findings[]`).
    #[pyo3(signature = (*, floor = None, all = false, disable = Vec::new()))]
    fn findings(
        &self,
        py: Python<'_>,
        floor: Option<f64>,
        all: bool,
        disable: Vec<String>,
    ) -> PyResult<Table> {
        let doc = py.detach(|| self.findings_doc(floor, all, disable))?;
        Ok(table_of("findings", &doc, shape(&["findings"], &[]), None))
    }

    /// `strato diff SELF OTHER --json`: one row per operation (`operations[]`, the delta
    /// flattened as `delta.a_ns`, ...).
    #[pyo3(signature = (other, *, per_step = false))]
    fn diff(&self, py: Python<'_>, other: &Profile, per_step: bool) -> Table {
        let doc = py.detach(|| self.diff_doc(other, per_step));
        table_of("diff", &doc, shape(&["operations"], &[]), None)
    }

    /// The kernels of `strato diff --json` (`kernels[]`).
    #[pyo3(signature = (other, *, per_step = false))]
    fn diff_kernels(&self, py: Python<'_>, other: &Profile, per_step: bool) -> Table {
        let doc = py.detach(|| self.diff_doc(other, per_step));
        table_of("diff_kernels", &doc, shape(&["kernels"], &[]), None)
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
        let values = option_texts(options)?;
        let outcome = py
            .detach(|| analysis.run_trace(&self.trace, &values))
            .map_err(OpenError::from)?;
        Ok(Table::new(spec.name, outcome.batch(spec), None))
    }

    /// `profile.NAME(**options)` for a registered analysis NAME (snake_case): its main table,
    /// or another with `table=`.
    fn __getattr__(slf: &Bound<'_, Self>, name: &str) -> PyResult<Py<PyAny>> {
        if name.starts_with('_') || strato_engine::registry::find(name).is_none() {
            return Err(pyo3::exceptions::PyAttributeError::new_err(format!(
                "'Profile' object has no attribute '{name}'"
            )));
        }
        let py = slf.py();
        let method = slf.getattr("analysis")?;
        let partial = py.import("functools")?.getattr("partial")?;
        Ok(partial.call1((method, name))?.unbind())
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
        let gpu = self.gpu_time(py, "whole", 30.0)?;
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

fn plots_text(v: Option<&Ordered>) -> String {
    match v {
        Some(Ordered::Int(i)) => i.to_string(),
        Some(Ordered::UInt(u)) => u.to_string(),
        Some(Ordered::Text(s)) => s.clone(),
        _ => "?".into(),
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
/// `true`/`false`, numbers and strings as their text.
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
        } else {
            value.str()?.to_string()
        };
        out.push((key, text));
    }
    Ok(out)
}

/// The registered analyses: per analysis its name, Python method, summary, window, doc page,
/// options (name, help, default) and tables (name, what a row is, and where its rows are in
/// `strato NAME --json`: the path of lists and the fields of enclosing objects carried).
#[pyfunction]
fn analyses(py: Python<'_>) -> PyResult<Vec<Py<pyo3::types::PyDict>>> {
    use pyo3::types::{PyDict, PyList};
    let mut out = Vec::new();
    for a in strato_engine::registry::ANALYSES {
        let d = PyDict::new(py);
        d.set_item("name", a.name)?;
        d.set_item("method", a.python_name())?;
        d.set_item("summary", a.summary)?;
        d.set_item("window", a.window)?;
        d.set_item("doc", a.doc)?;
        let options: Vec<(&str, &str, &str)> = a
            .options
            .iter()
            .map(|o| (o.name, o.help, o.default))
            .collect();
        d.set_item("options", options)?;
        let tables = PyList::empty(py);
        for t in a.tables {
            let table = PyDict::new(py);
            table.set_item("name", t.name)?;
            table.set_item("about", t.about)?;
            table.set_item("path", t.path.to_vec())?;
            table.set_item("inherit", t.inherit.to_vec())?;
            tables.append(table)?;
        }
        d.set_item("tables", tables)?;
        out.push(d.unbind());
    }
    Ok(out)
}

#[pymodule]
fn _analysis(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Profile>()?;
    m.add_function(wrap_pyfunction!(analyses, m)?)?;
    m.add_class::<Table>()?;
    m.add_function(wrap_pyfunction!(open_profile, m)?)?;
    errors::register(m)?;
    Ok(())
}
