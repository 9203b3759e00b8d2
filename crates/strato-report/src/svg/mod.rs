//! SVG plots, one module per kind of plot; this module owns the shared drawing primitives
//! ([`Svg`]: every text and tooltip goes through [`crate::html::esc`]), axis ticks, number
//! formats and the palette. Plots are drawn on a fixed-width `viewBox` and scale with the page.

pub mod bars;
pub mod line;
pub mod scatter;
pub mod timeline;

use std::fmt::Write as _;

use crate::html::{esc, esc_capped};

/// Width of every plot's viewBox.
pub const WIDTH: f64 = 1000.0;

/// The `i`th colour of the categories that come from the data (wrapping):
/// [`strato_analysis::palette::series`], the colour-blind-safe set every front end draws with.
pub fn color(i: usize) -> &'static str {
    strato_analysis::palette::series(i)
}

/// An SVG document under construction.
#[derive(Debug)]
pub struct Svg {
    buf: String,
}

/// Rounds coordinates to 0.1 px: enough for a 1000-px plot, and keeps files small.
fn r(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

impl Svg {
    /// Starts a plot of `WIDTH x height` with an accessible `label`.
    pub fn new(height: f64, label: &str) -> Svg {
        let mut buf = String::with_capacity(4096);
        let _ = write!(
            buf,
            "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" \
             role=\"img\" aria-label=\"{}\">",
            WIDTH,
            r(height),
            esc_capped(label)
        );
        Svg { buf }
    }

    /// Raw markup from this crate's literals (pattern definitions).
    pub fn markup(&mut self, markup: &str) {
        self.buf.push_str(markup);
    }

    /// A rectangle filled with `fill` (a colour or `url(#id)`), with a hover tooltip.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: Option<&str>) {
        let _ = write!(
            self.buf,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"",
            r(x),
            r(y),
            r(w.max(0.0)),
            r(h.max(0.0)),
            esc(fill)
        );
        match tip {
            Some(t) => {
                let _ = write!(self.buf, "><title>{}</title></rect>", esc_capped(t));
            }
            None => self.buf.push_str("/>"),
        }
    }

    /// A line with a CSS class (`axis`, `grid`, `roof`, ...).
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = write!(
            self.buf,
            "<line class=\"{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            esc(class),
            r(x1),
            r(y1),
            r(x2),
            r(y2)
        );
    }

    /// Text anchored `start`, `middle` or `end`, with a CSS class; `tip` adds a tooltip.
    pub fn text(
        &mut self,
        x: f64,
        y: f64,
        anchor: &str,
        class: &str,
        text: &str,
        tip: Option<&str>,
    ) {
        let _ = write!(
            self.buf,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" class=\"{}\">",
            r(x),
            r(y),
            esc(anchor),
            esc(class)
        );
        if let Some(t) = tip {
            let _ = write!(self.buf, "<title>{}</title>", esc_capped(t));
        }
        let _ = write!(self.buf, "{}</text>", esc_capped(text));
    }

    /// A vertical text (y-axis title).
    pub fn vtext(&mut self, x: f64, y: f64, text: &str) {
        let _ = write!(
            self.buf,
            "<text class=\"axt\" text-anchor=\"middle\" transform=\"translate({},{}) rotate(-90)\">{}</text>",
            r(x),
            r(y),
            esc_capped(text)
        );
    }

    /// A polyline through `points`, stroked in `stroke`.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, tip: Option<&str>) {
        let mut d = String::with_capacity(points.len() * 12);
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(d, "{}{},{}", if i == 0 { "M" } else { "L" }, r(*x), r(*y));
        }
        let _ = write!(
            self.buf,
            "<path class=\"series\" d=\"{}\" stroke=\"{}\"",
            d,
            esc(stroke)
        );
        match tip {
            Some(t) => {
                let _ = write!(self.buf, "><title>{}</title></path>", esc_capped(t));
            }
            None => self.buf.push_str("/>"),
        }
    }

    /// A filled area under `points` down to `base_y`.
    pub fn area(&mut self, points: &[(f64, f64)], base_y: f64, fill: &str) {
        if points.is_empty() {
            return;
        }
        let mut d = String::with_capacity(points.len() * 12);
        let _ = write!(d, "M{},{}", r(points[0].0), r(base_y));
        for (x, y) in points {
            let _ = write!(d, "L{},{}", r(*x), r(*y));
        }
        let _ = write!(d, "L{},{}Z", r(points[points.len() - 1].0), r(base_y));
        let _ = write!(
            self.buf,
            "<path class=\"area\" d=\"{}\" fill=\"{}\"/>",
            d,
            esc(fill)
        );
    }

    /// A circle with a tooltip.
    pub fn circle(&mut self, x: f64, y: f64, radius: f64, fill: &str, tip: &str) {
        let _ = write!(
            self.buf,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"><title>{}</title></circle>",
            r(x),
            r(y),
            r(radius),
            esc(fill),
            esc_capped(tip)
        );
    }

    /// A legend row of swatches starting at (x, y); returns the y below it. Wraps at the
    /// plot's width.
    pub fn legend(&mut self, x: f64, y: f64, items: &[(String, String)]) -> f64 {
        let (mut cx, mut cy) = (x, y);
        for (label, fill) in items {
            let w = 22.0 + 6.6 * label.chars().count() as f64;
            if cx + w > WIDTH - 10.0 && cx > x {
                cx = x;
                cy += 18.0;
            }
            self.rect(cx, cy - 10.0, 12.0, 12.0, fill, None);
            self.text(cx + 16.0, cy, "start", "lg", label, None);
            cx += w + 10.0;
        }
        cy + 18.0
    }

    /// The finished `<svg>` element.
    pub fn finish(mut self) -> String {
        self.buf.push_str("</svg>");
        self.buf
    }
}

