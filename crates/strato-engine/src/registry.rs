//! The registry: every analysis registered once, and the one way any front end runs one by its
//! name. An analysis implements [`strato_analysis::registry::Analysis`] in its own module
//! (options, result, tables, text, window, doc page); one line in [`ANALYSES`] registers it.
//! From that line:
//! - the `strato` command has a subcommand `strato NAME` (its options as flags, `--json`,
//!   `--csv [--table T]`), with help and examples from the declaration;
//! - Python's `Profile.analysis(NAME, **options)` (and `profile.NAME(...)`) returns its tables;
//! - `strato sql` has a view per table (computed when a query names it);
//! - `strato report` has a section with its main table, unless the report has its own section
//!   for it ([`InReport`]);
//! - `stratoscope.analyses()` and `strato NAME --help` describe it.
//!
//! Options reach an analysis as text (a command-line value, a Python value's text) checked
//! against its [`OptionSpec`]s, then as its typed options through serde: one parser for every
//! front end, and an unknown or malformed option is one [`EngineError::InvalidOption`].

use std::path::PathBuf;

use arrow::record_batch::RecordBatch;
use serde::de::DeserializeOwned;
use serde::Serialize;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::registry::{
    Analysis, AnalysisError, Comparison, Events, InReport, OptionKind, OptionSpec, RankPart, Reads,
    TableSpec,
};
use strato_analysis::text::terminal::Terminal;
use strato_trace::Trace;

use crate::opening::{Opening, Plain};
use crate::rows::{self, Ordered, Shape};
use crate::{Engine, EngineError};

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Every registered analysis, in the order front ends list them.
pub static ANALYSES: &[Registered] = &[
    Registered::with_opening::<strato_analysis::info::Info, crate::info::Counted>(),
    Registered::of::<strato_analysis::device_time::gpu_time::GpuTime>(),
    Registered::of::<strato_analysis::cross_stack::breakdown::Breakdown>(),
    Registered::with_opening::<
        strato_analysis::distributed::collectives::Collectives,
        crate::collectives::RankByRank,
    >(),
    Registered::of::<strato_analysis::cross_stack::hierarchy::SpanHierarchy>(),
    Registered::of::<strato_analysis::cross_stack::hierarchy::Tree>(),
    Registered::of::<strato_analysis::cross_stack::layers::Layers>(),
    Registered::of::<strato_analysis::cross_stack::modules::Modules>(),
    Registered::of::<strato_analysis::cross_stack::layers::RooflineAnalysis>(),
    Registered::of::<strato_analysis::cross_stack::ops::Ops>(),
    Registered::of::<strato_analysis::device_time::kernel_stats::Kernels>(),
    Registered::of::<strato_analysis::device_time::memory::Memory>(),
    Registered::of::<strato_analysis::patterns::iterations::Iterations>(),
    Registered::of::<strato_analysis::device_time::queue_length::QueueLength>(),
    Registered::of::<strato_analysis::device_time::util::Util>(),
    Registered::with_opening::<
        strato_analysis::paths::critical_path::CriticalPath,
        crate::steps::StepWindows,
    >(),
    Registered::with_opening::<strato_analysis::paths::whatif::WhatIf, crate::steps::WhatIfSteps>(),
    Registered::of::<strato_analysis::advise::Advise>(),
];

/// The registered analysis called `name` (its kebab-case name, or the snake_case form Python
/// uses).
pub fn find(name: &str) -> Option<&'static Registered> {
    ANALYSES
        .iter()
        .find(|a| a.name == name || a.name.replace('-', "_") == name)
}

/// The registered table called `name` (a SQL view's name) and its analysis.
pub fn find_table(name: &str) -> Option<(&'static Registered, &'static TableSpec)> {
    ANALYSES
        .iter()
        .find_map(|a| a.tables.iter().find(|t| t.name == name).map(|t| (a, t)))
}

/// An option value as a front end gives it: its name (snake_case) and its text.
pub type OptionValues = [(String, String)];

