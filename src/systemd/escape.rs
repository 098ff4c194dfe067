//! Quoting for values that go into unit files, per systemd.syntax(7) and systemd.service(5).
//!
//! The renderer never interpolates a raw user value: every value passes through one of these
//! functions, so that the manager parses back exactly the original string. Values that cannot be
//! represented (newlines and other control characters, Unicode noncharacters) are rejected
//! rather than mangled.

/// A value that cannot be written into a unit file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EscapeError {
    #[error("{what} contains a control character (newline, tab, ...), which a unit file cannot hold: {value:?}")]
    ControlCharacter { what: &'static str, value: String },
    #[error("invalid environment variable name {0:?}: use letters, digits and '_', not starting with a digit")]
    BadEnvName(String),
    #[error("invalid quoted value {0:?}")]
    BadQuoting(String),
    #[error("{what} contains the Unicode noncharacter {ch:?}, which makes systemd ignore the whole line: {value:?}")]
    Noncharacter {
        what: &'static str,
        ch: char,
        value: String,
    },
    #[error("the executable path {value:?} contains {ch:?}, which systemd does not accept in the path of the program it runs; move or link the program elsewhere")]
    UnsafeExecPath { ch: char, value: String },
}

/// U+FDD0..U+FDEF and the last two code points of every plane: systemd's UTF-8 check
/// (`unichar_is_valid`) refuses them, and a unit file line holding one is ignored.
fn is_noncharacter(c: char) -> bool {
    let u = u32::from(c);
    (0xFDD0..=0xFDEF).contains(&u) || u & 0xFFFE == 0xFFFE
}

