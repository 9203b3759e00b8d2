//! Presenters: the self-contained HTML report (`strato report`) with SVG plots.
//!
//! This crate reads analysis results only ([`ReportInput`]: the results of
//! `strato_analysis`'s functions), never a trace file or an importer. [`render`] writes one
//! HTML document: inline CSS, inline SVG, no script, no network, so it opens from `file://`
//! and can be mailed. Every text that comes from data (operation, kernel, file names) goes
//! through [`html::esc`].
//!
//! - [`html`]: the escaping function and the HTML builder;
//! - [`svg`]: one module per kind of plot (stacked/grouped bars, line, log-log scatter,
//!   timeline);
//! - [`sections`]: one function per report section, each drawing its plot and the table
//!   behind it, or saying why the profile has no data for it.
//!
//! Size bound (see `docs/report.md`): series are downsampled to at most
//! [`svg::line::MAX_POINTS`] points, the kernel ranking keeps the top [`KERNEL_TOP`] and folds
//! the rest, tables keep at most [`TABLE_ROWS`] rows, names are shortened to
//! [`NAME_CHARS`] characters in tables; a report stays under [`SIZE_BOUND_BYTES`] (tested on
//! every dev trace).

pub mod html;
pub mod sections;
pub mod svg;

use strato_analysis::breakdown::BreakdownReport;
use strato_analysis::busy::BusySeries;
use strato_analysis::diff::DiffReport;
use strato_analysis::info::TraceInfo;
use strato_analysis::iterations::IterationsReport;
use strato_analysis::kernel_stats::KernelStatsReport;
use strato_analysis::layers::LayersReport;
use strato_analysis::memory::MemoryReport;
use strato_analysis::util::UtilReport;

/// Kernels shown in the ranking before the rest is folded into one bar.
pub const KERNEL_TOP: usize = 30;
/// Most rows of any table in the report.
pub const TABLE_ROWS: usize = 200;
/// Longest name in a table cell (the full name is in the plots' tooltips up to this too).
pub const NAME_CHARS: usize = 160;
/// The documented bound on a report's size.
pub const SIZE_BOUND_BYTES: usize = 2 * 1024 * 1024;

/// An analysis result, or why there is none.
pub type Part<T> = Result<T, String>;

/// Everything a report shows: the results of the analyses, each optional with the reason it
/// was not computed.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// Page title (e.g. the input's file name).
    pub title: String,
    /// What produced it (`strato 0.1.0`), shown in the footer.
    pub generator: String,
    pub info: TraceInfo,
    pub breakdown: Part<BreakdownReport>,
    pub util: Part<UtilReport>,
    /// Device busy fraction over time (`strato_analysis::busy`).
    pub busy: Vec<BusySeries>,
    /// Kernel statistics, folded after [`KERNEL_TOP`].
    pub kernels: Part<KernelStatsReport>,
    pub layers: Part<LayersReport>,
    pub iterations: Part<IterationsReport>,
    pub memory: Part<MemoryReport>,
    /// A comparison with another profile, when one was asked for.
    pub diff: Option<DiffReport>,
}

/// Renders the report as one HTML document.
pub fn render(input: &ReportInput) -> String {
    sections::document(input)
}
