//! Text from outside (a platform, a state file, a config, another process's command line)
//! made safe to print on a terminal.
//!
//! A terminal acts on some characters instead of showing them: ESC starts sequences that clear
//! the screen, set the window title or rewrite what was printed before, CR and BS move the
//! cursor back over a line, and the bidirectional overrides make text read in another order
//! than it is stored. A platform that names an event `ESC[2J` must not be able to clear the
//! screen of whoever runs `hermes-svc events`, nor forge a line of `status` with a CR.
//!
//! [`visible`] renders each such character as a visible escape instead. It is for text output
//! only: JSON output stays exact (serde_json already writes every C0 control as `\uXXXX`), so
//! scripts get the real bytes and people get something they can read safely.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether a terminal could act on `c` rather than show it: the C0 controls (including tab
/// and newline, which would break the one-record-per-line layout), DEL, the C1 controls
/// (U+0080-U+009F; U+009B is an 8-bit CSI), the line and paragraph separators, and the
/// bidirectional marks, embeddings, overrides and isolates.
fn acts_on_terminal(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `text` with every character a terminal would act on replaced by a visible escape: `\n`,
/// `\r` and `\t` for those three, `\x1b` style for the other C0 controls and DEL, and
/// `\u{202e}` style for the rest. Everything else, backslashes included, is left as it is,
/// so ordinary text (and JSON) reads unchanged; use `--json` where exact bytes matter.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acts_on_terminal(c) && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if acts_on_terminal(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// At most `max` characters of `text` (a platform's error description, say), with `…` where
/// it was cut: enough to say what went wrong, without letting a server fill a log line or a
/// state file. Every secret the process holds is taken out first ([`crate::redact`]): a
/// platform may quote a token back.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let text = crate::redact::scrub(text);
    let text = text.as_ref();
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{clip, visible};

    #[test]
    fn clip_cuts_at_a_character_boundary() {
        assert_eq!(clip("короткий", 20), "короткий");
        assert_eq!(clip("长长长长", 2), "长长…");
    }

    #[test]
    fn ordinary_text_is_unchanged_and_not_copied() {
        for s in [
            "",
            "MESSAGE_CREATE",
            "héllo 世界 🙂",
            r#"{"a":"\u001b"} C:\path"#,
        ] {
            assert!(matches!(visible(s), std::borrow::Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn escape_sequences_cr_and_bidi_overrides_become_visible() {
        assert_eq!(visible("\x1b[2Jx"), "\\x1b[2Jx");
        assert_eq!(visible("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
        assert_eq!(visible("ok\rEVIL"), "ok\\rEVIL");
        assert_eq!(visible("a\nb\tc\0\x08\x7f"), "a\\nb\\tc\\x00\\x08\\x7f");
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(visible("abc\u{202e}fdp.exe"), "abc\\u{202e}fdp.exe");
        assert_eq!(
            visible("\u{2066}\u{2069}\u{200f}\u{61c}\u{2028}"),
            "\\u{2066}\\u{2069}\\u{200f}\\u{61c}\\u{2028}"
        );
    }

    #[test]
    fn no_output_contains_a_character_a_terminal_acts_on() {
        // Every code point from NUL to past the bidi isolates, one at a time and together.
        let all: String = (0u32..0x2100).filter_map(char::from_u32).collect();
        let shown = visible(&all);
        assert!(!shown.chars().any(super::acts_on_terminal), "{shown:?}");
        for c in all.chars() {
            let s = c.to_string();
            assert!(!visible(&s).chars().any(super::acts_on_terminal), "{c:?}");
        }
    }
}
