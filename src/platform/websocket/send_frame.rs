//! A websocket adapter's `send-frame`: the JSON frame one outgoing message becomes.
//!
//! The template is parsed once, at load, and a message fills it by walking the parsed value
//! and replacing placeholders inside its strings. A value therefore only ever becomes the
//! content of a JSON string, escaped by the serializer: a text with quotes, backslashes or
//! newlines cannot end the string early or add a key, however it was crafted. The cost is
//! that the frame goes out as compact JSON with its object keys in sorted order (JSON objects
//! are unordered; the template's spacing and key order are not kept).

use serde_json::Value;

/// The placeholders a template may use, as written in it.
const NAMES: [&str; 4] = ["target", "text", "id", "reply_to"];

/// Longest `{word}` read as a placeholder; a longer brace group is just text.
const MAX_WORD: usize = 32;

/// A validated `send-frame` template.
#[derive(Clone, Debug, PartialEq)]
pub struct SendFrame(Value);

/// What fills a frame's placeholders for one message.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a> {
    pub target: &'a str,
    pub text: &'a str,
    /// The outbox's id for the message, the same on every attempt.
    pub id: &'a str,
    /// Empty when the message answers nothing.
    pub reply_to: &'a str,
}

/// Why a template was refused. Each says what to write instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendFrameError {
    #[error(
        "has {{{0}}} outside a JSON string; a placeholder only goes inside quotes, like \"{{{0}}}\""
    )]
    Unquoted(&'static str),
    #[error("is not JSON ({0}); write it like '{{\"type\":\"send\",\"to\":\"{{target}}\",\"text\":\"{{text}}\"}}'")]
    NotJson(String),
    #[error("has {{{0}}} in an object key; placeholders go in string values only")]
    InKey(String),
    #[error(
        "has an unknown placeholder {{{0}}}; use {{target}}, {{text}}, {{id}} or {{reply_to}}"
    )]
    Unknown(String),
    #[error("has no {{text}}; put \"{{text}}\" where the message's text goes")]
    NoText,
}

/// A piece of a JSON string: literal text, or a `{word}` that reads as a placeholder.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Literal(&'a str),
    Word(&'a str),
}

impl SendFrame {
    /// Parse and check `template`: JSON, with known placeholders in string values only, and
    /// `{text}` somewhere.
    pub fn parse(template: &str) -> Result<SendFrame, SendFrameError> {
        if let Some(name) = unquoted(template) {
            return Err(SendFrameError::Unquoted(name));
        }
        let value: Value =
            serde_json::from_str(template).map_err(|e| SendFrameError::NotJson(e.to_string()))?;
        let mut has_text = false;
        check(&value, &mut has_text)?;
        if !has_text {
            return Err(SendFrameError::NoText);
        }
        Ok(SendFrame(value))
    }

    /// The frame for one message, as compact JSON text.
    pub fn render(&self, fields: &Fields<'_>) -> String {
        let mut value = self.0.clone();
        fill(&mut value, fields);
        value.to_string()
    }
}

/// The first known placeholder written outside any JSON string, which no JSON parser would
/// name as such: found here so the error can say what to do.
fn unquoted(template: &str) -> Option<&'static str> {
    let (mut in_string, mut escaped) = (false, false);
    for (i, c) in template.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == '{' {
            let rest = &template[i + 1..];
            if let Some(name) = NAMES
                .iter()
                .find(|n| rest.strip_prefix(**n).is_some_and(|r| r.starts_with('}')))
            {
                return Some(name);
            }
        }
    }
    None
}

