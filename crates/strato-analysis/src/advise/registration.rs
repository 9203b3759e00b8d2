//! `advise` as a registered analysis ([`crate::registry`]): its options (a rules file, rules
//! disabled, the floor), tables, JSON (the [`AdviseReport`] as it serialises) and text. The
//! rules are the parent module's; the cross-rank evidence comes from the same trace
//! ([`super::CrossRankEvidence`]).
//!
//! Writing the default rules file (`strato advise --print-rules`) is the terminal's, which
//! needs no input.

use std::fmt::Write as _;

use strato_trace::projection::ArgsScope;
use strato_trace::Ns;

use super::{advise_trace, step_breakdown, AdviseConfig, AdviseReport, RULES};
use crate::analyzed::Analyzed;
use crate::registry::{
    Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, Reads, TableSpec,
};

/// The advice rules over a trace.
#[derive(Debug)]
pub struct Advise;

/// The options of [`Advise`] as the front ends give them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdviseSettings {
    /// A rules file's text (TOML; the engine has read it and checked it parses).
    pub rules: Option<String>,
    /// Rules not run.
    pub disable: Vec<String>,
    /// Findings below this share of the window (percent) are hidden; `None`: the rules file's
    /// floor, else 1.
    pub floor: Option<f64>,
    /// Report every finding, even below the floor.
    pub all: bool,
}

impl AdviseSettings {
    /// The rules' configuration: the rules file's (or the defaults), then the rules disabled,
    /// the floor and `all` given beside it.
    pub fn config(&self) -> Result<AdviseConfig, String> {
        let mut config = match &self.rules {
            Some(text) => AdviseConfig::from_toml(text).map_err(|e| e.to_string())?,
            None => AdviseConfig::default(),
        };
        for id in &self.disable {
            if !config.disable(id) {
                return Err(format!(
                    "disable {id:?}: no such rule (rules: {})",
                    RULES.join(", ")
                ));
            }
        }
        if let Some(floor) = self.floor {
            config.floor_pct = floor;
        }
        config.all |= self.all;
        config.validate().map_err(|e| format!("floor: {e}"))?;
        Ok(config)
    }
}

fn check_rules(text: &str) -> Result<(), String> {
    AdviseConfig::from_toml(text)
        .map(drop)
        .map_err(|e| e.to_string())
}

impl Analysis for Advise {
    const NAME: &'static str = "advise";
    const SUMMARY: &'static str = "Advice: expert rules over a trace (host syncs, \
pageable/synchronous copies, GPU idle gaps and their CPU-side cause, launch-bound stretches, low \
utilisation, per-step bottlenecks, small copies, copies not overlapped, stragglers, exposed \
communication), each finding with its time at stake and evidence";
    const WINDOW: &'static str = "the whole trace: earliest span start to latest span end over \
every rank; a finding's share is its time over the window, and the total at stake is the union \
of the findings' time, never their sum";
    const DOC: &'static str = "docs/advise.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato advise trace.json.gz",
        "strato advise trace.json.gz --all --json",
        "strato advise prof --disable low-util --rules rules.toml",
        "strato advise --print-rules > rules.toml",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "rules",
            help: "thresholds file (TOML; see --print-rules and docs/advise.md)",
            kind: OptionKind::File {
                what: "the rules file",
                check: check_rules,
            },
            default: "",
        },
        OptionSpec {
            name: "disable",
            help: "disable a rule (repeatable)",
            kind: OptionKind::Words {
                what: "rule",
                words: &RULES,
            },
            default: "",
        },
        OptionSpec {
            name: "floor",
            help: "hide findings below this share of the window (percent; default 1, or the \
rules file's)",
            kind: OptionKind::Number,
            default: "",
        },
        OptionSpec {
            name: "all",
            help: "report every finding, even below the floor",
            kind: OptionKind::Flag,
            default: "false",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "findings",
            about: "one row per finding: rule, severity, time at stake and share of the window, \
message, advice, docs",
            path: &["findings"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "findings_evidence",
            about: "one row per piece of evidence of a finding (a time range on a rank)",
            path: &["findings", "evidence"],
            inherit: &["rule"],
            options: &[],
        },
        TableSpec {
            name: "advise_steps",
            about: "one row per (rank, step): time per category and the step's bottleneck",
            path: &["steps"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "advise_rules",
            about: "one row per rule: enabled, evaluated (or why not), findings",
            path: &["rules"],
            inherit: &[],
            options: &[],
        },
    ];
    /// Spans, and the attributes the rules and the gains read: device ops' (copy sizes and
    /// directions, nsys memory kinds), runtime calls' and the CPU side of collectives' (the
    /// critical path's graph and the cross-rank evidence); not the framework ops' shapes.
    const READS: Reads = Reads {
        events: Events::Spans,
        args: Some(ArgsScope::Dependencies),
    };
    /// The report's advice section, shown first.
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = AdviseSettings;
    type Output = AdviseReport;

    fn check_options(settings: &AdviseSettings) -> Result<(), String> {
        settings.config().map(drop)
    }

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &AdviseSettings,
    ) -> Result<AdviseReport, AnalysisError> {
        let config = settings.config().map_err(AnalysisError)?;
        Ok(advise_trace(analyzed, &config))
    }

    fn render_text(report: &AdviseReport, _: &AdviseSettings) -> String {
        let mut out = String::new();
        text(&mut out, report);
        out
    }
}

