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
//! - its text rendering, its window (what time it covers), its doc page, examples;
//! - whether it runs rank by rank ([`Analysis::RANK_BY_RANK`]): each rank file imported,
//!   analysed and dropped in turn, the parts merged ([`Analysis::merge`]).

use serde::de::DeserializeOwned;
use serde::Serialize;
use strato_trace::Trace;

/// How a front end reads an option's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptionKind {
    /// A whole number at least `min`.
    Count { min: u64 },
    /// A finite number.
    Number,
    /// On or off (a flag without a value on the command line).
    Flag,
    /// One of the given words.
    Choice(&'static [&'static str]),
}

/// One option of an analysis, as the front ends show and parse it. `name` is the serde field
/// of [`Analysis::Options`] (snake_case; the command line spells it with dashes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionSpec {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: OptionKind,
    /// The default as text (what `--help` shows); equal to the options' `Default`.
    pub default: &'static str,
}

/// One table of an analysis's result: the rows are the objects of the list at `path` in the
/// result's JSON (empty: the root object is the one row), each carrying the scalar fields
/// `inherit` of its enclosing objects.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableSpec {
    /// Unique over the registry: the SQL view's name and Python's table name.
    pub name: &'static str,
    /// What a row is.
    pub about: &'static str,
    pub path: &'static [&'static str],
    pub inherit: &'static [&'static str],
}

/// What of a trace an analysis reads, so that opening keeps no more (the engine turns it into
/// the import's projection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Spans (times, names, tracks, levels, correlations), no attributes, instants, counters
    /// or flows.
    Spans,
    /// Everything the trace holds, attributes included.
    Everything,
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
    /// Whether each rank can be analysed alone and the parts merged.
    const RANK_BY_RANK: bool;
    const READS: Reads;
    type Options: Serialize + DeserializeOwned + Default + Sync;
    type Output: Serialize + Send;

    fn run(trace: &Trace, options: &Self::Options) -> Self::Output;

    /// The result of a whole job from the results of its rank files, in input order (each
    /// part is [`Analysis::run`] over the trace of one file). Called only when `RANK_BY_RANK`;
    /// must equal [`Analysis::run`] over the whole job (the engine's tests check it).
    fn merge(parts: Vec<RankPart<Self::Output>>, options: &Self::Options) -> Self::Output;

    /// The result as text for a terminal.
    fn render_text(output: &Self::Output) -> String;
}
