//! `strato import`: traces into a profile directory (Parquet tables + metadata.json), secrets
//! (in metadata, names and event attributes) redacted unless `--keep-secrets`.
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use strato_io::ImportOptions;
use strato_trace::Trace;

use crate::ctx::Ctx;
use crate::input::{load, stream_file};

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
    crate::output::refuse_inputs(&output, &inputs)?;
    let options = ctx.import_options(true)?;
    if partitioned {
        return import_partitioned(
            &inputs,
            &output,
            job.as_deref().unwrap_or(""),
            &options,
            out,
        );
    }
    if let [input] = inputs.as_slice() {
        if let Some(written) = import_streaming(input, &output, &options)? {
            return report(out, &output, &written);
        }
    }
    let trace = load(&inputs, &options)?;
    note_redacted(&trace);
    strato_store::write(&trace, &output)?;
    let written = Written {
        ranks: trace.ranks.len(),
        rows: strato_store::WrittenRows {
            spans: trace.spans.len() as u64,
            instants: trace.instants.len() as u64,
            counter_samples: trace.counters.len() as u64,
            flows: trace.flows.len() as u64,
            args: trace.args.len() as u64,
        },
    };
    report(out, &output, &written)
}

/// `--partitioned`: every input file (directories: their rank files) imported alone and
/// written as one leaf of the store at `output` (its rank: the source's, else its position
/// among the files).
fn import_partitioned(
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
        let trace = load(std::slice::from_ref(file), options)?;
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

/// What was written: the summary line's figures.
struct Written {
    ranks: usize,
    rows: strato_store::WrittenRows,
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

fn note_redacted(trace: &Trace) {
    let redacted = strato_io::redact::redacted_names(trace);
    if !redacted.is_empty() {
        eprintln!(
            "strato: note: redacted secret-looking values in the sources' metadata and names: {} \
             (--keep-secrets keeps them)",
            redacted.join(", ")
        );
    }
}

/// Imports one Chrome/Kineto JSON file straight into the profile: its events go to the
/// store's row groups as they are read ([`strato_io::import_file_streaming`],
/// [`strato_store::ProfileWriter`]), so the whole trace is never held. The profile is the one
/// the in-memory path writes, byte for byte. `None` for an input that does not stream (not a
/// regular Chrome JSON file, or a TensorFlow trace viewer file): nothing is left behind and
/// the caller imports it whole.
fn import_streaming(
    input: &Path,
    output: &Path,
    options: &ImportOptions,
) -> Result<Option<Written>> {
    if !input.is_file() {
        return Ok(None);
    }
    let mut writer = strato_store::ProfileWriter::create(output)?;
    let mut failed: Option<strato_store::StoreError> = None;
    let mut sink = |trace: &mut Trace| {
        writer.write_events(trace).map_err(|e| {
            let message = e.to_string();
            failed = Some(e);
            message
        })
    };
    let mut trace = match stream_file(input, options, &mut sink) {
        Ok(Some(trace)) => trace,
        // The writer's temporary directory goes with it.
        Ok(None) => return Ok(None),
        Err(e) => return Err(failed.map_or_else(|| e.into(), Into::into)),
    };
    note_redacted(&trace);
    let rows = writer.finish(&mut trace)?;
    Ok(Some(Written {
        ranks: trace.ranks.len(),
        rows,
    }))
}