/// A registered analysis, its types erased for the front ends (see [`Analysis`] for each
/// field's rule).
#[derive(Clone, Copy)]
pub struct Registered {
    pub name: &'static str,
    pub summary: &'static str,
    pub window: &'static str,
    pub doc: &'static str,
    pub examples: &'static [&'static str],
    pub options: &'static [OptionSpec],
    pub tables: &'static [TableSpec],
    pub rank_by_rank: bool,
    pub reads: Reads,
    pub in_report: InReport,
    pub short_flags: &'static [(&'static str, char)],
    run_analyzed: fn(&Analyzed<'_>, &OptionValues) -> Result<Outcome>,
    run_inputs: fn(&Engine, &[PathBuf], &OptionValues) -> Result<Outcome>,
    check: fn() -> std::result::Result<(), String>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a registered analysis gave, shown on demand: as JSON, as a document for tables, as
/// text, as its own CSV. Holds the typed result and the options it ran with.
pub struct Outcome {
    shown: Box<dyn Shown>,
    /// The document, made once when a table is first asked for.
    doc: std::sync::OnceLock<Ordered>,
    read: Read,
}

/// How an analysis read its inputs ([`Outcome::read`]): what its memory followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Every event of the input held at once.
    Whole,
    /// By the analysis's own opening ([`Opening`]: in parts, or its own streaming).
    OwnOpening,
    /// One file or stored profile streamed ([`Analysis::stream`]).
    Streamed,
    /// Several rank files streamed one after the other as one job ([`Engine::stream_job`]).
    JobStreamed,
    /// Rank file by rank file, the parts merged ([`Analysis::RANK_BY_RANK`]).
    RankByRank,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outcome").finish_non_exhaustive()
    }
}

/// The typed result of an analysis, its type erased.
trait Shown: Send + Sync {
    fn json(&self) -> String;
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()>;
    fn doc(&self) -> Ordered;
    fn text(&self, terminal: &Terminal) -> String;
    fn csv(&self, raw: bool) -> Option<String>;
}

struct Typed<A: Analysis> {
    output: A::Output,
    options: A::Options,
}

impl<A: Analysis> Shown for Typed<A> {
    fn json(&self) -> String {
        // Our result types serialise without failing (no maps with non-string keys).
        serde_json::to_string_pretty(&self.output).unwrap_or_default()
    }
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(out, &self.output).map_err(std::io::Error::from)
    }
    fn doc(&self) -> Ordered {
        Ordered::of(&self.output)
    }
    fn text(&self, _terminal: &Terminal) -> String {
        A::render_text(&self.output, &self.options)
    }
    fn csv(&self, raw: bool) -> Option<String> {
        A::render_csv(&self.output, &self.options, raw)
    }
}

struct Compared<C: Comparison> {
    output: C::Output,
    options: C::Options,
}

impl<C: Comparison> Shown for Compared<C> {
    fn json(&self) -> String {
        serde_json::to_string_pretty(&self.output).unwrap_or_default()
    }
    fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(out, &self.output).map_err(std::io::Error::from)
    }
    fn doc(&self) -> Ordered {
        Ordered::of(&self.output)
    }
    fn text(&self, terminal: &Terminal) -> String {
        C::render_text(&self.output, &self.options, terminal)
    }
    fn csv(&self, _raw: bool) -> Option<String> {
        None
    }
}

impl Outcome {
    /// The outcome of comparison `C` run with `options`.
    pub fn compared<C: Comparison + 'static>(output: C::Output, options: C::Options) -> Outcome {
        Outcome {
            shown: Box::new(Compared::<C> { output, options }),
            doc: std::sync::OnceLock::new(),
            read: Read::Whole,
        }
    }

    /// The outcome of `A` run with `options`, for a front end that ran it itself over a trace
    /// it also draws from (`strato critical-path --overlay`).
    pub fn of<A: Analysis + 'static>(output: A::Output, options: A::Options) -> Outcome {
        Outcome {
            shown: Box::new(Typed::<A> { output, options }),
            doc: std::sync::OnceLock::new(),
            read: Read::Whole,
        }
    }

    /// The same result, read as `read` says.
    fn read_as(mut self, read: Read) -> Outcome {
        self.read = read;
        self
    }

    /// How the analysis read its inputs.
    pub fn read(&self) -> Read {
        self.read
    }

    /// The result's serde JSON, pretty-printed (`--json`).
    pub fn json(&self) -> String {
        self.shown.json()
    }

    /// [`Outcome::json`]'s bytes written to `out` as they are made (a large result is never
    /// held twice, as a value and as its text).
    pub fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
        self.shown.write_json(&mut buffered)?;
        std::io::Write::flush(&mut buffered)
    }

    /// The result with its fields in declared order (the tables' source).
    pub fn doc(&self) -> &Ordered {
        self.doc.get_or_init(|| self.shown.doc())
    }

    /// The text rendering, for no terminal ([`Terminal::default`]: no colour, 120 columns).
    pub fn text(&self) -> String {
        self.shown.text(&Terminal::default())
    }

    /// The text rendering for `terminal` (a comparison's text fits its width and paints when
    /// it colours; an analysis's text is the same on every terminal).
    pub fn text_on(&self, terminal: &Terminal) -> String {
        self.shown.text(terminal)
    }

    /// The analysis's own CSV (`raw`: cells as they are), when it writes one
    /// ([`Analysis::render_csv`]).
    pub fn own_csv(&self, raw: bool) -> Option<String> {
        self.shown.csv(raw)
    }

    /// The rows of `table` as an Arrow record batch.
    pub fn batch(&self, table: &TableSpec) -> RecordBatch {
        rows::batch(&rows::rows(self.doc(), &shape(table)))
    }

    /// The rows of `table` as text cells, with their column names (the batch's columns).
    pub fn text_rows(&self, table: &TableSpec) -> (Vec<String>, Vec<Vec<String>>) {
        rows::text_rows(&rows::rows(self.doc(), &shape(table)))
    }
}