fn ms(ns: Ns) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The text rendering.
fn text(out: &mut String, r: &AdviseReport) {
    let _ = writeln!(
        out,
        "Window: {} ({} .. {} ns)",
        ms(r.window_ns),
        r.window_start_ns,
        r.window_end_ns
    );
    if r.findings.is_empty() {
        let _ = writeln!(
            out,
            "No findings at or above the floor ({}% of the window).",
            r.floor_pct
        );
    } else {
        let _ = writeln!(
            out,
            "{} findings; total at stake {} ({:.1}% of the window) = the union of the \
             findings' time (they overlap, so it is less than their sum).",
            r.findings.len(),
            ms(r.total_at_stake_ns),
            r.total_at_stake_pct
        );
    }
    if r.hidden_below_floor > 0 {
        let _ = writeln!(
            out,
            "{} findings below the floor of {}% hidden (--all shows them).",
            r.hidden_below_floor, r.floor_pct
        );
    }
    for (k, f) in r.findings.iter().enumerate() {
        out.push('\n');
        let _ = writeln!(
            out,
            "{}. [{}] {}: {} ({:.1}% of the window)",
            k + 1,
            f.severity.as_str(),
            f.rule,
            ms(f.time_ns),
            f.share_pct
        );
        let _ = writeln!(out, "   {}", f.message);
        let _ = writeln!(out, "   Advice: {}", f.advice);
        let _ = match f.estimated_gain_ns {
            Some(gain) => writeln!(out, "   Estimated gain: {} ({})", ms(gain), f.gain_note),
            None => writeln!(out, "   Estimated gain: {}", f.gain_note),
        };
        let _ = writeln!(out, "   Docs: {}", f.docs);
        for e in &f.evidence {
            let _ = writeln!(
                out,
                "   - {} rank {} {}..{} ns ({}): {}",
                e.kind,
                e.rank,
                e.start_ns,
                e.end_ns,
                ms(e.end_ns - e.start_ns),
                e.name
            );
        }
    }
    if !r.steps.is_empty() {
        out.push('\n');
        out.push_str("Steps (time in ms per category; bottleneck):\n");
        let header: Vec<&str> = step_breakdown::CATEGORIES.to_vec();
        let _ = writeln!(
            out,
            "  rank  step                  {}  bottleneck",
            header.join(" | ")
        );
        for s in &r.steps {
            let parts: Vec<String> = s
                .parts
                .iter()
                .map(|(c, t)| format!("{:>w$.3}", *t as f64 / 1e6, w = c.len()))
                .collect();
            let _ = writeln!(
                out,
                "  {:>4}  {:<20}  {}  {}",
                s.rank,
                s.name,
                parts.join(" | "),
                s.bottleneck
            );
        }
    }
    out.push('\n');
    out.push_str("Rules:\n");
    for s in &r.rules {
        let state = if !s.enabled {
            "disabled".to_owned()
        } else if !s.evaluated {
            format!("not evaluated: {}", s.note.as_deref().unwrap_or(""))
        } else {
            format!("{} findings", s.findings)
        };
        let _ = writeln!(out, "  {:<22} {state}", s.rule);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_apply_over_the_rules_file_in_order() {
        let rules = toml::to_string(&AdviseConfig {
            floor_pct: 5.0,
            ..AdviseConfig::default()
        })
        .expect("serialises");
        let from_file = AdviseSettings {
            rules: Some(rules.clone()),
            ..AdviseSettings::default()
        };
        assert_eq!(from_file.config().map(|c| c.floor_pct), Ok(5.0));
        let overridden = AdviseSettings {
            rules: Some(rules),
            floor: Some(2.0),
            disable: vec![RULES[0].to_owned()],
            all: true,
        };
        let config = overridden.config().expect("valid");
        assert_eq!((config.floor_pct, config.all), (2.0, true));
        assert!(!config.clone().disable("no-such-rule"));
        let bad = AdviseSettings {
            disable: vec!["no-such-rule".into()],
            ..AdviseSettings::default()
        };
        assert!(bad.config().is_err_and(|e| e.contains("no such rule")));
        let out_of_range = AdviseSettings {
            floor: Some(-1.0),
            ..AdviseSettings::default()
        };
        assert!(out_of_range
            .config()
            .is_err_and(|e| e.starts_with("floor:")));
    }
}