fn check(value: &Value, has_text: &mut bool) -> Result<(), SendFrameError> {
    match value {
        Value::String(s) => {
            for piece in pieces(s) {
                match piece {
                    Piece::Word("text") => *has_text = true,
                    Piece::Word(w) if !NAMES.contains(&w) => {
                        return Err(SendFrameError::Unknown(w.to_owned()))
                    }
                    Piece::Word(_) | Piece::Literal(_) => {}
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|v| check(v, has_text)),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            if let Some(Piece::Word(w)) =
                pieces(k).into_iter().find(|p| matches!(p, Piece::Word(_)))
            {
                return Err(SendFrameError::InKey(w.to_owned()));
            }
            check(v, has_text)
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

fn fill(value: &mut Value, f: &Fields<'_>) {
    match value {
        Value::String(s) => {
            if s.contains('{') {
                *s = substitute(s, f);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| fill(v, f)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `s` with each placeholder replaced, in one pass: a value that itself reads like a
/// placeholder (a text of "{target}") stays as it is.
fn substitute(s: &str, f: &Fields<'_>) -> String {
    let mut out = String::with_capacity(s.len() + f.text.len());
    for piece in pieces(s) {
        match piece {
            Piece::Literal(l) => out.push_str(l),
            Piece::Word("target") => out.push_str(f.target),
            Piece::Word("text") => out.push_str(f.text),
            Piece::Word("id") => out.push_str(f.id),
            Piece::Word("reply_to") => out.push_str(f.reply_to),
            // Refused at load; kept as written should one ever get here.
            Piece::Word(w) => {
                out.push('{');
                out.push_str(w);
                out.push('}');
            }
        }
    }
    out
}

/// `s` cut at every `{word}` (1-32 of `a-z` and `_`); any other brace is literal text.
fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = vec![];
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let word = after.find('}').map(|close| &after[..close]).filter(|w| {
            (1..=MAX_WORD).contains(&w.len())
                && w.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        });
        match word {
            Some(w) => {
                out.push(Piece::Literal(&rest[..open]));
                out.push(Piece::Word(w));
                rest = &after[w.len() + 1..];
            }
            None => {
                out.push(Piece::Literal(&rest[..=open]));
                rest = after;
            }
        }
    }
    out.push(Piece::Literal(rest));
    out.retain(|p| *p != Piece::Literal(""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TEMPLATE: &str = r#"{"type":"send","to":"{target}","body":{"text":"{text}","ref":"{reply_to}"},"id":"msg-{id}","n":[1,"{text}!"]}"#;

    fn fields<'a>(text: &'a str) -> Fields<'a> {
        Fields {
            target: "room-1",
            text,
            id: "m42",
            reply_to: "",
        }
    }

    #[test]
    fn a_good_template_fills_every_placeholder() {
        let f = SendFrame::parse(TEMPLATE).unwrap();
        let out = f.render(&fields("hi"));
        let want = json!({"type":"send","to":"room-1","body":{"text":"hi","ref":""},"id":"msg-m42","n":[1,"hi!"]});
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), want);
        // Compact, keys sorted: what the frame looks like on the wire.
        assert_eq!(out, want.to_string());
    }

    #[test]
    fn hostile_text_stays_inside_its_string() {
        let f = SendFrame::parse(TEMPLATE).unwrap();
        for text in [
            "say \"hi\"",
            "\",\"type\":\"admin",
            "line one\nline two\r\n\ttabbed",
            "back\\slash \\\" and \\u0022",
            "汉字 emoji 🦀 RTL \u{202e}mark, NUL \u{0} and DEL \u{7f}",
            "{target} {id} {text} {reply_to}",
            "}]}{\"",
        ] {
            let out = f.render(&fields(text));
            let v: Value =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{text:?}: {e}: {out}"));
            assert_eq!(v["body"]["text"], text, "{out}");
            assert_eq!(v["n"][1], format!("{text}!"), "{out}");
            assert_eq!(v["type"], "send");
            assert_eq!(v.as_object().unwrap().len(), 5, "{out}");
            assert!(!out.contains('\n'), "one frame, one line: {out}");
        }
    }

    #[test]
    fn several_placeholders_in_one_string_and_literal_braces() {
        let f = SendFrame::parse(r#"{"t":"to {target}: {text} {not a word} {} {{id}}"}"#).unwrap();
        let out = f.render(&fields("x"));
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["t"], "to room-1: x {not a word} {} {m42}");
    }

    #[test]
    fn bad_templates_say_what_to_write() {
        use SendFrameError::*;
        for (template, want) in [
            (r#"{"text": {text}}"#, Unquoted("text")),
            (r#"{"to": "{target}", "n": {id}}"#, Unquoted("id")),
            ("{text}", Unquoted("text")),
            (r#"{"text": "{text}""#, NotJson(String::new())),
            ("not json", NotJson(String::new())),
            ("", NotJson(String::new())),
            (r#"{"{target}": "{text}"}"#, InKey("target".into())),
            (r#"{"text": "{txt}"}"#, Unknown("txt".into())),
            (r#"{"to": "{target}"}"#, NoText),
            (r#""just a string""#, NoText),
        ] {
            let got = SendFrame::parse(template).unwrap_err();
            match (&got, &want) {
                (NotJson(m), NotJson(_)) => assert!(m.contains("line 1"), "{m}"),
                _ => assert_eq!(got, want, "{template}"),
            }
        }
        // The escaped quote does not end the string: the placeholder is inside it.
        assert!(SendFrame::parse(r#"{"a": "\"{text}\""}"#).is_ok());
        let msg = SendFrame::parse(r#"{"text": {text}}"#)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("\"{text}\""), "{msg}");
    }

    #[test]
    fn a_bare_string_template_is_a_frame_too() {
        let f = SendFrame::parse(r#""{text}""#).unwrap();
        assert_eq!(f.render(&fields("a\"b")), r#""a\"b""#);
    }
}