fn shape(table: &TableSpec) -> Shape {
    Shape {
        path: table.path,
        inherit: table.inherit,
    }
}

impl Registered {
    /// The registration of analysis `A`.
    pub const fn of<A: Analysis + 'static>() -> Registered {
        Registered::with_opening::<A, Plain>()
    }

    /// The registration of analysis `A`, opened by `O` first ([`Opening`]).
    pub const fn with_opening<A: Analysis + 'static, O: Opening<A>>() -> Registered {
        Registered {
            name: A::NAME,
            summary: A::SUMMARY,
            window: A::WINDOW,
            doc: A::DOC,
            examples: A::EXAMPLES,
            options: A::OPTIONS,
            tables: A::TABLES,
            rank_by_rank: A::RANK_BY_RANK,
            reads: A::READS,
            in_report: A::IN_REPORT,
            short_flags: A::SHORT_FLAGS,
            run_analyzed: run_analyzed::<A>,
            run_inputs: run_inputs::<A, O>,
            check: check::<A>,
        }
    }

    /// The snake_case name (Python's method).
    pub fn python_name(&self) -> String {
        self.name.replace('-', "_")
    }

    /// The table called `name`, or the main table when `None`.
    pub fn table(&self, name: Option<&str>) -> Result<&'static TableSpec> {
        table_named(self.name, self.tables, name)
    }

    /// What it declares, for the front ends that describe it.
    pub fn declaration(&self) -> Declaration {
        Declaration {
            name: self.name,
            summary: self.summary,
            window: self.window,
            doc: self.doc,
            examples: self.examples,
            options: self.options,
            tables: self.tables,
            in_report: self.in_report,
            short_flags: self.short_flags,
            inputs: Inputs::One,
        }
    }

    /// Runs the analysis over a trace already open.
    pub fn run_trace(&self, trace: &Trace, options: &OptionValues) -> Result<Outcome> {
        (self.run_analyzed)(&Analyzed::new(trace), options)
    }

    /// Runs the analysis over a trace already open and analysed (its shared indexes built
    /// once for several analyses: the report's sections).
    pub fn run_analyzed(&self, analyzed: &Analyzed<'_>, options: &OptionValues) -> Result<Outcome> {
        (self.run_analyzed)(analyzed, options)
    }

    /// Opens `inputs` with what the analysis reads and runs it: rank file by rank file (each
    /// imported, analysed and dropped) when it runs rank by rank and the inputs allow, else
    /// over the whole trace.
    pub fn run(
        &self,
        engine: &Engine,
        inputs: &[PathBuf],
        options: &OptionValues,
    ) -> Result<Outcome> {
        (self.run_inputs)(engine, inputs, options)
    }

    /// Whether the declaration holds together: option specs and typed options agree (names,
    /// defaults), table names are unique among the analyses (a comparison's check looks at
    /// the comparisons too). For tests.
    pub fn check(&self) -> std::result::Result<(), String> {
        (self.check)()?;
        unique_tables(
            self.name,
            self.tables,
            ANALYSES.iter().flat_map(|a| a.tables),
        )
    }

    /// `values` with the options `table` is computed with ([`TableSpec::options`]) added where
    /// `values` gives none of its own for them: what a front end runs the analysis with to
    /// show that table.
    pub fn options_for_table(table: &TableSpec, values: &OptionValues) -> Vec<(String, String)> {
        let mut out = values.to_vec();
        for (name, value) in table.options {
            if !values.iter().any(|(n, _)| n.replace('-', "_") == *name) {
                out.push(((*name).to_owned(), (*value).to_owned()));
            }
        }
        out
    }

    /// The import options of what the analysis reads.
    pub fn import_options(&self, engine: &Engine) -> Result<strato_io::ImportOptions> {
        import_options(engine, self.reads)
    }
}

