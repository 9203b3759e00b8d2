//! Colours and patterns of the breakdown (RL-Scope figure 4: colour = resource, pattern =
//! stratum), shared by the breakdown, processes and kernels sections and the page's pattern
//! definitions. The colours are [`strato_analysis::palette`]'s, shared with every front end.

use strato_analysis::cross_stack::breakdown::Resource;
use strato_trace::Level;

use strato_analysis::palette;

pub(super) const CPU_COLOR: &str = palette::CPU;
pub(super) const GPU_COLOR: &str = palette::DEVICE;
pub(super) const BOTH_COLOR: &str = palette::CPU_AND_DEVICE;
pub(super) const IDLE_COLOR: &str = palette::IDLE;
pub(super) const NEUTRAL: &str = palette::NEUTRAL;

/// Strata drawn with their own pattern, in legend order.
pub(super) const PATTERNED: [Level; 8] = [
    Level::Python,
    Level::Backend,
    Level::Simulator,
    Level::Library,
    Level::AcceleratorApi,
    Level::Os,
    Level::Overhead,
    Level::Other,
];

pub(super) fn level_label(level: Level) -> &'static str {
    match level {
        Level::AcceleratorApi => "Accelerator API",
        Level::Backend => "ML backend",
        other => other.as_str(),
    }
}

/// The pattern drawn over a resource colour for a stratum (white marks at 55% opacity).
pub(super) fn pattern_marks(level: Level) -> (&'static str, &'static str) {
    // (patternTransform, marks)
    match level {
        Level::Backend => ("rotate(45)", "<rect width=\"2.2\" height=\"6\" fill=\"#fff\" fill-opacity=\".55\"/>"),
        Level::AcceleratorApi => (
            "rotate(45)",
            "<rect width=\"1.6\" height=\"6\" fill=\"#fff\" fill-opacity=\".6\"/><rect width=\"6\" height=\"1.6\" fill=\"#fff\" fill-opacity=\".6\"/>",
        ),
        Level::Simulator => ("", "<circle cx=\"3\" cy=\"3\" r=\"1.3\" fill=\"#fff\" fill-opacity=\".7\"/>"),
        Level::Library => ("", "<rect width=\"6\" height=\"2\" fill=\"#fff\" fill-opacity=\".55\"/>"),
        Level::Os => ("", "<rect width=\"2\" height=\"6\" fill=\"#fff\" fill-opacity=\".55\"/>"),
        Level::Overhead => ("rotate(-45)", "<rect width=\"3\" height=\"6\" fill=\"#000\" fill-opacity=\".25\"/>"),
        Level::Other => ("", "<rect width=\"3\" height=\"3\" fill=\"#fff\" fill-opacity=\".4\"/>"),
        _ => ("", ""),
    }
}

pub(super) fn resource_key(r: Resource) -> &'static str {
    match r {
        Resource::Cpu => "c",
        Resource::CpuGpu => "b",
        Resource::Gpu => "g",
        Resource::Idle => "i",
    }
}

/// Fill of a (resource, CPU level) cell.
pub(super) fn fill_of(resource: Resource, level: Option<Level>) -> String {
    let base = match resource {
        Resource::Cpu => CPU_COLOR,
        Resource::CpuGpu => BOTH_COLOR,
        Resource::Gpu => return GPU_COLOR.to_owned(),
        Resource::Idle => return IDLE_COLOR.to_owned(),
    };
    match level {
        Some(l) if l != Level::Python && PATTERNED.contains(&l) => {
            format!("url(#p{}{})", resource_key(resource), l.code())
        }
        _ => base.to_owned(),
    }
}

/// The `<pattern>` definitions used by breakdown plots, in one hidden SVG at the top of the
/// page (ids are page-wide).
pub(super) fn pattern_defs() -> String {
    let mut s = String::from(
        "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>",
    );
    for (key, base) in [("c", CPU_COLOR), ("b", BOTH_COLOR), ("n", NEUTRAL)] {
        for level in PATTERNED {
            let (transform, marks) = pattern_marks(level);
            if marks.is_empty() {
                continue;
            }
            let t = if transform.is_empty() {
                String::new()
            } else {
                format!(" patternTransform=\"{transform}\"")
            };
            s.push_str(&format!(
                "<pattern id=\"p{key}{}\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\"{t}><rect width=\"6\" height=\"6\" fill=\"{base}\"/>{marks}</pattern>",
                level.code()
            ));
        }
    }
    s.push_str("</defs></svg>");
    s
}

pub(super) fn breakdown_legend(levels: &[Level]) -> Vec<(String, String)> {
    let mut legend = vec![
        ("CPU".to_owned(), CPU_COLOR.to_owned()),
        ("GPU".to_owned(), GPU_COLOR.to_owned()),
        ("CPU+GPU".to_owned(), BOTH_COLOR.to_owned()),
        ("idle".to_owned(), IDLE_COLOR.to_owned()),
    ];
    for &l in PATTERNED.iter().filter(|l| levels.contains(l)) {
        let fill = if l == Level::Python {
            NEUTRAL.to_owned()
        } else {
            format!("url(#pn{})", l.code())
        };
        legend.push((format!("stratum: {}", level_label(l)), fill));
    }
    legend
}