/// About `n` "nice" tick values covering `[0, max]` (steps of 1, 2, 2.5 or 5 x 10^k).
pub fn nice_ticks(max: f64, n: usize) -> Vec<f64> {
    if !(max > 0.0 && max.is_finite()) {
        return vec![0.0, 1.0];
    }
    let raw = max / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut ticks = Vec::new();
    let mut t = 0.0;
    while t < max + step * 0.999 {
        ticks.push(t);
        t += step;
        if ticks.len() > 50 {
            break;
        }
    }
    ticks
}

/// A duration in a unit that suits it: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn fmt_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A duration axis unit for values up to `max_ns`: (divisor, unit name).
pub fn time_unit(max_ns: f64) -> (f64, &'static str) {
    if max_ns >= 5e9 {
        (1e9, "s")
    } else if max_ns >= 5e6 {
        (1e6, "ms")
    } else if max_ns >= 5e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    }
}

/// A tick label: up to 3 significant decimals, no trailing zeros.
pub fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// Bytes in binary units: `512 B`, `1.5 KiB`, `3.25 GiB`.
pub fn fmt_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

/// A number with an SI prefix: `1.2 T`, `450 G`, `3.1 k`.
pub fn fmt_si(v: f64) -> String {
    let a = v.abs();
    let (d, p) = if a >= 1e15 {
        (1e15, "P")
    } else if a >= 1e12 {
        (1e12, "T")
    } else if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{}{p}", fmt_tick(v / d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_range() {
        assert_eq!(nice_ticks(10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = nice_ticks(733.0, 5);
        assert!(*t.last().unwrap_or(&0.0) >= 733.0);
        assert_eq!(fmt_tick(2.50), "2.5");
        assert_eq!(fmt_ns(1_500_000.0), "1.500 ms");
        assert_eq!(fmt_bytes(1536.0), "1.50 KiB");
        assert_eq!(fmt_si(3.2e12), "3.2T");
    }

    #[test]
    fn svg_text_is_escaped() {
        let mut s = Svg::new(10.0, "<a>");
        s.text(0.0, 0.0, "start", "c", "<script>x</script>", Some("\"q\""));
        let out = s.finish();
        assert!(out.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(out.contains("&quot;q&quot;"));
        assert!(!out.contains("<script"));
    }
}
