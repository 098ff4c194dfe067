//! The plain-text log line: how its message and fields are written, and how a line splits
//! back into words, so that what a platform sent can neither forge a line nor pass for a
//! field.
//!
//! The values of a line's fields are often a platform's own words (an error description, a
//! close reason), and the plain text is what a foreground run, a container and launchd's log
//! files keep. Written raw, a newline in one forges a whole line ("gateway ready"), ESC and OSC
//! drive the terminal of whoever reads the log, and a value holding ` adapter=qq ` fools a
//! filter that looks for that word. So every character a terminal acts on is shown as an
//! escape ([`visible`]), and a value that would not read as one word is written in double
//! quotes, with `"` and `\` inside escaped: a line is then its words, and a word is either
//! bare or one quoted string. [`words`] reads a line back by that rule; `logs --adapter`
//! (cli/logs/files.rs) uses it.
//!
//! This is a field-level formatter rather than a filter on the bytes written: a writer sees
//! only bytes, and cannot tell the newline that ends a record from one a platform sent.
//! The journal output keeps the exact values, each in a field of its own (logging.rs).

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::FormatFields;

use crate::safe_text::visible;

/// The fields of a plain-text line: the message first, as it reads, then `name=value` for
/// each field, each value one word ([`value`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PlainFields;

impl<'writer> FormatFields<'writer> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut line = Line {
            writer,
            result: Ok(()),
            empty: true,
        };
        fields.record(&mut line);
        line.result
    }
}

/// One line's fields being written.
struct Line<'writer> {
    writer: Writer<'writer>,
    result: fmt::Result,
    empty: bool,
}

impl Line<'_> {
    fn write(&mut self, field: &Field, text: &str) {
        // Any secret the process holds, whatever way it came into a field: the last line of
        // defence after the platform text's own scrubbing (crate::redact).
        let text = crate::redact::scrub(text);
        let text = text.as_ref();
        let name = field.name();
        // What the `log` crate's records carry about their origin, not fields of the line.
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let sep = if self.empty { "" } else { " " };
        self.empty = false;
        self.result = if name == "message" {
            write!(self.writer, "{sep}{}", message(text))
        } else {
            let name = name.strip_prefix("r#").unwrap_or(name);
            write!(self.writer, "{sep}{name}={}", value(text))
        };
    }
}

impl Visit for Line<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.write(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.write(field, &text);
    }
}

/// A field's value as one word of the line: as it is when it already reads as one word (no
/// space outside a quoted string, every quote closed, as Rust's `{:?}` of a string writes
/// it), else in double quotes with `"` and `\` escaped. Either way, characters a terminal acts
/// on are shown as escapes.
pub(crate) fn value(text: &str) -> Cow<'_, str> {
    if is_one_word(text) {
        visible(text)
    } else {
        Cow::Owned(quoted(text))
    }
}

/// The message as it reads, escaped; quoted as a value is when it holds a quote or a word
/// with `=` in it, so that it can never pass for a field or swallow the fields after it.
pub(crate) fn message(text: &str) -> Cow<'_, str> {
    let field_like = text
        .split_whitespace()
        .any(|word| word.len() > 1 && word.contains('='));
    if text.contains('"') || field_like {
        Cow::Owned(quoted(text))
    } else {
        visible(text)
    }
}

fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push_str(&visible(c.encode_utf8(&mut [0; 4]))),
        }
    }
    out.push('"');
    out
}

/// Whether `text` reads as one word by the rule of [`words`]: not empty, no whitespace
/// outside a quoted string, and every quoted string closed.
fn is_one_word(text: &str) -> bool {
    let mut quoted = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            // Inside quotes `\` escapes the next character, taken (and skipped) by the guard;
            // one at the very end leaves its quote open.
            '\\' if quoted && chars.next().is_none() => return false,
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return false,
            // `{:?}` never writes a raw control inside a string: quote the whole value.
            c if c.is_control() && quoted => return false,
            _ => {}
        }
    }
    !text.is_empty() && !quoted
}

