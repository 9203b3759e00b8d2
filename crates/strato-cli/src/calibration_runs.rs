//! The CLI side of calibration shared by `strato record --calibrate` and `strato validate
//! --refit`: the runs of each configuration as they were measured, which runs traced device
//! commands, and the fit over them (`strato_analysis::recording::calibration` does the math).

use std::path::PathBuf;

use anyhow::Result;
use strato_analysis::recording::calibration::{
    self, robust, Basis, CalibrationFile, ConfigRuns, RunMeasure, StoredRuns, BOOTSTRAP_SAMPLES,
    LEVEL_NAMES,
};

/// Whether the OpenCL layer (loaded when `opencl_on`) traces device commands in a run at
/// `level` with layer level `opencl` (None: `STRATOSCOPE_OPENCL` or full; the recorder's level
/// 0 turns the layer off).
pub(crate) fn device_tracing(opencl_on: bool, level: u64, opencl: Option<&str>) -> bool {
    let layer = opencl
        .map(str::to_owned)
        .or_else(|| std::env::var("STRATOSCOPE_OPENCL").ok())
        .unwrap_or_else(|| "full".into());
    opencl_on
        && level > 0
        && matches!(
            layer.trim().to_ascii_lowercase().as_str(),
            "device" | "2" | "full" | "3" | ""
        )
}

/// One run of a configuration: where it was recorded and what it measured.
pub(crate) struct RunResult {
    pub(crate) dir: PathBuf,
    pub(crate) measure: RunMeasure,
}

/// How a run samples the CPU (`strato record --sample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sampling {
    /// The launcher's native samples and the program's Python-stack sampler (as recorded).
    NativeAndPython,
    /// Native samples only (the program's sampler off): tells the two costs apart.
    Native,
}

impl Sampling {
    /// The name stored in `calibration.json` (`StoredRuns::sample`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Sampling::NativeAndPython => "native+python",
            Sampling::Native => "native",
        }
    }

    /// The mode a stored name stands for.
    pub(crate) fn from_name(name: &str) -> Option<Sampling> {
        [Sampling::NativeAndPython, Sampling::Native]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// The runs of one configuration (collection level, OpenCL layer level).
pub(crate) struct Measured {
    pub(crate) level: u64,
    /// The OpenCL layer's level for this configuration (None: the recorded run's).
    pub(crate) opencl: Option<&'static str>,
    /// The runs record the OS level too (`--os`: its book-keeping is one more cost).
    pub(crate) os: bool,
    /// The runs sample the CPU (`--sample`: the samples' book-keeping is two more costs).
    pub(crate) sample: Option<Sampling>,
    pub(crate) runs: Vec<RunResult>,
}

impl Measured {
    pub(crate) fn name(&self) -> String {
        let base = LEVEL_NAMES[self.level as usize];
        let name = match self.opencl {
            Some(l) => format!("{base}, opencl {l}"),
            None => base.to_owned(),
        };
        let name = if self.os { name + " + os" } else { name };
        match self.sample {
            Some(Sampling::NativeAndPython) => name + " + samples",
            Some(Sampling::Native) => name + " + native samples",
            None => name,
        }
    }

    /// The configuration's directory under `.runs`:
    /// `level-N[-opencl-L][-os][-samples|-native-samples]`.
    pub(crate) fn dir_name(&self) -> String {
        let mut dir = format!("level-{}", self.level);
        if let Some(layer) = self.opencl {
            dir += &format!("-opencl-{layer}");
        }
        if self.os {
            dir += "-os";
        }
        match self.sample {
            Some(Sampling::NativeAndPython) => dir += "-samples",
            Some(Sampling::Native) => dir += "-native-samples",
            None => {}
        }
        dir
    }
}

/// Fits and validates the calibration on the runs of each configuration (`measured`, in the
/// order they ran) and the held-out runs at the recorded `level`: the content of
/// `calibration.json`. `strato validate --refit` calls it again on the stored runs.
pub(crate) fn fit_runs(
    engine: &strato_engine::Engine,
    measured: &[Measured],
    held_out: &[RunResult],
    level: u64,
    command: &[String],
    repeat: usize,
) -> Result<CalibrationFile> {
    let measures = |runs: &[RunResult]| runs.iter().map(|r| r.measure.clone()).collect::<Vec<_>>();
    let configs_runs: Vec<Vec<RunMeasure>> = measured.iter().map(|m| measures(&m.runs)).collect();
    let held: Vec<RunMeasure> = measures(held_out);
    let basis = Basis::of(configs_runs.iter().flatten().chain(&held));
    let configs: Vec<ConfigRuns<'_>> = measured
        .iter()
        .zip(&configs_runs)
        .map(|(m, runs)| (m.level, m.opencl, &runs[..]))
        .collect();
    let fit = calibration::fit_and_validate(&configs, &held, basis);
    // How far run-to-run noise alone moves the figure.
    let interval = calibration::bias_interval(&configs, &held, basis, BOOTSTRAP_SAMPLES);
    let cal = fit.calibration.clone();
    let mut removed = Vec::with_capacity(held_out.len());
    for r in held_out {
        let trace = engine.load_recording(&r.dir)?;
        removed.push(calibration::removed_in_root(&trace, &cal).map_or(0.0, |v| v.2));
    }
    let uninstrumented = robust(&configs_runs[0], |r| r.time_ns);
    let mut runs: Vec<StoredRuns> = measured
        .iter()
        .zip(&configs_runs)
        .map(|(m, runs)| {
            let mut stored = StoredRuns::of(m.level, &m.name(), m.opencl, runs);
            stored.sample = m.sample.map(|s| s.as_str().to_owned());
            stored
        })
        .collect();
    let mut held_stored = StoredRuns::of(level, "held-out", None, &held);
    // Held-out runs sample as the profile does: both samplers.
    if !held_stored.sample_collector_cpu_s.is_empty() {
        held_stored.sample = Some(Sampling::NativeAndPython.as_str().to_owned());
    }
    runs.push(held_stored);
    // Each configuration's robust time and corrected time on the fit's basis.
    for (stored, measures) in runs.iter_mut().zip(configs_runs.iter().chain([&held])) {
        let (time, corrected) = calibration::corrected_figures(measures, &cal, basis);
        stored.basis_s = Some(time / 1e9);
        stored.corrected_s = Some(corrected / 1e9);
    }
    // Held-out runs at the recorded level, not used by the fit: mean over the fastest 60%
    // of their instrumented and corrected times, on the fit's basis and on wall time.
    let validation =
        calibration::held_out_validation(&fit, basis, uninstrumented, &held, &removed, interval);
    let os = calibration::os_validation(&fit, &held, basis);
    let sample = calibration::sample_validation(&fit, &held, basis);
    Ok(CalibrationFile {
        costs_ns: cal.costs_ns,
        api_inflation_ns: cal.api_inflation_ns,
        basis,
        method: calibration::METHOD.to_owned(),
        command: command.to_vec(),
        repeat,
        uninstrumented_s: uninstrumented / 1e9,
        uninstrumented_cpu_s: (basis == Basis::ThreadCpu).then_some(fit.uninstrumented_ns / 1e9),
        runs,
        validation,
        os,
        sample,
    })
}
