//! `strato completions SHELL`: shell completions of the whole command line.

use std::io::Write;

use anyhow::Result;
use clap::Args;

/// Arguments of `strato completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to print completions for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints completions for `shell` of the command `cmd`.
pub fn completions(
    args: CompletionsArgs,
    cmd: &mut clap::Command,
    out: &mut dyn Write,
) -> Result<()> {
    clap_complete::generate(args.shell, cmd, "strato", out);
    Ok(())
}
