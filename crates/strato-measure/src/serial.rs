//! The conventional serial harness the paper compares against (its section 2.3): one
//! candidate at a time, each in a fresh process that loads the runtime, creates a context,
//! builds the program, takes a CPU timestamp, launches the kernel N times, takes another, and
//! exits. A static timeout (3 s, AutoTVM's default) bounds each candidate after it is sent.

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::error::{MeasureError, Result};
use crate::pool::{describe_status, Event, WorkerSpec};
use crate::protocol::{write_frame, Outcome, Reply, Request, Timing};

/// Serial harness configuration.
#[derive(Debug, Clone)]
pub struct SerialConfig {
    pub worker: WorkerSpec,
    pub repeats: u32,
    pub warmup: u32,
    /// Per-candidate timeout after the request is sent (s).
    pub timeout_s: f64,
    /// Time budget of one timed run (ns): the harness launches `repeats` runs of `k` launches,
    /// `k` sized by a CPU-timed probe launch so that a run takes at least this long, as TVM's
    /// `time_evaluator` raises `number` to reach `min_repeat_ms`; 0 = `repeats` launches.
    pub min_run_ns: f64,
}

/// One candidate measured serially.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SerialResult {
    pub index: usize,
    pub name: String,
    pub status: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Wall time of the whole fresh-process measurement (ns).
    pub wall_ns: f64,
}

/// A serial run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SerialReport {
    pub total_s: f64,
    pub best: Option<(usize, String, f64)>,
    pub counts: std::collections::BTreeMap<String, usize>,
    pub results: Vec<SerialResult>,
}

/// Measures one candidate in a fresh process.
pub fn measure_one(cfg: &SerialConfig, candidate: &Candidate) -> Result<(Outcome, f64)> {
    let t0 = Instant::now();
    let (tx, rx) = channel::<Event>();
    let mut worker = cfg.worker.spawn(0, 1, tx, &[("STRATO_WORKER_WARM", "0")])?;
    let start_deadline = t0 + Duration::from_secs_f64(cfg.worker.start_timeout_s);
    let mut sent_at: Option<Instant> = None;
    let outcome = loop {
        let deadline = match sent_at {
            None => start_deadline,
            Some(s) => s + Duration::from_secs_f64(cfg.timeout_s),
        };
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Event::Frame { reply, .. }) => match reply {
                Reply::Ready { .. } => {
                    let request = Request::Measure {
                        id: 1,
                        candidate: Box::new(candidate.clone()),
                        repeats: cfg.repeats,
                        warmup: cfg.warmup,
                        timing: Timing::Cpu,
                        // The conventional harness knows nothing of disturbance.
                        disturbed_retries: 0,
                        stall_limit: 0.0,
                        min_run_ns: cfg.min_run_ns,
                    };
                    if let Some(stdin) = worker.stdin.as_mut() {
                        // A failed write shows up as the pipe closing.
                        let _ = write_frame(stdin, &request);
                        let _ = write_frame(stdin, &Request::Shutdown);
                    }
                    sent_at = Some(Instant::now());
                }
                Reply::Result { outcome, .. } => break outcome,
                Reply::Fatal { error } => {
                    worker.kill();
                    return Err(MeasureError::WorkerStart(error));
                }
            },
            Ok(Event::Closed { .. }) => {
                let _ = worker.child.kill();
                let status = worker
                    .child
                    .wait()
                    .map(|s| describe_status(&s))
                    .unwrap_or_default();
                if sent_at.is_none() {
                    return Err(MeasureError::WorkerStart(format!(
                        "worker exited before ready: {status}; {}",
                        worker.tail()
                    )));
                }
                break Outcome::Crashed {
                    detail: format!("worker exited: {status}; stderr: {}", worker.tail()),
                };
            }
            Err(RecvTimeoutError::Timeout) => {
                worker.kill();
                match sent_at {
                    None => {
                        return Err(MeasureError::WorkerStart(
                            "worker did not become ready".into(),
                        ))
                    }
                    Some(s) => {
                        break Outcome::Timeout {
                            after_s: s.elapsed().as_secs_f64(),
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                worker.kill();
                return Err(MeasureError::Protocol("worker channel closed".into()));
            }
        }
    };
    // The process exits after Shutdown; its teardown is part of the conventional cost.
    worker.stdin = None;
    let exit_deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match worker.child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < exit_deadline => {
                std::thread::sleep(Duration::from_micros(200))
            }
            _ => {
                worker.kill();
                break;
            }
        }
    }
    Ok((outcome, t0.elapsed().as_nanos() as f64))
}

/// Measures every candidate serially; the best is the lowest CPU-timed latency.
pub fn run(cfg: &SerialConfig, candidates: &[Candidate]) -> Result<SerialReport> {
    let t0 = Instant::now();
    let mut results = Vec::with_capacity(candidates.len());
    let mut counts = std::collections::BTreeMap::new();
    let mut best: Option<(usize, String, f64)> = None;
    for (index, c) in candidates.iter().enumerate() {
        let (outcome, wall_ns) = measure_one(cfg, c)?;
        if let Some(m) = outcome.measurement() {
            if best.as_ref().is_none_or(|b| m.latency_ns < b.2) {
                best = Some((index, c.name.clone(), m.latency_ns));
            }
        }
        *counts.entry(outcome.status().to_string()).or_insert(0) += 1;
        results.push(SerialResult {
            index,
            name: c.name.clone(),
            status: outcome.status().into(),
            outcome,
            wall_ns,
        });
    }
    Ok(SerialReport {
        total_s: t0.elapsed().as_secs_f64(),
        best,
        counts,
        results,
    })
}
