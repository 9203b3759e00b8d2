//! The HTML writer: one escaping function ([`esc`]) that every piece of text from a trace goes
//! through, in element content and in attribute values alike, and a small builder
//! ([`Html`]) whose only way to insert dynamic text escapes it. Markup itself comes from
//! `&'static str` literals in this crate, never from data.

use std::fmt::Write as _;

/// Escapes `&`, `<`, `>`, `"` and `'` so `text` is inert both as element content and inside a
/// quoted attribute value (HTML and SVG alike).
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters (other than tab/newline) are not allowed in HTML text.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Most characters of one piece of trace text (a name, a tooltip, a cell) the report embeds;
/// longer text is cut and marked with how much was left out ([`capped`]). This keeps the
/// report's size bound whatever the names are (a 200 kB kernel name included).
pub const EMBED_CHARS: usize = 1000;

/// `text` cut to [`EMBED_CHARS`] characters, followed by `… [N more characters]` when cut.
pub fn capped(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(EMBED_CHARS) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            std::borrow::Cow::Owned(format!("{}… [{more} more characters]", &text[..cut]))
        }
    }
}

/// Escapes `text` cut to [`EMBED_CHARS`] ([`capped`]): how every piece of trace text enters
/// the report.
pub fn esc_capped(text: &str) -> String {
    esc(&capped(text))
}

/// Shortens `text` to at most `max` characters, ending with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// The browser tab the report's links into the viewer open in (one tab, reused).
pub const VIEW_TARGET: &str = "strato-view";

/// An HTML document under construction.
#[derive(Debug, Default)]
pub struct Html {
    buf: String,
}

impl Html {
    pub fn new() -> Html {
        Html {
            buf: String::with_capacity(1 << 16),
        }
    }

    /// Markup from this crate (a literal): written as is.
    pub fn markup(&mut self, markup: &'static str) -> &mut Self {
        self.buf.push_str(markup);
        self
    }

    /// Markup built by this crate's SVG writers (which escape their text with [`esc`]).
    pub(crate) fn fragment(&mut self, fragment: &str) -> &mut Self {
        self.buf.push_str(fragment);
        self
    }

    /// Text from data: escaped.
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.buf.push_str(&esc_capped(text));
        self
    }

    /// `<tag>text</tag>` with `tag` a literal.
    pub fn elem(&mut self, tag: &'static str, text: &str) -> &mut Self {
        let _ = write!(self.buf, "<{tag}>{}</{tag}>", esc_capped(text));
        self
    }

    /// `<tag class="class">text</tag>`.
    pub fn elem_class(&mut self, tag: &'static str, class: &'static str, text: &str) -> &mut Self {
        let _ = write!(
            self.buf,
            "<{tag} class=\"{class}\">{}</{tag}>",
            esc_capped(text)
        );
        self
    }

    /// A section heading with an anchor id (`id` from this crate).
    pub fn heading(&mut self, id: &str, title: &str) -> &mut Self {
        let _ = write!(
            self.buf,
            "<h2 id=\"{}\">{}</h2>",
            esc_capped(id),
            esc_capped(title)
        );
        self
    }

    /// A paragraph saying why a section has nothing to show.
    pub fn absent(&mut self, why: &str) -> &mut Self {
        let _ = write!(self.buf, "<p class=\"absent\">{}</p>", esc_capped(why));
        self
    }

    /// A table; cells are escaped. Columns in `numeric` are right-aligned.
    pub fn table(&mut self, header: &[&str], numeric: &[usize], rows: &[Vec<String>]) -> &mut Self {
        self.table_linked(header, numeric, rows, &[])
    }

    /// A link into the viewer (`crate::ViewerLinks`): `text` opening `href` in the viewer's
    /// tab.
    pub fn view_link(&mut self, href: &str, text: &str) -> &mut Self {
        let _ = write!(
            self.buf,
            "<a class=\"view\" href=\"{}\" target=\"{VIEW_TARGET}\">{}</a>",
            esc(href),
            esc_capped(text)
        );
        self
    }

    /// [`Html::table`] with a last column `viewer` of links into the viewer: row `i` links to
    /// `links[i]` (no link past its end or where `None`). With no links at all, exactly
    /// [`Html::table`]'s markup (no column).
    pub fn table_linked(
        &mut self,
        header: &[&str],
        numeric: &[usize],
        rows: &[Vec<String>],
        links: &[Option<String>],
    ) -> &mut Self {
        self.buf.push_str("<div class=\"tw\"><table><thead><tr>");
        for (i, h) in header.iter().enumerate() {
            let class = if numeric.contains(&i) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(self.buf, "<th{class}>{}</th>", esc_capped(h));
        }
        if !links.is_empty() {
            self.buf.push_str("<th>viewer</th>");
        }
        self.buf.push_str("</tr></thead><tbody>");
        for (r, row) in rows.iter().enumerate() {
            self.buf.push_str("<tr>");
            for (i, cell) in row.iter().enumerate() {
                let class = if numeric.contains(&i) {
                    " class=\"n\""
                } else {
                    ""
                };
                let _ = write!(self.buf, "<td{class}>{}</td>", esc_capped(cell));
            }
            if let Some(Some(href)) = links.get(r) {
                self.buf.push_str("<td>");
                self.view_link(href, "view");
                self.buf.push_str("</td>");
            }
            self.buf.push_str("</tr>");
        }
        self.buf.push_str("</tbody></table></div>");
        self
    }

    /// A table folded under `<details>` with a summary line.
    pub fn details_table(
        &mut self,
        summary: &str,
        header: &[&str],
        numeric: &[usize],
        rows: &[Vec<String>],
    ) -> &mut Self {
        self.details_table_linked(summary, header, numeric, rows, &[])
    }

    /// [`Html::details_table`] with [`Html::table_linked`]'s links.
    pub fn details_table_linked(
        &mut self,
        summary: &str,
        header: &[&str],
        numeric: &[usize],
        rows: &[Vec<String>],
        links: &[Option<String>],
    ) -> &mut Self {
        let _ = write!(
            self.buf,
            "<details><summary>{}</summary>",
            esc_capped(summary)
        );
        self.table_linked(header, numeric, rows, links);
        self.buf.push_str("</details>");
        self
    }

    /// The document so far.
    pub fn finish(self) -> String {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_that_could_open_markup() {
        assert_eq!(
            esc("<script>alert(\"x\")</script> & 'y'"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(esc("a\u{0}b"), "a\u{fffd}b");
        let mut h = Html::new();
        h.table(&["<th>"], &[], &[vec!["<td onload=x>".into()]]);
        let s = h.finish();
        assert!(s.contains("&lt;td onload=x&gt;"));
        assert!(!s.contains("<td onload"));
    }

    #[test]
    fn long_text_is_capped_and_counted() {
        let long = "é".repeat(EMBED_CHARS + 5);
        let cut = capped(&long);
        assert!(cut.starts_with(&"é".repeat(EMBED_CHARS)));
        assert!(cut.ends_with("… [5 more characters]"));
        assert_eq!(capped("short"), "short");
    }

    #[test]
    fn shorten_counts_chars() {
        assert_eq!(shorten("αβγδ", 3), "αβ…");
        assert_eq!(shorten("ab", 3), "ab");
    }
}
