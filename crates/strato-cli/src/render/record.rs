//! `strato record`'s summary as text: the profile, its breakdown (the same renderer as `strato
//! breakdown`), the validation, calibrated costs and leveled runs.

use std::io::Write;

use anyhow::Result;
use serde_json::Value;
use strato_analysis::cross_stack::breakdown::BreakdownReport;

/// Prints the summary of a `strato record` run (`doc` is its JSON form).
pub(crate) fn print_text(
    out: &mut impl Write,
    report: &BreakdownReport,
    doc: &Value,
    top: usize,
) -> Result<()> {
    writeln!(
        out,
        "profile {}{}",
        doc["profile"].as_str().unwrap_or(""),
        if doc["corrected"].as_bool() == Some(true) {
            " (overhead-corrected)"
        } else {
            ""
        }
    )?;
    writeln!(out)?;
    strato_analysis::cross_stack::breakdown::write_text(out, report, top)?;
    if let Some(v) = doc.get("validation") {
        write_validation(out, "\nvalidation ", v)?;
    }
    if let Some(c) = doc.get("calibration") {
        writeln!(out, "calibrated cost per event (ns): {}", c["costs_ns"])?;
        if c["api_inflation_ns"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
        {
            writeln!(
                out,
                "API call inflation under device tracing (ns per call): {}",
                c["api_inflation_ns"]
            )?;
        }
        if let Some(os) = c.get("os") {
            let f = |k: &str| os[k].as_f64().unwrap_or(0.0);
            writeln!(
                out,
                "OS level: {:.0} events (system calls, switches) per held-out run at {:.0} ns each: {:.4} s removed; bias without it {:+.1}%",
                f("events"),
                f("os_event_cost_ns"),
                f("removed_s"),
                f("bias_without_os_pct")
            )?;
            if let Some(cpu) = os["collector_cpu_s"].as_f64() {
                writeln!(
                    out,
                    "OS collector thread (in strato, outside the program's threads, not removed): {cpu:.4} s CPU per run, {:.1}% of the uninstrumented time",
                    f("collector_cpu_pct")
                )?;
            }
            if let Some(wait) = os["collector_wait_s"].as_f64() {
                writeln!(
                    out,
                    "the program's threads runnable behind strato's collectors: {wait:.4} s per run (wall time; removed from the profile's timeline, in no CPU figure)"
                )?;
            }
        }
    }
    if let Some(sample) = doc.get("calibration").and_then(|c| c.get("sample")) {
        let f = |k: &str| sample[k].as_f64().unwrap_or(0.0);
        writeln!(
            out,
            "CPU sampling: {:.0} native samples at {:.0} ns and {:.0} Python-stack samples at {:.0} ns per held-out run: {:.4} s removed; bias without it {:+.1}%",
            f("cpu_samples"),
            f("cpu_sample_cost_ns"),
            f("python_stacks"),
            f("python_stack_cost_ns"),
            f("removed_s"),
            f("bias_without_sampling_pct")
        )?;
        if let Some(cpu) = sample["collector_cpu_s"].as_f64() {
            writeln!(
                out,
                "sample collector thread (in strato, outside the program's threads, not removed): {cpu:.4} s CPU per run, {:.1}% of the uninstrumented time",
                f("collector_cpu_pct")
            )?;
        }
    }
    if let Some(l) = doc.get("levels") {
        writeln!(out, "\nleveled experimentation:")?;
        for r in l["runs"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "  level {} {:<15} {:>9.4} s  overhead {:+.1}%",
                r["level"],
                r["name"].as_str().unwrap_or(""),
                r["time_s"].as_f64().unwrap_or(0.0),
                r["overhead_vs_uninstrumented_pct"].as_f64().unwrap_or(0.0)
            )?;
        }
        for s in l["strata"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "  {:<12} timings from level {} ({}) : {:.4} s",
                s["stratum"].as_str().unwrap_or(""),
                s["from_level"],
                s["from_run"].as_str().unwrap_or(""),
                s["span_time_s"].as_f64().unwrap_or(0.0)
            )?;
        }
    }
    Ok(())
}

/// The bias a validation must resolve for its figures to speak for themselves (percent of the
/// uninstrumented time): a wider 95% interval gets a line saying so.
const RESOLVED_PCT: f64 = 15.0;

/// Half the width of `v`'s bias interval when it is wider than +-[`RESOLVED_PCT`].
fn unresolved_half_width(v: &Value) -> Option<f64> {
    let [lo, hi] = v["bias_pct_interval95"].as_array()?.as_slice() else {
        return None;
    };
    let half_width = (hi.as_f64()? - lo.as_f64()?) / 2.0;
    (half_width > RESOLVED_PCT).then_some(half_width)
}

/// One line per basis of a validation object : its own basis, then the
/// wall-clock figures when the basis was CPU time.
pub(crate) fn write_validation(out: &mut impl Write, prefix: &str, v: &Value) -> Result<()> {
    let line = |v: &Value, basis: &str| {
        format!(
            "({basis}): uninstrumented {:.4} s, instrumented {:.4} s ({:+.1}%), corrected {:.4} s, bias {:+.2}%",
            v["uninstrumented_s"].as_f64().unwrap_or(0.0),
            v["instrumented_s"].as_f64().unwrap_or(0.0),
            v["inflation_pct"].as_f64().unwrap_or(0.0),
            v["corrected_s"].as_f64().unwrap_or(0.0),
            v["bias_pct"].as_f64().unwrap_or(0.0)
        )
    };
    let basis = v["basis"].as_str().unwrap_or("wall");
    let interval = match v["bias_pct_interval95"].as_array().map(Vec::as_slice) {
        Some([a, b]) => format!(
            " (95% interval over resampled runs: {:+.2}% .. {:+.2}%)",
            a.as_f64().unwrap_or(0.0),
            b.as_f64().unwrap_or(0.0)
        ),
        _ => String::new(),
    };
    writeln!(out, "{prefix}{}{interval}", line(v, basis))?;
    if let Some(half_width) = unresolved_half_width(v) {
        writeln!(
            out,
            "{}note: the interval is +-{half_width:.0}% wide: these runs cannot resolve the correction to {RESOLVED_PCT:.0}%. \
             The same work took different times from run to run (a machine whose CPU speed varies, \
             e.g. a VM sharing its host's cores); more --repeat narrows it \
             (docs/levels.md, \"Calibration on a noisy machine\")",
            prefix.trim_start_matches('\n'),
        )?;
    }
    if let Some(w) = v.get("wall") {
        writeln!(
            out,
            "{}{}",
            prefix.trim_start_matches('\n'),
            line(w, "wall")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validation(interval: [f64; 2]) -> String {
        let v = json!({"basis": "thread_cpu", "uninstrumented_s": 0.1, "instrumented_s": 0.12,
            "inflation_pct": 20.0, "corrected_s": 0.1, "bias_pct": 0.0,
            "bias_pct_interval95": interval});
        let mut out = Vec::new();
        write_validation(&mut out, "validation ", &v).expect("writes to a Vec");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn a_validation_too_noisy_to_resolve_fifteen_percent_says_so() {
        let text = validation([-28.0, 30.0]);
        assert!(
            text.contains("(95% interval over resampled runs: -28.00% .. +30.00%)"),
            "{text}"
        );
        assert!(
            text.contains(
                "the interval is +-29% wide: these runs cannot resolve the correction to 15%"
            ),
            "{text}"
        );
        // A narrow interval, and none at all, get no such line.
        assert!(!validation([-2.0, 2.3]).contains("cannot resolve"));
        assert!(!validation([-15.0, 15.0]).contains("cannot resolve"));
    }
}
