//! Colour on a terminal: whether to use it, and how a word is painted. Only words this
//! program chose are painted; text read from elsewhere goes through `safe_text::visible`
//! first, so it can never carry an escape of its own.

/// Whether text on stdout should be coloured: stdout is a terminal and `NO_COLOR`
/// (no-color.org) is unset or empty.
pub(crate) fn colour_stdout() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// SGR codes this program paints with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Paint {
    Bold,
    BoldRed,
    Red,
    Green,
    Yellow,
    Cyan,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Paint::Bold => "1",
            Paint::BoldRed => "1;31",
            Paint::Red => "31",
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Cyan => "36",
        }
    }
}

/// `text` in `paint` when `on`, else as it is.
pub(crate) fn paint(text: &str, paint: Paint, on: bool) -> String {
    if on {
        format!("\x1b[{}m{text}\x1b[0m", paint.code())
    } else {
        text.to_owned()
    }
}
