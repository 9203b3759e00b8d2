//! The contract of a registered analysis: what an analysis declares once so that every front
//! end (the `strato` command, the Python `Profile`, `strato sql`'s views, the HTML report) can
//! run it and show its result without code of its own. The registry itself (the list, and
//! running an analysis on inputs) is `strato_engine::registry`; this module only states the
//! contract, with no I/O.
//!
//! An analysis is a type implementing [`Analysis`]:
//! - its typed options ([`Analysis::Options`], serde with defaults) and their description for
//!   the front ends ([`Analysis::OPTIONS`]: name, help, kind, default), which must agree (the
//!   engine's tests check every registered analysis);
//! - its typed result ([`Analysis::Output`]): its serde shape is the JSON (`--json`), and the
//!   tables ([`Analysis::TABLES`]) are lists of that JSON, flattened into rows
//!   (`strato_engine::rows`): Python's tables, SQL views and CSV are the JSON's fields by
//!   construction;
//! - its text rendering (and its own CSV when it has one), its window (what time it covers),
//!   its doc page, examples;
//! - whether it runs rank by rank ([`Analysis::RANK_BY_RANK`]): each rank file imported,
//!   analysed and dropped in turn, the parts merged ([`Analysis::merge`]);
//! - whether it can be fed while one file streams ([`Analysis::stream`]), its events never all
//!   held;
//! - what it reads of a trace ([`Reads`]), so that opening keeps no more.
//!
//! An analysis of two profiles (`strato diff A B`) is a type implementing [`Comparison`]: the
//! same declarations, a side computed from each profile alone ([`Comparison::side`], so that
//! one trace is held at a time), and the result of two sides ([`Comparison::compare`]).

use crate::analyzed::Analyzed;
use serde::de::DeserializeOwned;
use serde::Serialize;
use strato_trace::projection::ArgsScope;
use strato_trace::Trace;

/// How a front end reads an option's value.
#[derive(Debug, Clone, Copy)]
pub enum OptionKind {
    /// A whole number at least `min`; with default `""`, optional (unset: `None`).
    Count { min: u64 },
    /// A list of whole numbers at least `min`: comma-separated (`100,20`) on the command line
    /// and as text, a list in Python; empty by default.
    Counts { min: u64 },
    /// A finite number; with default `""`, optional (unset: `None`).
    Number,
    /// On or off (a flag without a value on the command line).
    Flag,
    /// One of the given words.
    Choice(&'static [&'static str]),
    /// A list of positive finite numbers: the flag repeated on the command line, a list in
    /// Python, comma-separated as text; empty by default (the analysis then uses its own).
    Positives,
    /// A configuration file given by its path: the engine reads it (bounded like every
    /// configuration file; `what` names it in errors) and the typed option holds its text,
    /// `None` when not given (default `""`). `check` says what is wrong with a text, and the
    /// engine refuses the file with that message and its path, so [`Analysis::run`] can parse
    /// it without failing.
    File {
        what: &'static str,
        check: fn(&str) -> Result<(), String>,
    },
    /// A list of words, each one of `words` (each a `what`: "rule"): the flag repeated on the
    /// command line, a list in Python, comma-separated as text; empty by default.
    Words {
        what: &'static str,
        words: &'static [&'static str],
    },
    /// A `ProfilerStep#N` window: `N` for that step, `all` for every step; with default `""`,
    /// optional (unset: the typed option is `""`, the whole trace).
    Step,
    /// Free text (a time, a name to search for), checked by [`Analysis::check_options`];
    /// `value_name` is what the command line shows (`TIME`). With default `""`, optional.
    Text { value_name: &'static str },
    /// A list of free texts (`kernel:gemm=0.5`): the flag repeated on the command line, a list
    /// in Python, comma-separated as text (so no item holds a comma); checked by
    /// [`Analysis::check_options`]; empty by default.
    Texts { value_name: &'static str },
}

/// One option of an analysis, as the front ends show and parse it. `name` is the serde field
/// of [`Analysis::Options`] (snake_case; the command line spells it with dashes).
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: OptionKind,
    /// The default as text (what `--help` shows); equal to the options' `Default`.
    pub default: &'static str,
}

