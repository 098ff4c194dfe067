//! Hermes's `.env`, read with python-dotenv's rules (hermes-agent 0.19.0 loads it with
//! `load_dotenv`, python-dotenv 1.x `parser.py`): `export `, single and double quotes, escapes
//! in quotes, values across lines, `#` comments, and `${VAR}` interpolation.
//!
//! Adopt splits the file: the adopted platforms' credentials go to the gateway's `.env`, every
//! other line to Hermes's new home. So each binding keeps the exact text it was read from, and
//! the two halves together hold every byte of the file; a line that moves to the gateway must
//! read the same through `crate::env_file` (and systemd's `EnvironmentFile=`), which take far
//! less than dotenv: what cannot be written back as a plain `KEY=value` is refused, by name.

use std::ops::Range;

use crate::config::Secret;

/// One binding of the file, as python-dotenv's `parse_binding` cuts it: the whitespace and
/// blank lines before it (`lead`), then its own text up to and including its line end.
#[derive(Clone)]
pub struct Binding {
    /// Blank lines before the binding, up to its own line.
    pub lead: Range<usize>,
    /// The binding's text: its line (lines, for a quoted value that spans some) with its end.
    pub body: Range<usize>,
    /// `None` for a comment, trailing whitespace, or a line dotenv cannot read.
    pub key: Option<String>,
    /// The value as dotenv gives it (quotes and escapes undone), `None` for `KEY` alone.
    value: Option<Secret>,
    /// The 1-based line the binding starts on.
    pub line: usize,
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("key", &self.key)
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

/// A `.env` file's text and its bindings, in order; together they cover the whole text. Its
/// `Debug` shows the keys only.
#[derive(Clone)]
pub struct EnvFile {
    text: String,
    pub bindings: Vec<Binding>,
}

/// Why a value cannot leave Hermes's `.env` as it is. Never holds the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unwritable {
    #[error(".env line {line}: {key} uses ${{...}} interpolation, which the gateway's .env does not do; write the value out")]
    Interpolated { key: String, line: usize },
    #[error(".env line {line}: {key}'s value spans several lines or holds a control character; the gateway's .env takes one plain line")]
    NotOneLine { key: String, line: usize },
    #[error(".env line {line}: {key}'s value has a backslash, a leading quote or spaces at its ends, which the gateway's .env and systemd read differently; write it as {key}=VALUE with a plain value")]
    NotPlain { key: String, line: usize },
}

impl std::fmt::Debug for EnvFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvFile")
            .field("bindings", &self.bindings)
            .finish_non_exhaustive()
    }
}

