//! Units and widths for text output: durations in fixed units, names fitted to a column.

use strato_trace::Ns;

/// Shortens `text` to at most `width` characters, ending in `marker` when cut (the one name
/// cutter of every text output; [`fit`] and [`fit_ascii`] fix the marker).
pub fn cut_end(text: &str, width: usize, marker: &str) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let keep = width.saturating_sub(marker.chars().count());
    let mut s: String = text.chars().take(keep).collect();
    s.push_str(marker);
    s
}

/// Shortens `text` to `width` characters (`…` marks the cut; width 0 gives the empty string).
pub fn fit(text: &str, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    cut_end(text, width, "…")
}

/// Shortens `text` to `width` characters, ending in `...` when cut (ASCII tables).
pub fn fit_ascii(text: &str, width: usize) -> String {
    cut_end(text, width, "...")
}

/// Shortens `text` to `width` characters by cutting its middle (paths keep their file name).
pub fn fit_middle(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width || width < 5 {
        return text.to_owned();
    }
    let tail = (width - 1) * 2 / 3;
    let head = width - 1 - tail;
    let h: String = text.chars().take(head).collect();
    let t: String = text.chars().skip(n - tail).collect();
    format!("{h}…{t}")
}

/// Nanoseconds as microseconds with three decimals.
pub fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1e3)
}

/// Nanoseconds as milliseconds with three decimals and the unit: `1.234 ms`.
pub fn ms(ns: Ns) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Nanoseconds as milliseconds with three decimals, no unit (table cells).
pub fn ms_num(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

/// Nanoseconds as microseconds with one decimal, no unit.
pub fn us_num(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// `part` as a percentage of `whole` with one decimal (`-` when `whole` is not positive).
pub fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}%", 100.0 * part / whole)
    } else {
        "-".into()
    }
}

/// `f(v)`, or `unknown` when there is no value.
pub fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "unknown".to_owned(), f)
}

/// Optional nanoseconds as milliseconds with the unit, `-` when absent.
pub fn ms_or_dash(ns: Option<f64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.3} ms", v / 1e6))
}