/// The import options of an analysis or comparison that reads `reads`: only those events,
/// and the attributes of whom it names.
pub fn import_options(engine: &Engine, reads: Reads) -> Result<strato_io::ImportOptions> {
    let all = engine.import_options(reads.args.is_some())?;
    Ok(strato_io::ImportOptions {
        projection: match reads.events {
            Events::Spans => strato_io::Projection::SPANS,
            Events::DeviceTime => strato_io::Projection::DEVICE_TIME,
            Events::NoFlows => strato_io::Projection::NO_FLOWS,
            Events::All => strato_io::Projection::ALL,
        },
        args_scope: reads.args.unwrap_or_default(),
        ..all
    })
}

fn run_analyzed<A: Analysis + 'static>(
    analyzed: &Analyzed<'_>,
    values: &OptionValues,
) -> Result<Outcome> {
    let options = typed_options::<A>(values)?;
    let output = A::run(analyzed, &options).map_err(|e| EngineError::Analysis(e.0))?;
    Ok(Outcome::of::<A>(output, options))
}

/// Runs `A` over `inputs` the leanest way they allow: its own opening (`O`), else fed while a
/// single file or stored profile streams ([`Analysis::stream`]), else rank file by rank file
/// ([`Analysis::RANK_BY_RANK`]), else over the whole trace.
fn run_inputs<A: Analysis + 'static, O: Opening<A>>(
    engine: &Engine,
    inputs: &[PathBuf],
    values: &OptionValues,
) -> Result<Outcome> {
    let options = typed_options::<A>(values)?;
    // Why the analysis cannot run, after the input's name (the first one of several).
    let failed = |e: AnalysisError| {
        let input = inputs.first().map(|p| p.display().to_string());
        EngineError::Analysis(match input {
            Some(input) => format!("{input}: {e}"),
            None => e.0,
        })
    };
    let import = import_options(engine, A::READS)?;
    if let Some(output) = O::open(engine, inputs, &import, &options)? {
        return Ok(Outcome::of::<A>(output, options).read_as(Read::OwnOpening));
    }
    if let Some((output, read)) = streamed::<A>(engine, inputs, &import, &options)? {
        return Ok(Outcome::of::<A>(output, options).read_as(read));
    }
    if A::RANK_BY_RANK {
        if let Some(streamed) =
            engine.map_ranks(inputs, &import, |t| A::run(&Analyzed::new(t), &options))?
        {
            let offsets = streamed.offsets();
            let parts = (streamed.parts.into_iter().zip(offsets))
                .map(|(part, (first_rank, _))| {
                    Ok(RankPart {
                        value: part.value.map_err(failed)?,
                        first_rank,
                        job_ranks: part.job_ranks,
                    })
                })
                .collect::<Result<_>>()?;
            // A rank-by-rank analysis always merges (`check` holds every registration to it).
            if let Some(output) = A::merge(parts, &options) {
                return Ok(Outcome::of::<A>(output, options).read_as(Read::RankByRank));
            }
        }
    }
    let trace = engine.load(inputs, &import)?;
    let output = A::run(&Analyzed::new(&trace), &options).map_err(failed)?;
    Ok(Outcome::of::<A>(output, options))
}