impl EnvFile {
    pub fn parse(text: &str) -> EnvFile {
        let mut bindings = vec![];
        let mut at = 0;
        let mut line = 1;
        while at < text.len() {
            let b = parse_binding(text, at, line);
            line += newlines(&text[at..b.body.end]);
            at = b.body.end;
            bindings.push(b);
        }
        EnvFile {
            text: text.to_owned(),
            bindings,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The binding that sets `key`: the last one, as dotenv lets a later line win.
    pub fn binding(&self, key: &str) -> Option<&Binding> {
        self.bindings
            .iter()
            .rev()
            .find(|b| b.key.as_deref() == Some(key))
    }

    /// Whether the file names `key` at all.
    pub fn has(&self, key: &str) -> bool {
        self.binding(key).is_some()
    }

    /// `key`'s value as Hermes sees it, when it needs no interpolation. An empty value is
    /// `Some("")`.
    pub fn value(&self, key: &str) -> Result<Option<&str>, Unwritable> {
        let Some(b) = self.binding(key) else {
            return Ok(None);
        };
        let value = b.value.as_ref().map_or("", Secret::expose);
        if value.contains("${") {
            return Err(Unwritable::Interpolated {
                key: key.to_owned(),
                line: b.line,
            });
        }
        Ok(Some(value))
    }

    /// The file cut in two by `place`: the bindings it sends to the gateway, each as a plain
    /// `KEY=value` line (the original bytes when they already are one), and every byte of the
    /// bindings it keeps for Hermes, in order; `Place::Drop` bindings go to neither. The blank
    /// lines before a binding always stay with Hermes. Of a key set twice the gateway gets the
    /// binding that wins. A binding for the gateway whose value cannot be written plainly is
    /// refused.
    pub fn split(&self, place: impl Fn(&str) -> Place) -> Result<(String, String), Unwritable> {
        let mut gateway = String::new();
        let mut rest = String::new();
        for b in &self.bindings {
            let key = b.key.as_deref();
            match key.map_or(Place::Hermes, &place) {
                Place::Hermes => rest.push_str(&self.text[b.lead.start..b.body.end]),
                Place::Drop => rest.push_str(&self.text[b.lead.clone()]),
                Place::Gateway => {
                    rest.push_str(&self.text[b.lead.clone()]);
                    // Only the binding dotenv lets win: the gateway's reader keeps the first
                    // of a key, systemd the last.
                    let key = key.unwrap_or_default();
                    if self.binding(key).is_some_and(|last| last.body == b.body) {
                        gateway.push_str(&self.plain_line(b, key)?);
                    }
                }
            }
        }
        Ok((gateway, rest))
    }

    /// `b` as a line the gateway's `.env` reads as dotenv did: its own bytes when they are
    /// already `KEY=value`.
    fn plain_line(&self, b: &Binding, key: &str) -> Result<String, Unwritable> {
        let value = b.value.as_ref().map_or("", Secret::expose);
        let plain = plain_at(key, value, b.line)?;
        let body = &self.text[b.body.clone()];
        if body.trim_end_matches(['\n', '\r']) != plain.trim_end() {
            return Ok(plain);
        }
        let mut kept = body.to_owned();
        if !kept.ends_with(['\n', '\r']) {
            kept.push('\n');
        }
        Ok(kept)
    }
}

/// Where a binding goes when the file is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The gateway's `.env`: a credential the gateway now holds.
    Gateway,
    /// Neither: a setting of an adopted platform, carried into `gateway.toml` or said.
    Drop,
    /// Hermes's `.env`, byte for byte.
    Hermes,
}

/// `KEY=value\n` for a value that reads back the same through the gateway's `.env` reader,
/// systemd's `EnvironmentFile=` and dotenv, or why there is none.
pub fn plain(key: &str, value: &str) -> Result<String, Unwritable> {
    plain_at(key, value, 0)
}

fn plain_at(key: &str, value: &str, line: usize) -> Result<String, Unwritable> {
    let key = key.to_owned();
    if value.contains("${") {
        return Err(Unwritable::Interpolated { key, line });
    }
    if value.chars().any(char::is_control) {
        return Err(Unwritable::NotOneLine { key, line });
    }
    let odd = value.contains('\\')
        || value.starts_with(['"', '\''])
        || value.trim() != value
        || value.contains(" #")
        || value.contains("\t#");
    if odd || !crate::env_file::is_name(&key) {
        return Err(Unwritable::NotPlain { key, line });
    }
    Ok(format!("{key}={value}\n"))
}

fn newlines(s: &str) -> usize {
    // `\r\n` is one line end, as dotenv's `_newline` counts it.
    let b = s.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] == b'\n' || (b[i] == b'\r' && b.get(i + 1) != Some(&b'\n')))
        .count()
}

/// Whitespace that is not a line end (`[^\S\r\n]`).
fn blank(c: char) -> bool {
    c.is_whitespace() && c != '\r' && c != '\n'
}

fn skip(text: &str, at: usize, f: impl Fn(char) -> bool) -> usize {
    text[at..]
        .char_indices()
        .find(|(_, c)| !f(*c))
        .map_or(text.len(), |(i, _)| at + i)
}

/// python-dotenv's `parse_binding` from byte `at` (the line numbered `line`).
fn parse_binding(text: &str, at: usize, line: usize) -> Binding {
    let start = skip(text, at, char::is_whitespace);
    // The lead ends at its last line end, so the binding's indentation moves with it.
    let lead_end = text[at..start]
        .rfind(['\n', '\r'])
        .map_or(at, |i| at + i + 1);
    let line = line + newlines(&text[at..lead_end]);
    let mut b = Binding {
        lead: at..lead_end,
        body: lead_end..text.len(),
        key: None,
        value: None,
        line,
    };
    if start == text.len() {
        return b;
    }
    match parse_rest(text, start) {
        Ok((end, key, value)) => {
            b.body.end = end;
            b.key = key;
            b.value = value.map(Secret::new);
        }
        Err(failed_at) => {
            // `_rest_of_line` from where the parse stopped.
            let eol = text[failed_at..]
                .find(['\n', '\r'])
                .map_or(text.len(), |i| failed_at + i);
            // `(?:\r|\n|\r\n)?`: a `\r\n` gives only its `\r`, as dotenv's regex does.
            b.body.end = (eol + 1).min(text.len());
        }
    }
    b
}

