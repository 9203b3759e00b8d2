//! `strato NAME` for every analysis of the registry (`strato_engine::registry`) and `strato
//! NAME A B` for every comparison (`strato_engine::comparisons`): the subcommand is built from
//! the declaration (its options as flags, help, window, tables, examples) and runs through the
//! registry, so a registered analysis or comparison needs no code here. Output: the text,
//! `--json` (its serde JSON), or `--csv`: the analysis's own CSV when it writes one and no
//! `--table` is asked, else one of its tables (unless `--table`, the main one, or the first
//! the options allow: `diff --by-op` prints `diff_ops`; the same columns as Python's table
//! and the SQL view).
//!
//! What the terminal adds to an analysis beyond its result is here by name, and only here:
//! `critical-path --overlay OUT` ([`super::critical_path`]) and `advise --print-rules`
//! ([`super::advise`]).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Command};
use strato_analysis::advise::Advise;
use strato_analysis::paths::critical_path::CriticalPath;
use strato_analysis::registry::{Analysis, InReport, OptionKind};
use strato_engine::comparisons::RegisteredComparison;
use strato_engine::registry::{Declaration, Inputs, Registered};

use strato_analysis::text::table::Table;

/// A registered analysis or comparison, as the command line found it by name.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Registration {
    Analysis(&'static Registered),
    Comparison(&'static RegisteredComparison),
}

impl Registration {
    /// The registration called `name` (a subcommand's name).
    pub(crate) fn find(name: &str) -> Option<Registration> {
        strato_engine::registry::find(name)
            .map(Registration::Analysis)
            .or_else(|| {
                strato_engine::comparisons::find_comparison(name).map(Registration::Comparison)
            })
    }

    /// Every registration, analyses first.
    pub(crate) fn all() -> impl Iterator<Item = Registration> {
        (strato_engine::registry::ANALYSES
            .iter()
            .map(Registration::Analysis))
        .chain(
            strato_engine::comparisons::COMPARISONS
                .iter()
                .map(Registration::Comparison),
        )
    }

    fn declaration(self) -> Declaration {
        match self {
            Registration::Analysis(a) => a.declaration(),
            Registration::Comparison(c) => c.declaration(),
        }
    }

    /// The table called `name`, else the first the options allow.
    fn table_for(
        self,
        name: Option<&str>,
        values: &strato_engine::registry::OptionValues,
    ) -> strato_engine::Result<&'static strato_analysis::registry::TableSpec> {
        let declared = self.declaration();
        strato_engine::registry::table_for(declared.name, declared.tables, name, values)
    }
}

/// The subcommand of `registration`.
pub(crate) fn command(registration: Registration) -> Command {
    let analysis = registration.declaration();
    let tables: Vec<String> = analysis
        .tables
        .iter()
        .map(|t| format!("  {}: {}", t.name, t.about))
        .collect();
    let examples: Vec<String> = analysis.examples.iter().map(|e| format!("  {e}")).collect();
    let report = match analysis.in_report {
        InReport::Left(reason) => format!("\nNot in `strato report`: {reason}."),
        InReport::Table | InReport::OwnSection => String::new(),
    };
    let table_users = match analysis.inputs {
        Inputs::One => "--csv --table, Python's tables, SQL views",
        Inputs::Two => "--csv --table, Python's tables",
    };
    let mut command = Command::new(analysis.name)
        .about(analysis.summary)
        .after_help(format!(
            "Window: {}.\nTables ({table_users}):\n{}\nSee {}.{report}\n\nExamples:\n{}",
            analysis.window,
            tables.join("\n"),
            analysis.doc,
            examples.join("\n")
        ))
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("Print JSON."),
        )
        .arg(
            Arg::new("csv")
                .long("csv")
                .action(ArgAction::SetTrue)
                .conflicts_with("json")
                .help("Print a table as CSV (the first one, or --table)."),
        )
        .arg(
            Arg::new("table")
                .long("table")
                .requires("csv")
                .value_parser(PossibleValuesParser::new(
                    analysis.tables.iter().map(|t| t.name),
                ))
                .help("The table --csv prints."),
        );
    command = match analysis.inputs {
        Inputs::One => command.arg(
            Arg::new("inputs")
                .required(true)
                .num_args(1..)
                .value_parser(clap::value_parser!(PathBuf))
                .help("Trace files, directories of ranks, or a profile directory."),
        ),
        Inputs::Two => command
            .arg(
                Arg::new("a")
                    .required(true)
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("Profile A (the baseline): a trace file, a directory of ranks, or a profile directory."),
            )
            .arg(
                Arg::new("b")
                    .required(true)
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("Profile B (compared with A)."),
            ),
    };
    for option in analysis.options {
        // clap takes a flag's name as `&'static str`: the dashed form lives as long as the
        // process (a few short strings, built once).
        let flag: &'static str = Box::leak(option.name.replace('_', "-").into_boxed_str());
        let default = if option.default.is_empty() {
            String::new()
        } else {
            format!(" [default: {}]", option.default)
        };
        let mut arg = Arg::new(option.name)
            .long(flag)
            .help(format!("{}{default}", option.help));
        if let Some((_, letter)) = analysis.short_flags.iter().find(|(n, _)| *n == option.name) {
            arg = arg.short(*letter);
        }
        arg = match option.kind {
            OptionKind::Flag => arg.action(ArgAction::SetTrue),
            OptionKind::Choice(words) => arg.value_parser(PossibleValuesParser::new(words)),
            OptionKind::Count { .. } => arg.value_name("N"),
            OptionKind::Counts { .. } => arg.value_name("N[,N...]"),
            OptionKind::Number => arg.value_name("X"),
            OptionKind::Positives => arg.value_name("X").action(ArgAction::Append),
            OptionKind::File { .. } => arg.value_name("FILE"),
            // Checked by the engine, which names the word that is not one of them.
            OptionKind::Words { what, words } => arg
                .value_name(&*Box::leak(what.to_ascii_uppercase().into_boxed_str()))
                .help(format!(
                    "{} ({}s: {}){default}",
                    option.help,
                    what,
                    words.join(", ")
                ))
                .action(ArgAction::Append),
            OptionKind::Step => arg.value_name("N|all"),
            OptionKind::Text { value_name } => arg.value_name(value_name),
            OptionKind::Texts { value_name } => {
                arg.value_name(value_name).action(ArgAction::Append)
            }
        };
        command = command.arg(arg);
    }
    if analysis.name == CriticalPath::NAME {
        command = super::critical_path::with_overlay(command);
    }
    if analysis.name == Advise::NAME {
        command = super::advise::with_print_rules(command);
    }
    command
}

