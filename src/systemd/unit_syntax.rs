//! systemd.syntax(7), read the way the manager reads it: sections, continuation lines, word
//! splitting with quotes and C escapes, and specifiers.
//!
//! Only what doctor and status need from a unit the manager has not loaded is read here (see
//! `systemd::unit_on_disk`). Where systemd's reading has a rule this module does not model (a
//! specifier it does not know, an escape it would refuse), the answer is [`Unreadable`], never
//! a guess: the caller then asks the manager, which knows.

use std::collections::HashMap;

/// Why a unit's text can't be read here as the manager would read it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unreadable {
    #[error("specifier %{0} is not one this reader expands")]
    Specifier(char),
    #[error("unbalanced quotes or a bad escape in {0:?}")]
    Quoting(String),
    #[error("{0}")]
    Other(String),
}

/// One `Key=value` line, with the section it stands in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub(crate) section: String,
    pub(crate) key: String,
    pub(crate) value: String,
}

/// Every assignment of a unit file or drop-in, in order. Comment lines (`#`, `;`) are skipped,
/// also inside a continuation, and a line that ends in a backslash goes on in the next one
/// with the backslash read as a space, as systemd's `config_parse` joins them.
pub(crate) fn assignments(text: &str) -> Vec<Assignment> {
    let mut out = vec![];
    let mut section = String::new();
    let mut pending: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim_start();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let joined = match pending.take() {
            Some(mut head) => {
                head.push_str(line);
                head
            }
            None if line.trim_end().is_empty() => continue,
            None => line.to_owned(),
        };
        // An odd run of backslashes at the very end continues the line; an even one is
        // escaped backslashes.
        let trailing = joined.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            let mut head = joined;
            head.pop();
            head.push(' ');
            pending = Some(head);
            continue;
        }
        let joined = joined.trim_end();
        if let Some(name) = joined.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        if let Some((key, value)) = joined.split_once('=') {
            out.push(Assignment {
                section: section.clone(),
                key: key.trim().to_owned(),
                value: value.trim().to_owned(),
            });
        }
    }
    if let Some(last) = pending {
        if let Some((key, value)) = last.split_once('=') {
            out.push(Assignment {
                section,
                key: key.trim().to_owned(),
                value: value.trim().to_owned(),
            });
        }
    }
    out
}

/// Split `value` into words as `extract_first_word(.., EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE)`
/// does: whitespace separates, `'` and `"` quote anywhere in a word, and `\` starts a C
/// escape (also inside quotes).
pub(crate) fn words(value: &str) -> Result<Vec<String>, Unreadable> {
    let mut out = vec![];
    let mut chars = value.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        loop {
            let Some(c) = chars.next() else {
                if quote.is_some() {
                    return Err(Unreadable::Quoting(value.to_owned()));
                }
                break;
            };
            match (quote, c) {
                (_, '\\') => word.push(unescape_one(&mut chars, value)?),
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '"' | '\'') => quote = Some(c),
                (None, c) if c.is_ascii_whitespace() => break,
                (None, c) => word.push(c),
            }
        }
        out.push(word);
    }
}

/// One C escape after its backslash, as systemd's `cunescape_one` reads it.
fn unescape_one(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    whole: &str,
) -> Result<char, Unreadable> {
    let bad = || Unreadable::Quoting(whole.to_owned());
    let c = chars.next().ok_or_else(bad)?;
    let hex = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>, n: usize| {
        let digits: String = (0..n).filter_map(|_| chars.next()).collect();
        if digits.len() != n {
            return Err(bad());
        }
        u32::from_str_radix(&digits, 16).map_err(|_| bad())
    };
    let code = match c {
        'a' => 7,
        'b' => 8,
        'f' => 12,
        'n' => 10,
        'r' => 13,
        't' => 9,
        'v' => 11,
        's' => 32,
        '\\' | '"' | '\'' => return Ok(c),
        'x' => hex(chars, 2)?,
        'u' => hex(chars, 4)?,
        'U' => hex(chars, 8)?,
        '0'..='7' => {
            let rest: String = (0..2).filter_map(|_| chars.next()).collect();
            u32::from_str_radix(&format!("{c}{rest}"), 8).map_err(|_| bad())?
        }
        _ => return Err(bad()),
    };
    // NUL is refused by systemd too, and a byte above 0x7f from `\x` or octal is raw 8-bit
    // data, which this reader does not reproduce.
    let raw_byte = c == 'x' || c.is_ascii_digit();
    match char::from_u32(code) {
        Some(ch) if code != 0 && !(raw_byte && code >= 0x80) => Ok(ch),
        _ => Err(bad()),
    }
}

/// What specifiers expand to for one unit of one manager.
#[derive(Debug, Clone, Default)]
pub(crate) struct Specifiers {
    values: HashMap<char, String>,
}

impl Specifiers {
    pub(crate) fn new(values: impl IntoIterator<Item = (char, String)>) -> Self {
        Self {
            values: values.into_iter().collect(),
        }
    }

    /// `word` with every `%x` expanded and `%%` made `%`.
    pub(crate) fn expand(&self, word: &str) -> Result<String, Unreadable> {
        let mut out = String::with_capacity(word.len());
        let mut chars = word.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('%') => out.push('%'),
                Some(s) => out.push_str(self.values.get(&s).ok_or(Unreadable::Specifier(s))?),
                None => return Err(Unreadable::Other(format!("a lone % ends {word:?}"))),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(a: &Assignment) -> (&str, &str, &str) {
        (&a.section, &a.key, &a.value)
    }

    #[test]
    fn sections_comments_and_continuations() {
        let text = "# head\n[Unit]\nDescription = a b \n\n[Service]\nExecStart=/bin/x \\\n  # comment inside\n  --flag\\\n  last\n;x=y\nEnvironment=A=1\nTrailing=c:\\\\\n";
        let got: Vec<_> = assignments(text);
        let got: Vec<_> = got.iter().map(kv).collect();
        assert_eq!(
            got,
            vec![
                ("Unit", "Description", "a b"),
                ("Service", "ExecStart", "/bin/x  --flag last"),
                ("Service", "Environment", "A=1"),
                ("Service", "Trailing", "c:\\\\"),
            ]
        );
    }

    #[test]
    fn words_unquote_and_unescape_like_systemd() {
        assert_eq!(
            words(r#" a "b c"  'd "e' f"g h"i \x41\s\t \"q\" "\\" "#).unwrap(),
            vec!["a", "b c", "d \"e", "fg hi", "A \t", "\"q\"", "\\"]
        );
        assert_eq!(words("").unwrap(), Vec::<String>::new());
        assert_eq!(words(r#""""#).unwrap(), vec![""]);
        assert_eq!(words(r"\u00e9\101").unwrap(), vec!["éA"]);
        assert!(words(r#""open"#).is_err());
        assert!(words(r"bad\q").is_err());
        assert!(words(r"\x00").is_err());
        assert!(words(r"\xff").is_err());
    }

    #[test]
    fn specifiers_expand_or_refuse() {
        let s = Specifiers::new([('h', "/home/a".to_owned()), ('n', "x.service".to_owned())]);
        assert_eq!(
            s.expand("%h/.hermes %n 100%%").unwrap(),
            "/home/a/.hermes x.service 100%"
        );
        assert_eq!(s.expand("%q"), Err(Unreadable::Specifier('q')));
        assert!(s.expand("50%").is_err());
    }
}
