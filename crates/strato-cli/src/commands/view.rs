//! `strato view`: opens the inputs (any kind the engine opens) and, with `--baseline`, a second
//! run, indexes them (`strato_view::Api`) and serves the interactive timeline on a local web
//! server until interrupted. Prints the URL (with its per-run token) on stdout, one line, once
//! it listens.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};

/// Arguments of `strato view`.
#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// A trace file, a directory of ranks, a profile, a partitioned store or a recording.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The port to listen on (default: a free one the OS picks).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The address to listen on. Anything but loopback lets other machines reach the view
    /// (they still need the token).
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    bind: IpAddr,
    /// Open the URL in the browser (`xdg-open`).
    #[arg(long)]
    open: bool,
    /// Another run to show under this one (any input kind): its steps lined up with this
    /// run's, its lanes under the same rank's, and `strato diff`'s numbers per operation.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
}

/// Runs `strato view`: never returns unless the server cannot start.
pub fn run(args: ViewArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    let ViewArgs {
        inputs,
        port,
        bind,
        open,
        baseline,
    } = args;
    let options = ctx.import_options(true)?;
    let trace = ctx.engine.load(&inputs, &options)?;
    let title = super::report::default_title(&inputs);
    let api = match &baseline {
        Some(path) => {
            let other = ctx.engine.load(std::slice::from_ref(path), &options)?;
            let label = super::report::default_title(std::slice::from_ref(path));
            strato_view::Api::with_baseline(trace, other, label)
        }
        None => strato_view::Api::new(trace),
    };
    let handler = strato_view::Handler::new(api.titled(title))?;
    let options = strato_view::ServeOptions {
        bind,
        port,
        ..strato_view::ServeOptions::default()
    };
    let server = strato_view::Server::bind(handler, &options).context("strato view")?;
    let url = server.url();
    writeln!(out, "{url}")?;
    out.flush()?;
    if open {
        if let Err(e) = std::process::Command::new("xdg-open").arg(&url).spawn() {
            eprintln!("strato view: could not open a browser (xdg-open: {e}); open the URL above");
        }
    }
    server.serve();
    Ok(())
}