/// One table of an analysis's result: the rows are the objects of the list at `path` in the
/// result's JSON (empty: the root object is the one row), each carrying the scalar fields
/// `inherit` of its enclosing objects. A segment `[]name` after a list's segment says that
/// list holds lists: each inner list's objects are rows, carrying the inner list's number
/// (from 0) as field `name` (`tree`'s chains: `["chains", "[]chain"]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableSpec {
    /// Unique over the registry: the SQL view's name and Python's table name.
    pub name: &'static str,
    /// What a row is.
    pub about: &'static str,
    pub path: &'static [&'static str],
    pub inherit: &'static [&'static str],
    /// Options (name, value) the table is computed with unless the caller gives its own for
    /// them: for a table that the analysis's defaults leave empty (`critical_path_steps`
    /// needs `step=all`), so that its SQL view, `--table` and Python's method have rows.
    pub options: &'static [(&'static str, &'static str)],
}

/// What of a trace an analysis reads, so that opening keeps no more (the engine turns it into
/// the import's projection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    pub events: Events,
    /// Whose attributes (`args`) are kept; `None`: no attributes.
    pub args: Option<ArgsScope>,
}

/// Which events an analysis reads ([`Reads::events`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Events {
    /// Spans (times, names, tracks, levels, correlations); no instants, counters or flows.
    Spans,
    /// What the device time breakdown reads: device spans, the host spans that carry a launch
    /// correlation, and step spans ([`strato_trace::projection::SpanProjection`]).
    DeviceTime,
    /// Spans, instants and counters; no flows.
    NoFlows,
    /// Every event: spans, instants, counters and flows.
    All,
}

impl Reads {
    /// Spans without attributes.
    pub const SPANS: Reads = Reads {
        events: Events::Spans,
        args: None,
    };
    /// Every event with every attribute.
    pub const EVERYTHING: Reads = Reads {
        events: Events::All,
        args: Some(ArgsScope::All),
    };
}

/// An analysis fed while one file streams ([`Analysis::stream`]): the import hands it each
/// batch of events and drops them, so the file's spans are never all held.
pub trait Stream<T> {
    /// One batch: `batch` holds the batch's events and every table read so far (tracks,
    /// ranks, strings), and no flows: the engine drops them (an input whose flows link graph
    /// nodes is read whole).
    fn add(&mut self, batch: &Trace);
    /// The result once the file is read; `trace` holds every table but the events.
    fn finish(self: Box<Self>, trace: &Trace) -> T;
}

/// A [`Stream`] made of a state, what a batch does to it, and how the state becomes the
/// result (with the options it ran with, captured): `Analysis::stream` of an analysis whose
/// streaming state is a plain type, without a wrapper type of its own.
pub fn streamed<S, T>(
    state: S,
    add: impl FnMut(&mut S, &Trace) + 'static,
    finish: impl FnOnce(S, &Trace) -> T + 'static,
) -> Box<dyn Stream<T>>
where
    S: 'static,
    T: 'static,
{
    Box::new(Streamed { state, add, finish })
}

/// See [`streamed`].
struct Streamed<S, A, F> {
    state: S,
    add: A,
    finish: F,
}

impl<S, T, A, F> Stream<T> for Streamed<S, A, F>
where
    A: FnMut(&mut S, &Trace),
    F: FnOnce(S, &Trace) -> T,
{
    fn add(&mut self, batch: &Trace) {
        (self.add)(&mut self.state, batch);
    }
    fn finish(self: Box<Self>, trace: &Trace) -> T {
        let Streamed { state, finish, .. } = *self;
        finish(state, trace)
    }
}

/// `stream` fed `trace`'s spans one at a time, then its instants one at a time, each batch
/// with the trace's tables and the event's args (the smallest batches a streamed input can
/// give): the unit tests' check of a stream against the whole trace.
#[cfg(test)]
pub(crate) fn fed_span_by_span<T>(trace: &Trace, mut stream: Box<dyn Stream<T>>) -> T {
    for span in &trace.spans {
        let mut batch = trace.tables();
        let mut span = span.clone();
        span.args = (trace.args_text(span.args)).map(|text| batch.args.push(&text));
        batch.spans.push(span);
        stream.add(&batch);
    }
    for instant in &trace.instants {
        let mut batch = trace.tables();
        let mut instant = instant.clone();
        instant.args = (trace.args_text(instant.args)).map(|text| batch.args.push(&text));
        batch.instants.push(instant);
        stream.add(&batch);
    }
    stream.finish(&trace.tables())
}