fn reject_control(what: &'static str, value: &str) -> Result<(), EscapeError> {
    if value.chars().any(|c| c.is_control()) {
        return Err(EscapeError::ControlCharacter {
            what,
            value: value.to_owned(),
        });
    }
    if let Some(ch) = value.chars().find(|c| is_noncharacter(*c)) {
        return Err(EscapeError::Noncharacter {
            what,
            ch,
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// `%` starts a specifier everywhere in a unit file.
fn escape_specifiers(value: &str) -> String {
    value.replace('%', "%%")
}

/// Whether a word must be quoted to survive word splitting and unescaping as it is.
fn needs_quotes(word: &str) -> bool {
    word.chars()
        .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\'))
}

/// Double-quote with C-style escapes for `\` and `"`.
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '\\' || c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A plain setting value (a path, a description): specifiers escaped, control characters
/// rejected. Such settings take the rest of the line verbatim, so no quoting is needed.
pub(crate) fn value(what: &'static str, raw: &str) -> Result<String, EscapeError> {
    reject_control(what, raw)?;
    Ok(escape_specifiers(raw))
}

/// One word of an `ExecStart=` command line.
///
/// `$` would expand a variable and `%` a specifier; whitespace, quotes and backslashes would
/// split or unescape the word. The result is quoted only when it needs to be, so the common case
/// stays readable.
pub fn exec_word(raw: &str) -> Result<String, EscapeError> {
    reject_control("a command-line argument", raw)?;
    let escaped = escape_specifiers(raw).replace('$', "$$");
    // An empty word or a lone `;` would vanish or end the command line unless quoted.
    let quoted = escaped.is_empty() || escaped == ";" || needs_quotes(&escaped);
    Ok(if quoted { quote(&escaped) } else { escaped })
}

/// One path in a space-separated path list, such as `ReadWritePaths=`.
///
/// Such lists split on whitespace, unquote, C-unescape and expand specifiers, but do not expand
/// `$`. So `%` is doubled, and a path with whitespace, quotes or backslashes is double-quoted;
/// a plain path stays bare, so the common case stays readable.
pub(crate) fn path_word(raw: &str) -> Result<String, EscapeError> {
    reject_control("a path", raw)?;
    let escaped = escape_specifiers(raw);
    Ok(if needs_quotes(&escaped) {
        quote(&escaped)
    } else {
        escaped
    })
}

/// The executable's path: the first word of an `ExecStart=` command line.
///
/// systemd undoes `$$` only in arguments, not in the path, and it ignores a command whose
/// path holds a quote or a backslash (leaving the unit without one), so those are rejected.
pub fn exec_path(raw: &str) -> Result<String, EscapeError> {
    let word = exec_word(raw)?;
    if let Some(ch) = raw.chars().find(|c| matches!(c, '$' | '"' | '\'' | '\\')) {
        return Err(EscapeError::UnsafeExecPath {
            ch,
            value: raw.to_owned(),
        });
    }
    Ok(word)
}

/// A whole `ExecStart=` command line from its argv: the executable's path, then its arguments.
pub fn exec_line<S: AsRef<str>>(argv: &[S]) -> Result<String, EscapeError> {
    let mut words = Vec::with_capacity(argv.len());
    for (i, w) in argv.iter().enumerate() {
        let w = w.as_ref();
        words.push(if i == 0 { exec_path(w)? } else { exec_word(w)? });
    }
    Ok(words.join(" "))
}

/// Check an environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn env_name(name: &str) -> Result<(), EscapeError> {
    if crate::env_file::is_name(name) {
        Ok(())
    } else {
        Err(EscapeError::BadEnvName(name.to_owned()))
    }
}

/// One `Environment=` assignment, always quoted: `"KEY=value"`.
///
/// `Environment=` unquotes, C-unescapes and expands specifiers, but does not expand `$`, so `$`
/// stays as it is.
pub fn env_assignment(name: &str, raw: &str) -> Result<String, EscapeError> {
    env_name(name)?;
    reject_control("an environment value", raw)?;
    Ok(quote(&format!("{name}={}", escape_specifiers(raw))))
}

/// The inverse of [`env_assignment`]: `"KEY=value"` back to `(KEY, value)`.
///
/// Only needs to read what this module writes (our own drop-in), but accepts any well-formed
/// double-quoted word with `\\`, `\"` and `%%`.
pub fn parse_env_assignment(quoted: &str) -> Result<(String, String), EscapeError> {
    let bad = || EscapeError::BadQuoting(quoted.to_owned());
    let inner = quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .ok_or_else(bad)?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or_else(bad)?),
            '%' => {
                if chars.next() != Some('%') {
                    return Err(bad());
                }
                out.push('%');
            }
            '"' => return Err(bad()),
            c => out.push(c),
        }
    }
    let (name, value) = out.split_once('=').ok_or_else(bad)?;
    env_name(name)?;
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_words() {
        assert_eq!(exec_word("/usr/bin/x").unwrap(), "/usr/bin/x");
        assert_eq!(exec_word("a b").unwrap(), "\"a b\"");
        assert_eq!(exec_word("100%").unwrap(), "100%%");
        assert_eq!(exec_word("$HOME").unwrap(), "$$HOME");
        assert_eq!(exec_word(r#"say "hi"\"#).unwrap(), r#""say \"hi\"\\""#);
        assert_eq!(exec_word("").unwrap(), "\"\"");
        assert_eq!(exec_word(";").unwrap(), "\";\"");
        assert!(exec_word("a\nb").is_err());
    }

    #[test]
    fn exec_paths_systemd_would_not_run_are_refused() {
        assert_eq!(
            exec_line(&["/opt/my bot/hermes-svc", "$X"]).unwrap(),
            "\"/opt/my bot/hermes-svc\" $$X"
        );
        // Found by the round-trip property test: systemd 252 drops `ExecStart=` whose path
        // holds any of these, and `$$` stays doubled in a path.
        for path in ["/a/q\"uote", "/a/it's", "/a/back\\slash", "/a/$HOME"] {
            assert!(
                matches!(exec_line(&[path]), Err(EscapeError::UnsafeExecPath { .. })),
                "{path:?}"
            );
        }
    }

    #[test]
    fn noncharacters_are_refused() {
        // Found by the round-trip property test: systemd 252 ignores a unit file line that
        // holds one of these (its UTF-8 check refuses them), so the setting silently vanishes.
        for c in [
            '\u{FDD0}',
            '\u{FDEF}',
            '\u{FFFE}',
            '\u{FFFF}',
            '\u{1FFFE}',
            '\u{10FFFF}',
        ] {
            let v = format!("a{c}b");
            assert!(
                matches!(
                    env_assignment("K", &v),
                    Err(EscapeError::Noncharacter { .. })
                ),
                "{c:?}"
            );
            assert!(exec_word(&v).is_err(), "{c:?}");
            assert!(value("path", &v).is_err(), "{c:?}");
        }
        for c in [
            '\u{FEFF}',
            '\u{FDCF}',
            '\u{FDF0}',
            '\u{FFFD}',
            '\u{2028}',
            '\u{10FFFD}',
        ] {
            let v = format!("a{c}b");
            let line = env_assignment("K", &v).unwrap();
            assert_eq!(parse_env_assignment(&line).unwrap(), ("K".into(), v));
        }
    }

    #[test]
    fn env_round_trip() {
        for v in [
            "plain",
            "50% off",
            "$HOME and ${X}",
            r#"q"uo\te"#,
            "  spaced  ",
            "",
            "é€",
        ] {
            let line = env_assignment("K_1", v).unwrap();
            assert_eq!(
                parse_env_assignment(&line).unwrap(),
                ("K_1".into(), v.into())
            );
        }
    }

    #[test]
    fn env_rejects_bad_input() {
        assert!(env_assignment("1X", "v").is_err());
        assert!(env_assignment("A-B", "v").is_err());
        assert!(env_assignment("", "v").is_err());
        assert!(matches!(
            env_assignment("K", "a\nExecStartPre=/bin/sh"),
            Err(EscapeError::ControlCharacter { .. })
        ));
        assert!(env_assignment("K", "tab\there").is_err());
    }

    #[test]
    fn path_words() {
        assert_eq!(path_word("/home/a/.hermes").unwrap(), "/home/a/.hermes");
        assert_eq!(path_word("/a b/%h$x").unwrap(), "\"/a b/%%h$x\"");
        assert_eq!(path_word(r#"/q"u\o'te"#).unwrap(), r#""/q\"u\\o'te""#);
        assert!(path_word("/a\nReadWritePaths=/").is_err());
    }

    #[test]
    fn plain_values() {
        assert_eq!(value("path", "/a b/%h").unwrap(), "/a b/%%h");
        assert!(value("path", "/a\r").is_err());
    }
}