/// `A`'s result fed while the input streams: a stored profile or store batch by batch
/// ([`Engine::stream_stored`]), one Chrome/Kineto JSON file as it is read
/// ([`Engine::stream_file`]), or, for an analysis that does not read a job rank by rank,
/// several rank files one after the other as one job ([`Engine::stream_job`]); `None` when
/// `A` does not stream or the input does not (it is then opened whole). A stream the stored
/// read gave up on midway is dropped and the file path starts a fresh one.
fn streamed<A: Analysis>(
    engine: &Engine,
    inputs: &[PathBuf],
    import: &strato_io::ImportOptions,
    options: &A::Options,
) -> Result<Option<(A::Output, Read)>> {
    if engine.attributes_graph_capture() {
        return Ok(None);
    }
    let [input] = inputs else {
        return streamed_job::<A>(engine, inputs, import, options);
    };
    if input.is_dir()
        && !strato_store::is_profile_dir(input)
        && !strato_store::partitioned::is_store_dir(input)
    {
        return streamed_job::<A>(engine, inputs, import, options);
    }
    let Some(mut stream) = A::stream(options) else {
        return Ok(None);
    };
    let mut stored = |batch: &mut Trace| {
        batch.flows.clear();
        stream.add(batch);
    };
    if let Some(trace) = engine.stream_stored(inputs, import, &mut stored)? {
        return Ok(Some((stream.finish(&trace), Read::Streamed)));
    }
    let Some(mut stream) = A::stream(options) else {
        return Ok(None);
    };
    let import = no_flows_kept(import);
    let mut sink = |batch: &mut Trace| {
        stream.add(batch);
        crate::drop_batch_events(batch);
        batch.flows.clear();
        Ok(())
    };
    let Some(trace) = engine.stream_file(input, &import, &mut sink)? else {
        return Ok(None);
    };
    // The whole open maps graph-replayed kernels through the file's graph node links: the
    // stream, which saw the events as they are, is dropped (as `stream_stored` does).
    if import.projection.flows && strato_trace::names::has_graph_node_links(&trace) {
        return Ok(None);
    }
    Ok(Some((stream.finish(&trace), Read::Streamed)))
}

/// `A`'s result fed while the rank files of `inputs` stream one after the other as one job
/// ([`Engine::stream_job`]); `None` when `A` reads a job rank by rank (in parallel, one rank
/// held at a time: it keeps less than a stream of the whole job), does not stream, or a file
/// does not stream.
fn streamed_job<A: Analysis>(
    engine: &Engine,
    inputs: &[PathBuf],
    import: &strato_io::ImportOptions,
    options: &A::Options,
) -> Result<Option<(A::Output, Read)>> {
    if A::RANK_BY_RANK {
        return Ok(None);
    }
    let Some(files) = engine.rank_files(inputs) else {
        return Ok(None);
    };
    let Some(mut stream) = A::stream(options) else {
        return Ok(None);
    };
    let import = no_flows_kept(import);
    let mut sink = |batch: &mut Trace| {
        stream.add(batch);
        Ok(())
    };
    let Some(trace) = engine.stream_job(&files, &import, &mut sink)? else {
        return Ok(None);
    };
    if import.projection.flows && strato_trace::names::has_graph_node_links(&trace) {
        return Ok(None);
    }
    Ok(Some((stream.finish(&trace), Read::JobStreamed)))
}

/// `import` with no flow kept in the trace returned: a stream is handed no flows, and the
/// input's are read only to find graph node links (which send it to the whole trace), so each
/// complete flow is handed over once and dropped (`flow_ends` off).
fn no_flows_kept(import: &strato_io::ImportOptions) -> strato_io::ImportOptions {
    strato_io::ImportOptions {
        projection: strato_io::Projection {
            flow_ends: false,
            ..import.projection
        },
        ..import.clone()
    }
}

