//! `strato sql`: SQL over a profile's tables and the analyses' views (crate `strato-sql`, an
//! embedded Apache DataFusion). Inputs are anything the other commands take; the tables are
//! the profile store's (`docs/profile-format.md`), the views and shipped analyses those of
//! `docs/sql.md`. A profile directory is queried in place, its Parquet files read as the query
//! runs; other inputs are first written as a temporary profile the way `strato import -o`
//! writes one (`crate::profile_write`), so memory stays what the import and the query keep. Output: a table, CSV, a JSON array of row objects, Parquet or an Arrow IPC
//! stream. The query runs under `strato_sql::Limits` (size and depth of the text, the memory
//! budget for its operators and its result, `--timeout`); CSV text cells get the formula
//! neutralisation of every CSV strato writes (`strato_analysis::text::table`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;
use strato_engine::registry::Registered;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use strato_sql::{Format, Limits, Session};

/// Output format of `strato sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqlFormat {
    /// An aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of row objects.
    Json,
    /// A Parquet file.
    Parquet,
    /// An Arrow IPC stream.
    Arrow,
}

impl From<SqlFormat> for Format {
    fn from(f: SqlFormat) -> Format {
        match f {
            SqlFormat::Table => Format::Table,
            SqlFormat::Csv => Format::Csv,
            SqlFormat::Json => Format::Json,
            SqlFormat::Parquet => Format::Parquet,
            SqlFormat::Arrow => Format::Arrow,
        }
    }
}