/// The words of a plain-text line: split at ASCII whitespace outside double quotes, a `\`
/// inside quotes escaping the byte after it. Bytes, because a log file may hold anything.
pub(crate) fn words(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = line;
    std::iter::from_fn(move || {
        let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
        rest = &rest[start..];
        let (mut quoted, mut escaped) = (false, false);
        let end = rest
            .iter()
            .position(|&b| {
                if escaped {
                    escaped = false;
                } else if quoted && b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    quoted = !quoted;
                } else if !quoted && b.is_ascii_whitespace() {
                    return true;
                }
                false
            })
            .unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        rest = after;
        Some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// Lines as the gateway's plain-text layer writes them, collected.
    fn logged(f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let out = sink.clone();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(PlainFields)
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .without_time()
            .with_target(false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, f);
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    const EVIL: &str =
        "no\x1b[2J\x1b]0;x\x07\rcut\n2026-12-01T09:00:00.000001Z  INFO gateway ready adapter=qq";

    #[test]
    fn a_platforms_text_stays_inside_its_field_on_its_own_line() {
        let text = logged(|| {
            tracing::warn!(adapter = "tg", reason = %EVIL, "poll failed; retrying after backoff");
            tracing::warn!(adapter = %"tg", error = ?EVIL, "setup failed");
            tracing::info!("{EVIL}");
        });
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            " WARN poll failed; retrying after backoff adapter=tg reason=\"no\\x1b[2J\\x1b]0;x\\x07\\rcut\\n2026-12-01T09:00:00.000001Z  INFO gateway ready adapter=qq\""
        );
        for line in &lines {
            let forged = words(line.as_bytes())
                .filter(|w| *w == b"adapter=qq")
                .count();
            assert_eq!(forged, 0, "{line}");
        }
        let real: Vec<&[u8]> = words(lines[1].as_bytes())
            .filter(|w| w.starts_with(b"adapter="))
            .collect();
        assert_eq!(real, [b"adapter=tg"], "{}", lines[1]);
    }

    #[test]
    fn ordinary_values_read_as_they_always_have() {
        let text = logged(|| {
            tracing::info!(adapter = %"dc", code = 4000, action = ?Some(1), name = "a\"b", platform_id = ?Some("1 2"), "connection closed");
            tracing::info!(
                meaning = "unknown error",
                empty = "",
                "deleted the webhook (delete-webhook = true)"
            );
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            " INFO connection closed adapter=dc code=4000 action=Some(1) name=\"a\\\"b\" platform_id=Some(\"1 2\")"
        );
        assert_eq!(
            lines[1],
            " INFO deleted the webhook (delete-webhook = true) meaning=\"unknown error\" empty=\"\""
        );
    }

    #[test]
    fn words_split_outside_quotes_only() {
        let all: Vec<&[u8]> =
            words(br#" a=1  b="x y \" adapter=qq" c=Some("p q") d="\\" e="open"#).collect();
        assert_eq!(
            all,
            [
                &b"a=1"[..],
                br#"b="x y \" adapter=qq""#,
                br#"c=Some("p q")"#,
                br#"d="\\""#,
                br#"e="open"#
            ]
        );
        assert_eq!(words(b"").count(), 0);
        assert_eq!(words(b"  \n").count(), 0);
    }

    #[test]
    fn a_message_that_looks_like_fields_is_quoted() {
        assert_eq!(message("gateway ready"), "gateway ready");
        assert_eq!(message("x adapter=qq"), "\"x adapter=qq\"");
        assert_eq!(message("say \"hi"), "\"say \\\"hi\"");
        assert_eq!(value("a\"b c"), "\"a\\\"b c\"");
        assert_eq!(value("\"ok\""), "\"ok\"");
        assert_eq!(
            value("\"a\" adapter=qq \"b\""),
            "\"\\\"a\\\" adapter=qq \\\"b\\\"\""
        );
        assert_eq!(value("\x1b[2J"), "\\x1b[2J");
        assert_eq!(value("\u{202e}x y"), "\"\\u{202e}x y\"");
    }
}