/// The JSON value of option `spec` given as `text`.
fn option_value(
    analysis: &str,
    spec: &OptionSpec,
    text: &str,
) -> Result<serde_json::Value, String> {
    let bad = |what: &str| format!("{analysis}: option {}: {what}, not {text:?}", spec.name);
    match spec.kind {
        // An optional count not given (its default, `""`).
        OptionKind::Count { .. } if text.is_empty() => Ok(serde_json::Value::Null),
        OptionKind::Counts { min } => text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| match t.parse::<u64>() {
                Ok(n) if n >= min => Ok(serde_json::Value::from(n)),
                _ => Err(bad(&format!(
                    "whole numbers of at least {min} separated by commas"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(serde_json::Value::Array),
        OptionKind::Count { min } => match text.trim().parse::<u64>() {
            Ok(n) if n >= min => Ok(n.into()),
            _ => Err(bad(&format!("a whole number of at least {min}"))),
        },
        // An optional number not given (its default, `""`).
        OptionKind::Number if text.trim().is_empty() => Ok(serde_json::Value::Null),
        OptionKind::Number => match text.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x.into()),
            _ => Err(bad("a finite number")),
        },
        OptionKind::Flag => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true.into()),
            "false" | "0" | "no" | "off" => Ok(false.into()),
            _ => Err(bad("true or false")),
        },
        OptionKind::Positives => text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| match t.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(serde_json::Value::from(x)),
                _ => Err(bad("positive numbers separated by commas")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(serde_json::Value::Array),
        // Read by `typed_options` (its text is the file's); the default, not given, is null.
        OptionKind::File { .. } if text.is_empty() => Ok(serde_json::Value::Null),
        OptionKind::File { .. } => Ok(text.into()),
        OptionKind::Words { what, words } => text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| match words.iter().find(|w| **w == t) {
                Some(w) => Ok(serde_json::Value::from(*w)),
                None => Err(format!(
                    "{analysis}: option {}: no such {what}: {t:?} ({what}s: {})",
                    spec.name,
                    words.join(", ")
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(serde_json::Value::Array),
        OptionKind::Step => match text.trim() {
            "" | "all" => Ok(text.trim().into()),
            n if n.parse::<u64>().is_ok() => Ok(n.into()),
            _ => Err(bad("a step number (N of ProfilerStep#N) or `all`")),
        },
        OptionKind::Text { .. } => Ok(text.into()),
        OptionKind::Texts { .. } => Ok(serde_json::Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(serde_json::Value::from)
                .collect(),
        )),
        OptionKind::Choice(words) => match words.iter().find(|w| **w == text) {
            Some(w) => Ok((*w).into()),
            None => Err(bad(&format!("one of {}", words.join(", ")))),
        },
    }
}

/// The typed options of `A` from option values (unset ones at their defaults).
pub fn typed_options<A: Analysis>(values: &OptionValues) -> Result<A::Options> {
    options_of(A::NAME, A::OPTIONS, values, A::check_options)
}

/// Options of the analysis or comparison `name`, declared by `specs`, from option values
/// (unset ones at their defaults), checked by `check`.
pub(crate) fn options_of<O: DeserializeOwned>(
    name: &str,
    specs: &[OptionSpec],
    values: &OptionValues,
    check: fn(&O) -> std::result::Result<(), String>,
) -> Result<O> {
    let mut map = serde_json::Map::new();
    for (given, text) in values {
        let Some(spec) = specs.iter().find(|s| s.name == given.replace('-', "_")) else {
            let known: Vec<&str> = specs.iter().map(|s| s.name).collect();
            return Err(EngineError::InvalidOption(format!(
                "{name}: no option {given:?} (options: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        };
        let value = match spec.kind {
            OptionKind::File { what, check } if !text.is_empty() => {
                let path = std::path::Path::new(text);
                let content = strato_io::config::read_config_text(path, what)?;
                check(&content).map_err(|e| EngineError::option(path, e))?;
                content.into()
            }
            _ => option_value(name, spec, text).map_err(EngineError::InvalidOption)?,
        };
        map.insert(spec.name.to_owned(), value);
    }
    let options: O = serde_json::from_value(serde_json::Value::Object(map))
        .map_err(|e| EngineError::InvalidOption(format!("{name}: {e}")))?;
    check(&options).map_err(|e| EngineError::InvalidOption(format!("{name}: {e}")))?;
    Ok(options)
}

fn check<A: Analysis>() -> std::result::Result<(), String> {
    check_declared::<A::Options>(A::NAME, A::OPTIONS, A::TABLES)?;
    if A::RANK_BY_RANK && A::merge(Vec::new(), &A::Options::default()).is_none() {
        return Err(format!("{}: runs rank by rank but does not merge", A::NAME));
    }
    Ok(())
}

/// Whether the typed options `O`'s defaults agree with `specs` (names, defaults), and there
/// is a table.
pub(crate) fn check_declared<O: Serialize + Default>(
    name: &str,
    specs: &[OptionSpec],
    tables: &[TableSpec],
) -> std::result::Result<(), String> {
    let defaults = serde_json::to_value(O::default()).map_err(|e| e.to_string())?;
    let fields: Vec<&String> = match &defaults {
        serde_json::Value::Object(map) => map.keys().collect(),
        serde_json::Value::Null => Vec::new(),
        other => return Err(format!("{name}: options serialise as {other}")),
    };
    if fields.len() != specs.len() {
        return Err(format!(
            "{name}: {} typed options, {} option specs",
            fields.len(),
            specs.len()
        ));
    }
    for spec in specs {
        let declared = option_value(name, spec, spec.default)?;
        if defaults.get(spec.name) != Some(&declared) {
            return Err(format!(
                "{name}: option {}: default {} in its spec, {:?} in the typed options",
                spec.name,
                spec.default,
                defaults.get(spec.name)
            ));
        }
    }
    if tables.is_empty() {
        return Err(format!("{name}: no table"));
    }
    Ok(())
}

/// Whether each of `tables` (of `name`) is the only table of its name among `all` (every
/// table of the registry: the analyses', and the comparisons' when a comparison is checked).
pub(crate) fn unique_tables<'t>(
    name: &str,
    tables: &[TableSpec],
    all: impl Iterator<Item = &'t TableSpec> + Clone,
) -> std::result::Result<(), String> {
    for table in tables {
        if all.clone().filter(|t| t.name == table.name).count() != 1 {
            return Err(format!("{name}: table name {} is not unique", table.name));
        }
    }
    Ok(())
}

/// The table of `tables` (of `owner`) called `name`, or the main table when `None`.
pub(crate) fn table_named(
    owner: &str,
    tables: &'static [TableSpec],
    name: Option<&str>,
) -> Result<&'static TableSpec> {
    match name {
        None => tables
            .first()
            .ok_or_else(|| EngineError::InvalidOption(format!("{owner}: has no table"))),
        Some(name) => tables.iter().find(|t| t.name == name).ok_or_else(|| {
            let names: Vec<&str> = tables.iter().map(|t| t.name).collect();
            EngineError::InvalidOption(format!(
                "{owner}: no table {name:?} (tables: {})",
                names.join(", ")
            ))
        }),
    }
}

/// The first of `tables` that `values` allow: none of the options it is computed with
/// ([`TableSpec::options`]) is given another value (`diff --by-op`'s main table is `diff_ops`,
/// since `diff` is computed with `by_op=false`); the main table when none is.
pub fn main_table(
    tables: &'static [TableSpec],
    values: &OptionValues,
) -> Option<&'static TableSpec> {
    let allows = |table: &TableSpec| {
        table.options.iter().all(|(name, value)| {
            values
                .iter()
                .filter(|(given, _)| given.replace('-', "_") == *name)
                .all(|(_, given)| given.eq_ignore_ascii_case(value))
        })
    };
    tables.iter().find(|t| allows(t)).or_else(|| tables.first())
}

/// The table of `tables` (of `owner`) that a front end shows: the one called `name`, else
/// the first `values` allow ([`main_table`]).
pub fn table_for(
    owner: &str,
    tables: &'static [TableSpec],
    name: Option<&str>,
    values: &OptionValues,
) -> Result<&'static TableSpec> {
    match (name, main_table(tables, values)) {
        (None, Some(table)) => Ok(table),
        _ => table_named(owner, tables, name),
    }
}

/// How many profiles a registered analysis takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// One profile (its files, rank directories, ...): an [`Analysis`].
    One,
    /// Two profiles, A and B: a [`Comparison`].
    Two,
}

/// What a registered analysis or comparison declares, for the front ends that describe it
/// (command-line help, Python's listing).
#[derive(Debug, Clone, Copy)]
pub struct Declaration {
    pub name: &'static str,
    pub summary: &'static str,
    pub window: &'static str,
    pub doc: &'static str,
    pub examples: &'static [&'static str],
    pub options: &'static [OptionSpec],
    pub tables: &'static [TableSpec],
    pub in_report: InReport,
    pub short_flags: &'static [(&'static str, char)],
    pub inputs: Inputs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[test]
    fn every_registration_holds_together() {
        for a in ANALYSES {
            a.check().unwrap_or_else(|e| panic!("{e}"));
            assert!(!a.examples.is_empty(), "{}: no example", a.name);
            let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(a.doc);
            assert!(doc.is_file(), "{}: no doc page {}", a.name, a.doc);
            assert_eq!(find(a.name).map(|f| f.name), Some(a.name));
            assert_eq!(find(&a.python_name()).map(|f| f.name), Some(a.name));
        }
    }

    /// An analysis of one option of each kind, counting spans.
    #[derive(Debug)]
    struct Counting;

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct CountingOptions {
        at_least: u64,
        scale: f64,
        verbose: bool,
        unit: String,
    }

    impl Default for CountingOptions {
        fn default() -> Self {
            CountingOptions {
                at_least: 1,
                scale: 1.5,
                verbose: false,
                unit: "ns".into(),
            }
        }
    }

    impl Analysis for Counting {
        const NAME: &'static str = "counting";
        const SUMMARY: &'static str = "spans";
        const WINDOW: &'static str = "the trace";
        const DOC: &'static str = "README.md";
        const EXAMPLES: &'static [&'static str] = &["strato counting t.json"];
        const OPTIONS: &'static [OptionSpec] = &[
            OptionSpec {
                name: "at_least",
                help: "",
                kind: OptionKind::Count { min: 1 },
                default: "1",
            },
            OptionSpec {
                name: "scale",
                help: "",
                kind: OptionKind::Number,
                default: "1.5",
            },
            OptionSpec {
                name: "verbose",
                help: "",
                kind: OptionKind::Flag,
                default: "false",
            },
            OptionSpec {
                name: "unit",
                help: "",
                kind: OptionKind::Choice(&["ns", "us"]),
                default: "ns",
            },
        ];
        const TABLES: &'static [TableSpec] = &[TableSpec {
            name: "counting",
            about: "",
            path: &[],
            inherit: &[],
            options: &[],
        }];
        const READS: Reads = Reads::SPANS;
        type Options = CountingOptions;
        type Output = serde_json::Value;

        fn run(
            analyzed: &Analyzed<'_>,
            options: &CountingOptions,
        ) -> Result<serde_json::Value, AnalysisError> {
            Ok(serde_json::json!({"spans": analyzed.trace().spans.len(), "scale": options.scale}))
        }
        fn render_text(output: &serde_json::Value, _: &CountingOptions) -> String {
            output.to_string()
        }
    }

    fn values(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn options_are_read_against_their_spec_into_the_typed_options() {
        assert_eq!(check::<Counting>(), Ok(()));
        let o = typed_options::<Counting>(&values(&[
            ("at-least", "3"),
            ("scale", "2"),
            ("verbose", "true"),
            ("unit", "us"),
        ]))
        .expect("valid options");
        assert_eq!(
            (o.at_least, o.scale, o.verbose, o.unit.as_str()),
            (3, 2.0, true, "us")
        );
        let err = |pairs: &[(&str, &str)]| {
            typed_options::<Counting>(&values(pairs))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(err(&[("at_least", "0")]).contains("at least 1"));
        assert!(err(&[("at_least", "-3")]).contains("whole number"));
        assert!(err(&[("scale", "inf")]).contains("finite number"));
        assert!(err(&[("verbose", "maybe")]).contains("true or false"));
        assert!(err(&[("unit", "ms")]).contains("one of ns, us"));
        assert!(err(&[("limmit", "3")]).contains("no option \"limmit\""));
        let outcome = Registered::of::<Counting>()
            .run_trace(&Trace::default(), &values(&[("scale", "0.25")]))
            .expect("runs");
        assert_eq!(outcome.text(), r#"{"scale":0.25,"spans":0}"#);
        let table = Registered::of::<Counting>()
            .table(None)
            .expect("main table");
        assert_eq!(outcome.batch(table).num_rows(), 1);
        assert!(Registered::of::<Counting>().table(Some("nope")).is_err());
    }

    #[test]
    fn a_spec_default_that_disagrees_with_the_typed_default_is_caught() {
        #[derive(Debug)]
        struct Wrong;
        impl Analysis for Wrong {
            const NAME: &'static str = "wrong";
            const SUMMARY: &'static str = "";
            const WINDOW: &'static str = "";
            const DOC: &'static str = "";
            const EXAMPLES: &'static [&'static str] = &[];
            const OPTIONS: &'static [OptionSpec] = &[OptionSpec {
                name: "at_least",
                help: "",
                kind: OptionKind::Count { min: 1 },
                default: "2",
            }];
            const TABLES: &'static [TableSpec] = Counting::TABLES;
            const READS: Reads = Reads::SPANS;
            type Options = CountingOptions;
            type Output = serde_json::Value;
            fn run(
                analyzed: &Analyzed<'_>,
                options: &CountingOptions,
            ) -> Result<serde_json::Value, AnalysisError> {
                Counting::run(analyzed, options)
            }
            fn render_text(_: &serde_json::Value, _: &CountingOptions) -> String {
                String::new()
            }
        }
        // Four typed options, one spec.
        assert!(check::<Wrong>().is_err_and(|e| e.contains("4 typed options, 1 option specs")));
    }
}