/// How the HTML report shows an analysis ([`Analysis::IN_REPORT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InReport {
    /// A section with its summary, window, doc page and its main table's first rows.
    Table,
    /// A section of the report's own (plots, folded tables), which `strato-report` builds from
    /// the same analysis; no table section is added.
    OwnSection,
    /// Not in the report, for the reason given (its cost on large traces, say): the report
    /// runs every analysis it shows on the whole trace.
    Left(&'static str),
}

/// The result of the ranks of one file of a job analysed alone ([`Analysis::merge`]).
#[derive(Debug)]
pub struct RankPart<T> {
    pub value: T,
    /// The position of the file's first rank in the whole job.
    pub first_rank: u32,
    /// Per rank of the file: its rank in the job when the source says it, `None` when the rank
    /// is known by its position only.
    pub job_ranks: Vec<Option<i64>>,
}

impl<T> RankPart<T> {
    /// The rank number of the file's `local`-th rank as the whole job numbers it: the source's
    /// when it says, else its position in the job.
    pub fn job_rank(&self, local: usize, local_number: i64) -> i64 {
        match self.job_ranks.get(local) {
            Some(None) => i64::from(self.first_rank) + local as i64,
            _ => local_number,
        }
    }

    /// The value, and how the file's ranks are numbered in the whole job: for results whose
    /// rows say which of the file's ranks they are ([`RankNumbering::renumber`]), any number
    /// of rows per rank.
    pub fn numbered(self) -> (T, RankNumbering) {
        let numbering = RankPart {
            value: (),
            first_rank: self.first_rank,
            job_ranks: self.job_ranks,
        };
        (self.value, RankNumbering(numbering))
    }
}

/// How one file's ranks are numbered in the whole job ([`RankPart::numbered`]).
#[derive(Debug)]
pub struct RankNumbering(RankPart<()>);

impl RankNumbering {
    /// A row of the file's `rank_index`-th rank, numbered `rank` in the file: both as the
    /// whole job gives them ([`RankPart::job_rank`]; the index after the files before it).
    pub fn renumber(&self, rank: &mut i64, rank_index: &mut u32) {
        *rank = self.0.job_rank(*rank_index as usize, *rank);
        *rank_index += self.0.first_rank;
    }
}

/// Why an analysis cannot run on a trace (a step asked for that the trace lacks, a
/// dependency cycle): one line, which the front ends show after the input's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AnalysisError(pub String);

/// The options of an analysis that takes none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

/// A per-rank part of a result, numbered by its rank ([`merged_ranks`]).
pub trait RankRow {
    fn rank(&self) -> i64;
    fn set_rank(&mut self, rank: i64);
}

/// Every part's per-rank rows (`rows` of each part's value), in input order, each numbered as
/// the whole job numbers it ([`RankPart::job_rank`]): the merge of the analyses whose result
/// is a list of ranks.
pub fn merged_ranks<T, R: RankRow>(parts: Vec<RankPart<T>>, rows: impl Fn(T) -> Vec<R>) -> Vec<R> {
    let mut merged = Vec::new();
    for part in parts {
        let (first_rank, job_ranks) = (part.first_rank, part.job_ranks);
        let numbering = RankPart {
            value: (),
            first_rank,
            job_ranks,
        };
        for (local, mut rank) in rows(part.value).into_iter().enumerate() {
            rank.set_rank(numbering.job_rank(local, rank.rank()));
            merged.push(rank);
        }
    }
    merged
}

