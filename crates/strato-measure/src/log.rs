//! The decision log: every decision the engine and calibrator take (round set-up, outliers,
//! re-measurements, delta_mean, REACT updates, worker replacements, rank selection) as a
//! structured record with its time since the start of the run. Records are kept in the report
//! and can also be streamed as JSON lines.

use std::io::Write;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::calibrate::ReactStep;

/// One decision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    WorkerReady {
        slot: usize,
        pid: u32,
        init_s: f64,
    },
    WorkerReplaced {
        slot: usize,
        pid: u32,
        reason: String,
        candidate: Option<String>,
        detail: String,
    },
    WorkerWriteFailed {
        slot: usize,
        pid: u32,
        error: String,
    },
    /// A calibration round starts (eq. 2 gives its timeout).
    Round {
        round: usize,
        dp: usize,
        timeout_s: f64,
        candidates: usize,
    },
    /// Failures of a parallel round re-run alone (N_err.dp counts those that then succeed).
    RetryFailed {
        round: usize,
        candidate: String,
        first: String,
        alone: String,
    },
    /// Outliers among the ratios latency / duration (modified z-scores).
    Outliers {
        round: usize,
        median_ratio: f64,
        outliers: Vec<String>,
        z: Vec<f64>,
    },
    /// The Q candidates chosen for isolated re-measurement (eq. 3).
    Sample {
        round: usize,
        q: usize,
        outliers: usize,
        random: usize,
        candidates: Vec<String>,
    },
    /// One isolated re-measurement.
    Remeasured {
        round: usize,
        candidate: String,
        parallel_ns: f64,
        isolated_ns: f64,
    },
    /// delta_mean of the round (eq. 4) and the scaling applied (eq. 5).
    Delta {
        round: usize,
        dp: usize,
        delta_mean: f64,
        samples: usize,
        scale: f64,
    },
    /// The REACT update (eq. 6-7).
    React {
        round: usize,
        #[serde(flatten)]
        step: ReactStep,
    },
    /// Parallelism is pinned; REACT is not consulted.
    Pinned {
        round: usize,
        dp: usize,
    },
    /// Rank selection's window: the candidates that could be the fastest given the
    /// uncertainty of each one's measurement (measured distortion at its parallelism level).
    RankWindow {
        /// Relative uncertainty used per parallelism level (`0` = measured alone).
        uncertainty_by_dp: std::collections::BTreeMap<usize, f64>,
        min_count: usize,
        size: usize,
        candidates: Vec<String>,
    },
    /// One interleaved pass of rank selection: the candidates still in the race, the median
    /// of their isolated samples so far and the larger side of its 95% interval (with the
    /// elimination floor).
    RankPass {
        pass: usize,
        candidates: Vec<String>,
        median_ns: Vec<f64>,
        half_ns: Vec<f64>,
    },
    /// Rank selection: the window re-measured alone, interleaved, until one is left or the
    /// remaining ones are known to within `rank_ci`.
    RankSelection {
        k: usize,
        candidates: Vec<String>,
        isolated_ns: Vec<f64>,
        best: Option<String>,
    },
}

/// A decision with its time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Seconds since the run started.
    pub t_s: f64,
    #[serde(flatten)]
    pub decision: Decision,
}

/// The log of one run.
pub struct Log {
    epoch: Instant,
    /// Every record so far.
    pub records: Vec<Record>,
    sink: Option<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("records", &self.records.len())
            .field("sink", &self.sink.is_some())
            .finish()
    }
}

impl Log {
    /// A log whose times count from `epoch`.
    pub fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            records: Vec::new(),
            sink: None,
        }
    }

    /// Also writes every record as a JSON line to `sink`.
    pub fn with_sink(mut self, sink: Box<dyn Write + Send>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Records a decision.
    pub fn push(&mut self, decision: Decision) {
        let record = Record {
            t_s: self.epoch.elapsed().as_secs_f64(),
            decision,
        };
        if let Some(sink) = self.sink.as_mut() {
            if let Ok(line) = serde_json::to_string(&record) {
                let _ = writeln!(sink, "{line}");
                let _ = sink.flush();
            }
        }
        self.records.push(record);
    }
}
