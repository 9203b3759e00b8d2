//! The worker process: opens one OpenCL context and profiling queue, warms the compiler with a
//! tiny kernel (unless `STRATO_WORKER_WARM=0`, as the conventional serial harness runs it),
//! says `Ready`, then serves `Measure` requests until `Shutdown` or end of input. Built
//! programs are cached (by source, options and kernel name) so that a candidate re-measured in
//! isolation on the worker that measured it is not rebuilt.

use std::collections::VecDeque;
use std::io::{BufReader, BufWriter, Write};
use std::process::ExitCode;
use std::time::Instant;

use crate::candidate::{Arg, Candidate, Fault};
use crate::cl::{Built, ClDevice, RunSpec};
use crate::devlock::DeviceLock;
use crate::protocol::{read_frame, write_frame, Outcome, Reply, Request, Timing};

/// Programs kept per worker.
const CACHE: usize = 64;

const WARM_SOURCE: &str =
    "__kernel void strato_warm(__global float* a, int n) { int i = get_global_id(0); if (i < n) a[i] = a[i] * 2.0f + 1.0f; }";

/// Runs the worker loop on the process's stdin/stdout. Returns when the engine says so.
pub fn main() -> ExitCode {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    match serve(
        &mut BufReader::new(stdin.lock()),
        &mut BufWriter::new(stdout.lock()),
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strato-measure-worker: {e}");
            ExitCode::from(1)
        }
    }
}

fn warm_candidate() -> Candidate {
    Candidate {
        name: "warm".into(),
        source: Some(WARM_SOURCE.into()),
        kernel: Some("strato_warm".into()),
        global: vec![64],
        local: Some(vec![8]),
        args: vec![
            Arg::Buffer {
                bytes: 256,
                init: Default::default(),
            },
            Arg::Int(64),
        ],
        ..Candidate::default()
    }
}

/// Serves requests from `input`, answering on `output`.
pub fn serve<R: std::io::Read, W: Write>(input: &mut R, output: &mut W) -> crate::Result<()> {
    let t0 = Instant::now();
    let active_from_ns = crate::devlock::monotonic_ns();
    // Set by the engine: serialise timed runs across workers (see `devlock`). Start-up (context,
    // compiler warm-up) is under the shared lock too: a worker starting while another times its
    // runs would take the same cores.
    let lock = match std::env::var_os("STRATO_DEVICE_LOCK") {
        Some(path) => Some(DeviceLock::open(std::path::Path::new(&path))?),
        None => None,
    };
    if let Some(lock) = &lock {
        lock.shared()?;
    }
    let device = match ClDevice::open() {
        Ok(d) => d,
        Err(error) => {
            write_frame(
                output,
                &Reply::Fatal {
                    error: error.clone(),
                },
            )?;
            return Err(crate::MeasureError::OpenCl(error));
        }
    };
    let warm = std::env::var("STRATO_WORKER_WARM").map_or(true, |v| v != "0");
    if warm {
        let c = warm_candidate();
        if let Ok(built) = device.build(&c) {
            let spec = RunSpec {
                repeats: 1,
                warmup: 1,
                timing: Timing::Device,
                disturbed_retries: 0,
                stall_limit: 0.0,
                min_run_ns: 0.0,
            };
            let _ = device.run(&built, &c, spec, false, None);
        }
    }
    if let Some(lock) = &lock {
        lock.release()?;
    }
    write_frame(
        output,
        &Reply::Ready {
            pid: std::process::id(),
            device: device.name.clone(),
            init_ns: t0.elapsed().as_nanos() as f64,
            active_from_ns,
            active_to_ns: crate::devlock::monotonic_ns(),
        },
    )?;
    let mut cache: VecDeque<(String, Built)> = VecDeque::new();
    while let Some(request) = read_frame::<_, Request>(input)? {
        match request {
            Request::Shutdown => break,
            Request::Measure {
                id,
                candidate,
                repeats,
                warmup,
                timing,
                disturbed_retries,
                stall_limit,
                min_run_ns,
            } => {
                let start = Instant::now();
                match candidate.fault {
                    Some(Fault::Abort) => std::process::abort(),
                    Some(Fault::Hang) => loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    },
                    None => {}
                }
                if let Some(lock) = &lock {
                    lock.shared()?;
                }
                let active_from_ns = crate::devlock::monotonic_ns();
                let key = candidate.program_key();
                let pos = cache.iter().position(|(k, _)| *k == key);
                let (cached, built) = match pos.and_then(|p| cache.remove(p)) {
                    Some((_, b)) => (true, Ok(b)),
                    None => (false, device.build(&candidate)),
                };
                let outcome = match built {
                    Err(outcome) => outcome,
                    Ok(built) => {
                        let spec = RunSpec {
                            repeats,
                            warmup,
                            timing,
                            disturbed_retries,
                            stall_limit,
                            min_run_ns,
                        };
                        let mut outcome =
                            device.run(&built, &candidate, spec, cached, lock.as_ref());
                        cache.push_front((key, built));
                        cache.truncate(CACHE);
                        if let Outcome::Ok(m) = &mut outcome {
                            m.total_ns = start.elapsed().as_nanos() as f64;
                            m.active_from_ns = active_from_ns;
                            m.active_to_ns = crate::devlock::monotonic_ns();
                        }
                        outcome
                    }
                };
                if let Some(lock) = &lock {
                    lock.release()?;
                }
                write_frame(output, &Reply::Result { id, outcome })?;
            }
        }
    }
    Ok(())
}