/// An analysis every front end reaches by its name (see the module header).
pub trait Analysis {
    /// kebab-case: the command (`strato NAME`); Python's method is the snake_case form.
    const NAME: &'static str;
    /// One line: the command's about, the Python method's doc.
    const SUMMARY: &'static str;
    /// What time it covers.
    const WINDOW: &'static str;
    /// Its doc page, from the repository root.
    const DOC: &'static str;
    /// Command lines showing its use.
    const EXAMPLES: &'static [&'static str];
    const OPTIONS: &'static [OptionSpec];
    /// Its tables; the first is the main one (CSV's default, the report's section).
    const TABLES: &'static [TableSpec];
    /// Whether each rank can be analysed alone and the parts merged ([`Analysis::merge`]).
    const RANK_BY_RANK: bool = false;
    const READS: Reads;
    /// How the HTML report shows it.
    const IN_REPORT: InReport = InReport::Table;
    /// One-letter command-line flags of options, `(option name, letter)` (`-i` for
    /// `--iterations`).
    const SHORT_FLAGS: &'static [(&'static str, char)] = &[];
    type Options: Serialize + DeserializeOwned + Default + Send + Sync;
    type Output: Serialize + Send + Sync;

    /// What is wrong with options that each passed their spec but do not hold together or
    /// fall outside a range (`Err`: one line, naming the option); checked by every front end
    /// before the analysis runs. Default: nothing.
    fn check_options(options: &Self::Options) -> Result<(), String> {
        let _ = options;
        Ok(())
    }

    /// The result over one trace (with its shared indexes, built once for every analysis
    /// that runs on it), or why it cannot run on this trace.
    fn run(analyzed: &Analyzed<'_>, options: &Self::Options)
        -> Result<Self::Output, AnalysisError>;

    /// The result of a whole job from the results of its rank files, in input order (each
    /// part is [`Analysis::run`] over the trace of one file, which succeeded). Must be `Some` when
    /// `RANK_BY_RANK` (an empty job included), and equal [`Analysis::run`] over the whole job
    /// (the engine's tests check both); `None` (the default) when the analysis needs the
    /// whole job at once.
    fn merge(parts: Vec<RankPart<Self::Output>>, options: &Self::Options) -> Option<Self::Output> {
        let _ = (parts, options);
        None
    }

    /// The result as text for a terminal (`options`: those it ran with, for what the text
    /// shows of it, such as how many rows).
    fn render_text(output: &Self::Output, options: &Self::Options) -> String;

    /// The result as CSV when the analysis writes its own (`--csv` without `--table`); `raw`:
    /// cells written as they are ([`crate::text::table`]). `None` (the default): the front
    /// end writes the main table's rows.
    fn render_csv(output: &Self::Output, options: &Self::Options, raw: bool) -> Option<String> {
        let _ = (output, options, raw);
        None
    }

    /// The analysis fed batch by batch while one file streams, when it can be: the engine
    /// then reads a single trace file or stored profile this way instead of holding its
    /// events (same result as [`Analysis::run`] over the whole trace). `None` (the default):
    /// it runs over the whole trace.
    fn stream(options: &Self::Options) -> Option<Box<dyn Stream<Self::Output>>> {
        let _ = options;
        None
    }
}

/// The contract of a registered analysis of two profiles, A (the baseline) and B: each
/// profile reduced on its own to a side ([`Comparison::side`]; a front end may drop the trace
/// before opening the other), then the two sides compared ([`Comparison::compare`]). The
/// declarations mean what [`Analysis`]'s do; its tables are Python's and CSV's (no SQL views:
/// a query reads one profile).
pub trait Comparison {
    /// kebab-case: the command (`strato NAME A B`).
    const NAME: &'static str;
    const SUMMARY: &'static str;
    const WINDOW: &'static str;
    const DOC: &'static str;
    const EXAMPLES: &'static [&'static str];
    const OPTIONS: &'static [OptionSpec];
    /// Its tables; the first is the main one.
    const TABLES: &'static [TableSpec];
    /// What it reads of each profile.
    const READS: Reads;
    /// How the HTML report shows it (`strato report --baseline A`).
    const IN_REPORT: InReport = InReport::Left("a report shows one profile");
    const SHORT_FLAGS: &'static [(&'static str, char)] = &[];
    type Options: Serialize + DeserializeOwned + Default + Send + Sync;
    /// What one profile contributes, computed from it alone.
    type Side: Send;
    type Output: Serialize + Send + Sync;

    /// As [`Analysis::check_options`].
    fn check_options(options: &Self::Options) -> Result<(), String> {
        let _ = options;
        Ok(())
    }

    /// One profile's side, or why it cannot be computed on this trace.
    fn side(analyzed: &Analyzed<'_>, options: &Self::Options) -> Result<Self::Side, AnalysisError>;

    /// The result of side `a` (labelled `a_label`, the baseline) against side `b`, or why the
    /// two do not compare.
    fn compare(
        a_label: &str,
        a: &Self::Side,
        b_label: &str,
        b: &Self::Side,
        options: &Self::Options,
    ) -> Result<Self::Output, AnalysisError>;

    /// The result as text for `terminal` (its width and whether to colour).
    fn render_text(
        output: &Self::Output,
        options: &Self::Options,
        terminal: &crate::text::terminal::Terminal,
    ) -> String;
}
