//! `strato record`'s summary as text: the profile, its breakdown (the same renderer as `strato
//! breakdown`), the validation, calibrated costs and leveled runs.

use std::io::Write;

use anyhow::Result;
use serde_json::Value;
use strato_analysis::breakdown::BreakdownReport;

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
    crate::render::breakdown::text(out, report, top)?;
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
