//! `tree` as a registered analysis ([`crate::registry`]): the chain annotation -> op -> API
//! call -> kernel of what runs at one instant, or of the first kernels whose name matches, with
//! its options, its table (one row per link, numbered by chain) and its text. The chains are
//! the parent module's ([`super::chains_at`], [`super::chains_of_kernels`]).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns, Trace};

use super::{chains_at, chains_of_kernels, ChainLink};
use crate::analyzed::Analyzed;
use crate::registry::{
    Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, Reads, TableSpec,
};
use crate::text::units::{fit, ms, us_num};

/// The chains of the spans active at an instant, or of kernels by name.
#[derive(Debug)]
pub struct Tree;

/// The options of [`Tree`] as the front ends give them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TreeSettings {
    /// The instant ([`parse_time`]); `""`: the middle of the longest kernel.
    pub at: String,
    /// `""`: chains at an instant; else the chains of the first kernels whose name contains it.
    pub kernel: String,
    /// At most this many chains.
    pub limit: u64,
}

impl Default for TreeSettings {
    fn default() -> Self {
        TreeSettings {
            at: String::new(),
            kernel: String::new(),
            limit: 8,
        }
    }
}

/// The chains found and what was asked; serialises as the command's JSON.
#[derive(Debug, Serialize)]
pub struct TreeResult {
    /// Each chain from its leaf (a device op or a thread's innermost span) to its root.
    pub chains: Vec<Vec<ChainLink>>,
    /// What the chains are of (the instant, or the kernel name asked for).
    pub what: String,
    /// The trace's first instant, which the text shows times from.
    #[serde(skip)]
    pub origin: Ns,
}

impl Analysis for Tree {
    const NAME: &'static str = "tree";
    const SUMMARY: &'static str = "The chain annotation -> op -> API call -> kernel of what \
runs at a time, or of kernels by name";
    const WINDOW: &'static str = "the spans active at one instant (--at), or the first kernels \
whose name matches (--kernel), each with its ancestors";
    const DOC: &'static str = "docs/analyses/hierarchy.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato tree trace.json.gz --at 250ms",
        "strato tree trace.json.gz --kernel gemm --limit 2",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "at",
            help: "The instant: absolute ns (1669783687730492000) or an offset from the trace \
start with a unit (250ms, 1.5s, 300us); unset: the middle of the longest kernel",
            kind: OptionKind::Text { value_name: "TIME" },
            default: "",
        },
        OptionSpec {
            name: "kernel",
            help: "Show the chains of the first kernels whose name contains this text",
            kind: OptionKind::Text { value_name: "TEXT" },
            default: "",
        },
        OptionSpec {
            name: "limit",
            help: "At most this many chains",
            kind: OptionKind::Count { min: 0 },
            default: "8",
        },
    ];
    const TABLES: &'static [TableSpec] = &[TableSpec {
        name: "tree_links",
        about: "one row per span of a chain: the chain's number (from 0), then the span, leaf \
first",
        path: &["chains", "[]chain"],
        inherit: &["what"],
        options: &[],
    }];
    /// Every event (correlations and graph links are flows), no attributes.
    const READS: Reads = Reads {
        events: Events::All,
        args: None,
    };
    const IN_REPORT: InReport = InReport::Left("a lookup at one instant, not a summary");
    type Options = TreeSettings;
    type Output = TreeResult;

    fn check_options(options: &TreeSettings) -> Result<(), String> {
        if !options.at.is_empty() && !options.kernel.is_empty() {
            return Err("give --at or --kernel, not both".into());
        }
        if !options.at.is_empty() {
            parse_time(&options.at, 0)?;
        }
        Ok(())
    }

    fn run(analyzed: &Analyzed<'_>, options: &TreeSettings) -> Result<TreeResult, AnalysisError> {
        let trace = analyzed.trace();
        let origin = trace.time_span().map_or(0, |s| s.0);
        let limit = usize::try_from(options.limit).unwrap_or(usize::MAX);
        if !options.kernel.is_empty() {
            return Ok(TreeResult {
                chains: chains_of_kernels(analyzed, &options.kernel, limit),
                what: format!("kernels containing {:?}", options.kernel),
                origin,
            });
        }
        let t = match options.at.as_str() {
            "" => longest_kernel_middle(trace).ok_or_else(|| {
                AnalysisError("the trace has no device kernels; give --at TIME".into())
            })?,
            text => parse_time(text, origin).map_err(AnalysisError)?,
        };
        Ok(TreeResult {
            chains: chains_at(analyzed, t, limit),
            what: format!("at {t} ns ({} from the trace start)", ms(t - origin)),
            origin,
        })
    }

    fn render_text(result: &TreeResult, _: &TreeSettings) -> String {
        let mut out = format!(
            "{}: {} chains (root first)\n",
            result.what,
            result.chains.len()
        );
        for chain in &result.chains {
            out.push('\n');
            for (depth, link) in chain.iter().rev().enumerate() {
                let _ = writeln!(
                    out,
                    "{}{} {:<14} {}  [{} +{}]  {}",
                    "  ".repeat(depth),
                    if depth == 0 { "*" } else { "└" },
                    link.level.as_str(),
                    fit(&link.name, 90),
                    ms(link.start_ns - result.origin),
                    us_num((link.end_ns - link.start_ns) as f64) + " us",
                    link.track
                );
            }
        }
        out
    }
}

/// An instant given as absolute ns, or as an offset from `origin` with a unit (`250ms`,
/// `+1.5s`, `300us`, `10ns`).
pub fn parse_time(text: &str, origin: Ns) -> Result<Ns, String> {
    let t = text.trim();
    if let Ok(abs) = t.parse::<i64>() {
        return Ok(abs);
    }
    let units = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];
    for (suffix, scale) in units {
        if let Some(num) = t.strip_prefix('+').unwrap_or(t).strip_suffix(suffix) {
            if let Ok(v) = num.trim().parse::<f64>() {
                if (v * scale).is_finite() {
                    return Ok(origin.saturating_add((v * scale).round() as i64));
                }
            }
        }
    }
    Err(format!(
        "--at {text:?}: expected absolute ns or an offset like 250ms, 1.5s, 300us"
    ))
}

/// The middle of the trace's longest device kernel (the earliest of the longest).
fn longest_kernel_middle(trace: &Trace) -> Option<Ns> {
    trace
        .spans
        .iter()
        .filter(|s| s.level == Level::DeviceKernel)
        .max_by_key(|s| (s.duration(), std::cmp::Reverse(s.start)))
        .map(|s| s.start + s.duration() / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_absolute_or_offsets() {
        assert_eq!(
            parse_time("1669783687730492000", 5),
            Ok(1669783687730492000)
        );
        assert_eq!(parse_time("250ms", 1_000), Ok(250_001_000));
        assert_eq!(parse_time("+1.5s", 0), Ok(1_500_000_000));
        assert_eq!(parse_time(" 300us ", 10), Ok(300_010));
        assert!(parse_time("soon", 0).is_err());
        assert!(parse_time("1e400s", 0).is_err());
    }

    #[test]
    fn at_and_kernel_do_not_go_together() {
        let both = TreeSettings {
            at: "1ms".into(),
            kernel: "gemm".into(),
            ..TreeSettings::default()
        };
        assert!(Tree::check_options(&both).is_err());
        let bad = TreeSettings {
            at: "later".into(),
            ..TreeSettings::default()
        };
        assert!(Tree::check_options(&bad).unwrap_err().contains("later"));
        assert_eq!(Tree::check_options(&TreeSettings::default()), Ok(()));
    }
}
