//! What a terminal allows a text rendering: its width and whether to colour. Decided by the
//! front end (the command line looks at its streams and `NO_COLOR`/`TERM`/`COLUMNS`); a
//! rendering that fits or paints its text reads it here ([`Terminal::paint`]) and never looks
//! at the process's streams itself.

/// Colours used in tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Bold,
    Dim,
    /// Worse (slower, added cost).
    Red,
    /// Better (faster).
    Green,
    Cyan,
}

/// What the terminal allows for one output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal {
    pub color: bool,
    /// Columns a line may take.
    pub width: usize,
}

/// The width of text written to no terminal (a file, a pipe, Python).
pub const DEFAULT_WIDTH: usize = 120;

impl Default for Terminal {
    fn default() -> Self {
        Terminal::plain(DEFAULT_WIDTH)
    }
}

impl Terminal {
    /// Plain text of a fixed width (files, tests).
    pub fn plain(width: usize) -> Terminal {
        Terminal {
            color: false,
            width,
        }
    }

    /// `text` in `style` when colour is on (ANSI escapes), else `text` as it is.
    pub fn paint(&self, text: &str, style: Style) -> String {
        if !self.color {
            return text.to_owned();
        }
        let code = match style {
            Style::Bold => "1",
            Style::Dim => "2",
            Style::Red => "31",
            Style::Green => "32",
            Style::Cyan => "36",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_terminals_do_not_paint() {
        assert_eq!(Terminal::plain(80).paint("x", Style::Red), "x");
        let colour = Terminal {
            color: true,
            width: 80,
        };
        assert_eq!(colour.paint("x", Style::Red), "\x1b[31mx\x1b[0m");
    }
}