/// Runs `registration` as `matches` (its subcommand's) ask.
pub(crate) fn run(
    registration: Registration,
    matches: &ArgMatches,
    ctx: &crate::ctx::Ctx,
    out: &mut dyn Write,
) -> Result<()> {
    let analysis = registration.declaration();
    if analysis.name == Advise::NAME && super::advise::print_rules(matches, out)? {
        return Ok(());
    }
    let mut options = Vec::new();
    for option in analysis.options {
        if matches!(option.kind, OptionKind::Flag) {
            if matches.get_flag(option.name) {
                options.push((option.name.to_owned(), "true".to_owned()));
            }
        } else if matches!(
            option.kind,
            OptionKind::Positives | OptionKind::Words { .. } | OptionKind::Texts { .. }
        ) {
            if let Some(values) = matches.get_many::<String>(option.name) {
                let values: Vec<&str> = values.map(String::as_str).collect();
                options.push((option.name.to_owned(), values.join(",")));
            }
        } else if let Some(value) = matches.get_one::<String>(option.name) {
            options.push((option.name.to_owned(), value.clone()));
        }
    }
    // A table asked for is computed with the options it needs (`critical_path_steps`: every
    // step unless `--step N`).
    if let Some(name) = matches.get_one::<String>("table") {
        options = Registered::options_for_table(registration.table_for(Some(name), &[])?, &options);
    }
    let overlay = (analysis.name == CriticalPath::NAME)
        .then(|| super::critical_path::overlay_asked(matches))
        .flatten();
    let outcome = match registration {
        Registration::Comparison(comparison) => {
            let side = |name: &str| {
                matches
                    .get_one::<PathBuf>(name)
                    .cloned()
                    .unwrap_or_default()
            };
            comparison.run(&ctx.engine, &side("a"), &side("b"), &options)?
        }
        Registration::Analysis(registered) => {
            let inputs: Vec<PathBuf> = matches
                .get_many::<PathBuf>("inputs")
                .map(|v| v.cloned().collect())
                .unwrap_or_default();
            match &overlay {
                Some(path) => super::critical_path::run_with_overlay(path, &inputs, &options, ctx)?,
                None => registered.run(&ctx.engine, &inputs, &options)?,
            }
        }
    };
    if matches.get_flag("json") {
        outcome.write_json(out)?;
        writeln!(out)?;
    } else if matches.get_flag("csv") {
        let table_name = matches.get_one::<String>("table").map(String::as_str);
        if table_name.is_none() {
            if let Some(csv) = outcome.own_csv(ctx.csv_raw) {
                write!(out, "{csv}")?;
                return Ok(());
            }
        }
        // The table asked for, or the first the options given allow (`diff --by-op`).
        let table = registration.table_for(table_name, &options)?;
        let (columns, rows) = outcome.text_rows(table);
        let headers: Vec<&str> = columns.iter().map(String::as_str).collect();
        let mut csv = Table::with_left(&headers, &[]);
        for row in rows {
            csv.row(row);
        }
        csv.write(out, ctx.table_format(true))?;
    } else {
        write!(out, "{}", outcome.text_on(&crate::term::stdout()))?;
        if let Some(path) = overlay {
            writeln!(out, "\nwrote {}", path.display())?;
        }
    }
    Ok(())
}