/// Arguments of `strato sql`.
#[derive(Args, Debug)]
pub struct SqlArgs {
    /// The query (one read-only statement), then the inputs: trace files, directories of
    /// ranks, a profile directory or store, a recording. With --analysis, all are inputs.
    #[arg(value_name = "QUERY | INPUT")]
    args: Vec<String>,
    /// Run the shipped analysis NAME (see --list) instead of a query.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["show", "list"])]
    analysis: Option<String>,
    /// Print the SQL text of the view or analysis NAME and exit.
    #[arg(long, value_name = "NAME", conflicts_with = "list")]
    show: Option<String>,
    /// List the tables, views and analyses and exit.
    #[arg(long)]
    list: bool,
    /// Output format. CSV text cells that a spreadsheet would run as a formula (starting with
    /// =, +, -, @, tab or CR) are written as '<cell>, as in every CSV strato writes (--csv-raw:
    /// as they are).
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    format: SqlFormat,
    /// Cancel the query after SECS seconds (one error line, exit code 2); 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// Write the result to FILE instead of stdout (`-`: stdout; a file is written beside and
    /// renamed; a device or FIFO is written directly: docs/export.md, "Output paths").
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `strato sql`.
pub fn run(args: SqlArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    if args.list {
        writeln!(out, "SQL schema version {}", strato_sql::SQL_SCHEMA_VERSION)?;
        writeln!(
            out,
            "tables: {}",
            strato_store::table_names().collect::<Vec<_>>().join(", ")
        )?;
        let views: Vec<&str> = strato_sql::VIEWS.iter().map(|(n, _)| *n).collect();
        writeln!(out, "views: {}", views.join(", "))?;
        let store: Vec<&str> = strato_sql::STORE_VIEWS.iter().map(|(n, _)| *n).collect();
        writeln!(out, "store views (for other engines): {}", store.join(", "))?;
        let analyses: Vec<&str> = strato_sql::ANALYSES.iter().map(|(n, _)| *n).collect();
        writeln!(out, "analyses: {}", analyses.join(", "))?;
        let registered: Vec<&str> = strato_engine::registry::ANALYSES
            .iter()
            .flat_map(|a| a.tables.iter().map(|t| t.name))
            .collect();
        writeln!(
            out,
            "analysis views (computed when a query names them): {}",
            registered.join(", ")
        )?;
        return Ok(());
    }
    if let Some(name) = &args.show {
        let text = strato_sql::sql_text(name)
            .with_context(|| format!("--show {name}: no such view or analysis (see --list)"))?;
        write!(out, "{text}")?;
        return Ok(());
    }
    let (query, inputs): (String, Vec<PathBuf>) = match &args.analysis {
        Some(name) => {
            let text = strato_sql::ANALYSES
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, text)| *text)
                .with_context(|| format!("--analysis {name}: no such analysis (see --list)"))?;
            (
                text.to_owned(),
                args.args.iter().map(PathBuf::from).collect(),
            )
        }
        None => match args.args.split_first() {
            Some((query, inputs)) => (query.clone(), inputs.iter().map(PathBuf::from).collect()),
            None => bail!("no query: strato sql \"SELECT ...\" INPUT..."),
        },
    };
    if inputs.is_empty() {
        bail!("no inputs: strato sql \"SELECT ...\" INPUT... (trace files, rank directories, a profile)");
    }
    let format = Format::from(args.format);
    if format.is_binary() && args.output.is_none() && std::io::stdout().is_terminal() {
        bail!(
            "--format {:?} writes binary data: use -o FILE or redirect stdout",
            args.format
        );
    }
    let import_options = ctx.import_options(true)?;
    let mut limits = Limits::with_budget(import_options.memory_budget_bytes);
    limits.timeout = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    // Refuse an oversized query before the inputs are loaded.
    strato_sql::check_query_size(&query, &limits.query)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A profile directory is queried in place; anything else (and a profile that holds a
    // secret, unless --keep-secrets) is first written as a temporary profile (streamed when it
    // is one JSON file; redacted as every import is), removed when the query is done.
    let (session, _scratch) = match inputs.as_slice() {
        [input]
            if strato_store::is_profile_dir(input)
                && !ctx.engine.attributes_graph_capture()
                && (!ctx.engine.redacts() || !holds_secrets(input)?) =>
        {
            (Session::over_profile(input, threads, limits)?, None)
        }
        _ => {
            let scratch = tempfile::Builder::new()
                .prefix("strato-sql-")
                .tempdir()
                .context("cannot create the query's temporary profile directory (TMPDIR)")?;
            let dir = scratch.path().join("profile");
            crate::profile_write::write_profile(&ctx.engine, &inputs, &dir, &import_options)?;
            (Session::over_profile(&dir, threads, limits)?, Some(scratch))
        }
    };
    // The views of registered analyses (`strato_engine::registry`) the query names, computed
    // over the same inputs (default options, and those the table is computed with) and held in
    // memory for this query only.
    for name in session.table_references(&query)? {
        if let Some((analysis, table)) = strato_engine::registry::find_table(&name) {
            let options = Registered::options_for_table(table, &[]);
            let outcome = analysis.run(&ctx.engine, &inputs, &options)?;
            session.add_table(table.name, outcome.batch(table))?;
        }
    }
    let result = session.query(&query)?;
    let csv_raw = ctx.csv_raw;
    let csv_text = |c: &str| strato_analysis::text::table::neutralised_csv_text(c, csv_raw);
    match &args.output {
        None => strato_sql::write_result(&result, format, &csv_text, out)?,
        // The shared output rules: atomic for a file, direct to a device or FIFO.
        Some(path) => crate::output::write_output(path, &ctx.read_paths(&inputs), |file| {
            strato_sql::write_result(&result, format, &csv_text, file)
                .map_err(std::io::Error::other)
        })?,
    }
    Ok(())
}

/// True when the stored profile at `dir` holds a text the redaction rules would change (it was
/// imported with `--keep-secrets`): every command redacts such a profile as it reads it, so
/// `sql` queries a redacted copy instead of the files. One pass over `args.parquet`, none over
/// the events.
fn holds_secrets(dir: &std::path::Path) -> Result<bool> {
    let mut tables = strato_store::read_without_events(dir)?;
    if !strato_io::redact::redact_trace(&mut tables)
        .names
        .is_empty()
    {
        return Ok(true);
    }
    let mut found = false;
    strato_store::visit_args(dir, &mut |blob| {
        found = strato_io::redact::might_hold_secret(blob)
            && strato_io::redact::redact_blob(blob).is_some();
        !found
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    /// A registered analysis's table is a view of `strato sql` by its name: no name may be a
    /// table of the profile or a shipped view, which it would hide (or be hidden by).
    #[test]
    fn no_registered_table_shadows_a_profile_table_or_view() {
        let taken: Vec<&str> = strato_store::table_names()
            .chain(strato_sql::VIEWS.iter().map(|(name, _)| *name))
            .collect();
        for analysis in strato_engine::registry::ANALYSES {
            for table in analysis.tables {
                assert!(
                    !taken.contains(&table.name),
                    "{}: table {} is also a profile table or view",
                    analysis.name,
                    table.name
                );
            }
        }
    }
}
