//! Units and widths for text output: durations in fixed units, names fitted to a column.

/// Shortens `text` to `width` characters (`…` marks the cut).
pub(crate) fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_owned()
    } else if width == 0 {
        String::new()
    } else {
        let mut s: String = text.chars().take(width - 1).collect();
        s.push('…');
        s
    }
}

/// Shortens `text` to `width` characters by cutting its middle (paths keep their file name).
pub(crate) fn fit_middle(text: &str, width: usize) -> String {
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
pub(crate) fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1e3)
}