type Parsed = (usize, Option<String>, Option<String>);

/// The binding from its first non-blank byte: its end, key and value; or where it failed.
fn parse_rest(text: &str, mut at: usize) -> Result<Parsed, usize> {
    if let Some(rest) = text[at..].strip_prefix("export") {
        let after = text.len() - rest.len();
        let ws = skip(text, after, blank);
        if ws > after {
            at = ws;
        }
    }
    let key = if text[at..].starts_with('#') {
        None
    } else if let Some(rest) = text[at..].strip_prefix('\'') {
        let close = rest.find('\'').filter(|i| *i > 0).ok_or(at)?;
        let key = rest[..close].to_owned();
        at += 1 + close + 1;
        Some(key)
    } else {
        let end = skip(text, at, |c| c != '=' && c != '#' && !c.is_whitespace());
        if end == at {
            return Err(at);
        }
        let key = text[at..end].to_owned();
        at = end;
        Some(key)
    };
    at = skip(text, at, blank);
    let mut value = None;
    if key.is_some() && text[at..].starts_with('=') {
        at = skip(text, at + 1, blank);
        let (end, v) = parse_value(text, at)?;
        at = end;
        value = Some(v);
    }
    // `_comment`, then `_end_of_line`.
    let ws = skip(text, at, blank);
    if text[ws..].starts_with('#') {
        at = text[ws..].find(['\n', '\r']).map_or(text.len(), |i| ws + i);
    }
    at = skip(text, at, blank);
    let rest = &text[at..];
    let end = if rest.is_empty() {
        at
    } else if rest.starts_with("\r\n") {
        at + 2
    } else if rest.starts_with(['\n', '\r']) {
        at + 1
    } else {
        return Err(at);
    };
    Ok((end, key, value))
}

/// A value from `at`: quoted (escapes undone), or the rest of the line less a ` #` comment.
fn parse_value(text: &str, at: usize) -> Result<(usize, String), usize> {
    let rest = &text[at..];
    let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
        let eol = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let mut part = &rest[..eol];
        // `\s+#.*` removed.
        if let Some(i) = part
            .char_indices()
            .find(|(i, c)| c.is_whitespace() && part[*i..].trim_start().starts_with('#'))
            .map(|(i, _)| i)
        {
            part = &part[..i];
        }
        return Ok((at + eol, part.trim_end().to_owned()));
    };
    // `'((?:\\'|[^'])*)'` (and the same with `"`): the first quote not escaped closes; with
    // none, the regex backtracks to the last escaped one, whose backslash then stands alone.
    let body = &rest[1..];
    let bytes = body.as_bytes();
    let q = quote as u8;
    let (mut i, mut last_pair, mut close) = (0, None, None);
    while i < bytes.len() {
        if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&q) {
            last_pair = Some(i);
            i += 2;
        } else if bytes[i] == q {
            close = Some(i);
            break;
        } else {
            i += 1;
        }
    }
    let Some(close) = close.or(last_pair.map(|p| p + 1)) else {
        return Err(at);
    };
    Ok((at + 1 + close + 1, unescape(&body[..close], quote)))
}

