//! `strato advise --print-rules`: what the terminal front end adds to the registered `advise`
//! (`strato_analysis::advise::registration`): the default rules file written as TOML, a
//! starting point to edit (TOML because people edit it by hand and it allows comments next to
//! each threshold; JSON does not). It needs no input. The rules, their options, JSON, tables
//! and text are the registry's. "No findings" is a success (exit 0).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::{Arg, ArgAction, ArgMatches, Command};
use strato_analysis::advise::AdviseConfig;

/// The registered command of `advise` with `--print-rules` (inputs then optional).
pub(crate) fn with_print_rules(command: Command) -> Command {
    command
        .mut_arg("inputs", |a| {
            a.required(false).required_unless_present("print_rules")
        })
        .arg(
            Arg::new("print_rules")
                .long("print-rules")
                .action(ArgAction::SetTrue)
                .help(
                    "Print the default rules file (TOML), or the --rules file's as read, and exit.",
                ),
        )
}

/// Writes the rules (`--rules FILE`'s, else the defaults) as TOML when `matches` ask for them;
/// `false` when they do not.
pub(crate) fn print_rules(matches: &ArgMatches, out: &mut dyn Write) -> Result<bool> {
    if !matches
        .try_get_one::<bool>("print_rules")
        .ok()
        .flatten()
        .copied()
        .unwrap_or(false)
    {
        return Ok(false);
    }
    let config = match matches.get_one::<String>("rules") {
        Some(path) => {
            let path = PathBuf::from(path);
            let text = strato_io::config::read_config_text(&path, "the rules file")?;
            AdviseConfig::from_toml(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?
        }
        None => AdviseConfig::default(),
    };
    write!(out, "{}", toml::to_string(&config)?)?;
    Ok(true)
}
