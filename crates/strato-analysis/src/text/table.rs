//! Plain text tables and CSV for every front end that writes an analysis as text: one
//! implementation of column alignment, CSV quoting and name shortening, so every command's
//! tables look and parse alike. (`strato diff` keeps its own table: it shrinks name columns to
//! the terminal and paints rows.)
//!
//! CSV is every CSV the command writes, so formula neutralisation lives here: a text cell
//! starting with `=`, `+`, `-`, `@`, tab or carriage return (OWASP's "CSV injection" list) is
//! written as `'` + the cell, quoted, so a spreadsheet shows it as text instead of running it
//! as a formula. Cells that are numbers (`-1.5`, `+3`, `1e-9`) stay as they are. `--csv-raw`
//! turns this off ([`TableFormat::Csv`] `raw`).

use std::io::{self, Write};

/// How a command writes its tables: aligned text, or CSV (with `raw`, `--csv-raw`: cells
/// written as they are, formulas included; see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Text,
    Csv { raw: bool },
}

impl TableFormat {
    pub fn is_csv(self) -> bool {
        matches!(self, TableFormat::Csv { .. })
    }
}

/// Rows of cells under a header. Columns are right-aligned unless marked left; printed with two
/// spaces between columns and no trailing spaces, or as CSV.
#[derive(Debug)]
pub struct Table {
    headers: Vec<String>,
    left: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns named `headers`; names starting with `<` are left-aligned (the `<` is dropped).
    pub fn new(headers: &[&str]) -> Self {
        Table {
            left: headers.iter().map(|h| h.starts_with('<')).collect(),
            headers: headers
                .iter()
                .map(|h| h.trim_start_matches('<').to_owned())
                .collect(),
            rows: Vec::new(),
        }
    }

    /// Columns named `headers`; the columns at the indices in `left` are left-aligned.
    pub fn with_left(headers: &[&str], left: &[usize]) -> Self {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            left: (0..headers.len()).map(|i| left.contains(&i)).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Aligned text, each line starting with `indent`.
    pub fn print(&self, out: &mut dyn Write, indent: &str) -> io::Result<()> {
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (k, c) in r.iter().enumerate() {
                if k < width.len() {
                    width[k] = width[k].max(c.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
            let parts: Vec<String> = cells
                .enumerate()
                .map(|(k, c)| {
                    let w = width.get(k).copied().unwrap_or(0);
                    if self.left.get(k).copied().unwrap_or(false) {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            format!("{indent}{}", parts.join("  "))
                .trim_end()
                .to_owned()
        };
        writeln!(
            out,
            "{}",
            line(&mut self.headers.iter().map(String::as_str))
        )?;
        for r in &self.rows {
            writeln!(out, "{}", line(&mut r.iter().map(String::as_str)))?;
        }
        Ok(())
    }

    /// CSV: a header line, then one line per row; cells with commas, quotes or newlines quoted.
    /// Text cells that a spreadsheet would run as a formula are neutralised unless
    /// `raw` (`--csv-raw`, see the module docs).
    pub fn csv(&self, out: &mut dyn Write, raw: bool) -> io::Result<()> {
        let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
            cells
                .map(|c| csv_cell(c, raw))
                .collect::<Vec<_>>()
                .join(",")
        };
        writeln!(
            out,
            "{}",
            line(&mut self.headers.iter().map(String::as_str))
        )?;
        for r in &self.rows {
            writeln!(out, "{}", line(&mut r.iter().map(String::as_str)))?;
        }
        Ok(())
    }

    /// In `format`: CSV, or aligned text with no indent.
    pub fn write(&self, out: &mut dyn Write, format: TableFormat) -> io::Result<()> {
        match format {
            TableFormat::Csv { raw } => self.csv(out, raw),
            TableFormat::Text => self.print(out, ""),
        }
    }
}

/// The CSV text cell to write instead of `c` when it would run as a formula (`'` + the cell),
/// `None` to write it as it is; always `None` when `raw` (`--csv-raw`). For CSV written by
/// another writer (`strato sql`), which does its own quoting.
pub fn neutralised_csv_text(c: &str, raw: bool) -> Option<String> {
    (!raw && is_formula_like(c)).then(|| format!("'{c}"))
}

/// One CSV cell: quoted when it holds a comma, quote or line break; a text cell starting with a
/// formula character gets a leading `'` (and quotes) unless `raw`.
fn csv_cell(c: &str, raw: bool) -> String {
    if !raw && is_formula_like(c) {
        return format!("\"'{}\"", c.replace('"', "\"\""));
    }
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_owned()
    }
}

/// True for a cell a spreadsheet would evaluate: starts with `=`, `+`, `-`, `@`, tab or CR
/// and is not a plain number.
fn is_formula_like(c: &str) -> bool {
    c.starts_with(['=', '+', '-', '@', '\t', '\r'])
        && !(c.trim().parse::<f64>().is_ok_and(f64::is_finite) && c.trim() == c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::units::fit_ascii as shorten;

    #[test]
    fn aligns_quotes_and_shortens() {
        let mut t = Table::new(&["<name", "ms"]);
        t.row(vec!["gemm".into(), "1.5".into()]);
        t.row(vec!["a,\"b\"".into(), "10.25".into()]);
        let mut text = Vec::new();
        t.print(&mut text, "  ").unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "  name      ms\n  gemm     1.5\n  a,\"b\"  10.25\n"
        );
        let mut csv = Vec::new();
        t.csv(&mut csv, false).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "name,ms\ngemm,1.5\n\"a,\"\"b\"\"\",10.25\n"
        );
        assert_eq!(shorten("abcdefgh", 6), "abc...");
    }

    #[test]
    fn neutralises_formulas_but_not_numbers() {
        for (cell, want) in [
            ("=HYPERLINK(\"x\")", "\"'=HYPERLINK(\"\"x\"\")\""),
            ("+cmd", "\"'+cmd\""),
            ("-2+3", "\"'-2+3\""),
            ("@SUM(A1)", "\"'@SUM(A1)\""),
            ("\tx", "\"'\tx\""),
            ("\rx", "\"'\rx\""),
            ("-", "\"'-\""),
            ("-1.5", "-1.5"),
            ("+3", "+3"),
            ("-2e-9", "-2e-9"),
            ("aten::mm", "aten::mm"),
            ("a=b", "a=b"),
        ] {
            assert_eq!(csv_cell(cell, false), want, "{cell:?}");
        }
        assert_eq!(csv_cell("=1+2", true), "=1+2");
        assert_eq!(csv_cell("-inf", false), "\"'-inf\"");
        assert_eq!(shorten("abc", 6), "abc");
    }
}
