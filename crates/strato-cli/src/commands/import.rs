//! `strato import`: traces into a profile directory (Parquet tables + metadata.json), secrets
//! (in metadata, names and event attributes) redacted unless `--keep-secrets`.
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use strato_io::ImportOptions;

use crate::ctx::Ctx;
use crate::profile_write::{note_redacted, write_profile, Written};

// Arguments of `strato import` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Trace files or directories of per-rank files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The profile directory to write (replaced atomically if it is already a profile).
    #[arg(short, long)]
    output: PathBuf,
    /// Write a partitioned store (schema version 2, docs/profile-format.md): one profile per
    /// rank under OUTPUT/job=JOB/host=HOST/rank=RANK/, added to the store if it exists.
    #[arg(long, requires = "job")]
    partitioned: bool,
    /// The job name of a partitioned import.
    #[arg(long, requires = "partitioned")]
    job: Option<String>,
}

/// Runs `strato import`.
pub fn run(args: ImportArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let ImportArgs {
        inputs,
        output,
        partitioned,
        job,
    } = args;
    // The profile (or store) directory may not be an input nor inside one.
    crate::output::refuse_inputs(&output, &ctx.read_paths(&inputs))?;
    let options = ctx.import_options(true)?;
    if partitioned {
        return import_partitioned(
            &ctx.engine,
            &inputs,
            &output,
            job.as_deref().unwrap_or(""),
            &options,
            out,
        );
    }
    let written = write_profile(&ctx.engine, &inputs, &output, &options)?;
    report(out, &output, &written)
}

/// `--partitioned`: every input file (directories: their rank files) imported alone and
/// written as one leaf of the store at `output` (its rank: the source's, else its position
/// among the files).
fn import_partitioned(
    engine: &strato_engine::Engine,
    inputs: &[PathBuf],
    output: &Path,
    job: &str,
    options: &ImportOptions,
    out: &mut impl Write,
) -> Result<()> {
    if job.is_empty() {
        anyhow::bail!("--job: the job name must not be empty");
    }
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            files.extend(strato_io::rank_files(input)?);
        } else {
            files.push(input.clone());
        }
    }
    let mut spans = 0;
    for (position, file) in files.iter().enumerate() {
        let trace = engine.load(std::slice::from_ref(file), options)?;
        if trace.ranks.len() != 1 {
            anyhow::bail!(
                "{}: holds {} ranks; a partitioned import takes one rank per file",
                file.display(),
                trace.ranks.len()
            );
        }
        note_redacted(&trace);
        let rank = trace.ranks[0].rank.unwrap_or(position as i64);
        strato_store::partitioned::write_partition(output, job, rank, &trace)?;
        spans += trace.spans.len();
    }
    writeln!(
        out,
        "wrote {}: {} partitions of job {job}, {spans} spans",
        output.display(),
        files.len()
    )?;
    Ok(())
}

fn report(out: &mut impl Write, output: &Path, written: &Written) -> Result<()> {
    let rows = &written.rows;
    writeln!(
        out,
        "wrote {}: {} ranks, {} spans, {} instants, {} counter samples, {} flows",
        output.display(),
        written.ranks,
        rows.spans,
        rows.instants,
        rows.counter_samples,
        rows.flows
    )?;
    Ok(())
}