/// dotenv's `decode_escapes`: `\\`, `\'` in single quotes; those, `\"` and `\a\b\f\n\r\t\v`
/// in double quotes; any other backslash is itself.
fn unescape(raw: &str, quote: char) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        let decoded = match (c, quote, chars.peek()) {
            ('\\', _, Some('\\')) => Some('\\'),
            ('\\', _, Some('\'')) => Some('\''),
            ('\\', '"', Some('"')) => Some('"'),
            ('\\', '"', Some('a')) => Some('\x07'),
            ('\\', '"', Some('b')) => Some('\x08'),
            ('\\', '"', Some('f')) => Some('\x0c'),
            ('\\', '"', Some('n')) => Some('\n'),
            ('\\', '"', Some('r')) => Some('\r'),
            ('\\', '"', Some('t')) => Some('\t'),
            ('\\', '"', Some('v')) => Some('\x0b'),
            _ => None,
        };
        match decoded {
            Some(d) => {
                out.push(d);
                chars.next();
            }
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<(Option<String>, Option<String>)> {
        EnvFile::parse(text)
            .bindings
            .into_iter()
            .map(|b| (b.key, b.value.map(|v| v.expose().to_owned())))
            .collect()
    }

    fn kv(k: &str, v: &str) -> (Option<String>, Option<String>) {
        (Some(k.into()), Some(v.into()))
    }

    #[test]
    fn dotenvs_forms_are_read_as_python_dotenv_reads_them() {
        let text = "# c\nA=1\nexport B = two  # note\nC='x \\' y'\nD=\"a\\tb\\\"c\"\nE=\"multi\nline\"\n\nF\nG=\n'H'=h\n";
        assert_eq!(
            values(text),
            vec![
                (None, None),
                kv("A", "1"),
                kv("B", "two"),
                kv("C", "x ' y"),
                kv("D", "a\tb\"c"),
                kv("E", "multi\nline"),
                (Some("F".into()), None),
                kv("G", ""),
                kv("H", "h"),
            ]
        );
        let f = EnvFile::parse(text);
        assert_eq!(f.binding("E").unwrap().line, 6);
        assert_eq!(f.binding("F").unwrap().line, 9);
        // A line dotenv cannot read is kept, keyless.
        assert_eq!(values("A=\"open\nB=1\n"), vec![(None, None), kv("B", "1")]);
        assert_eq!(values("=x\nA=1"), vec![(None, None), kv("A", "1")]);
        // No closing quote but an escaped one: dotenv's regex backtracks to it.
        assert_eq!(values("K=\"a\\\"\n"), vec![kv("K", "a\\")]);
    }

    #[test]
    fn a_split_keeps_every_byte_and_moves_plain_lines() {
        let text = "OPENAI_API_KEY=sk\n\n  # telegram\nTELEGRAM_BOT_TOKEN=123:abc\r\nexport DISCORD_BOT_TOKEN=\"dc\"  # bot\nX='keep \\' me'\n  TRAIL=1";
        let f = EnvFile::parse(text);
        let (gw, rest) = f
            .split(|k| match k {
                "TELEGRAM_BOT_TOKEN" | "DISCORD_BOT_TOKEN" => Place::Gateway,
                "X" => Place::Drop,
                _ => Place::Hermes,
            })
            .unwrap();
        assert_eq!(gw, "TELEGRAM_BOT_TOKEN=123:abc\r\nDISCORD_BOT_TOKEN=dc\n");
        assert_eq!(rest, "OPENAI_API_KEY=sk\n\n  # telegram\n  TRAIL=1");
        let (none, all) = f.split(|_| Place::Hermes).unwrap();
        assert!(none.is_empty());
        assert_eq!(all, text, "nothing moved: every byte kept");
    }

    #[test]
    fn what_the_gateways_env_would_read_otherwise_is_refused_by_name() {
        for (text, want) in [
            ("T=${OTHER}\n", "interpolation"),
            ("T=\"a\nb\"\n", "several lines"),
            ("T=\"a\\\\b\"\n", "backslash"),
            ("T=\" a\"\n", "backslash"),
            ("T='\"x'\n", "backslash"),
        ] {
            let err = EnvFile::parse(text).split(|_| Place::Gateway).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains(want) && msg.contains("line 1: T"),
                "{text:?}: {msg}"
            );
        }
        assert!(EnvFile::parse("T=${X}\n").value("T").is_err());
        assert_eq!(EnvFile::parse("T=$X\n").value("T"), Ok(Some("$X")));
    }

    #[test]
    fn the_last_binding_of_a_key_wins_and_debug_shows_no_value() {
        let f = EnvFile::parse("T=first\nT=second\n");
        assert_eq!(f.value("T"), Ok(Some("second")));
        let (gw, rest) = f.split(|_| Place::Gateway).unwrap();
        assert_eq!((gw.as_str(), rest.as_str()), ("T=second\n", ""));
        assert!(!format!("{f:?}").contains("second"));
    }
}
