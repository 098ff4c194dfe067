//! One journal entry (journalctl's JSON) as one line of text, in the shape the gateway's
//! plain-text log has: `TIME  LEVEL message field=value ...`.
//!
//! journalctl's own short output shows only `MESSAGE`, and the gateway's lines say which
//! adapter, which close code and what failed in their fields. Rendering the fields back gives
//! the same line whether the gateway logged natively, logged text before it knew the journal,
//! or ran under launchd, where `logs` prints its file: the message and the values are written
//! as the plain text writes them (logging/plain_text.rs), escaped and, when a value is not
//! one word, quoted.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

use crate::logging::plain_text;

/// The prefix of the gateway's own fields (logging.rs).
const OURS: &str = "HERMES_";

/// Fields every line of the unit has, or that say where the line came from: not repeated.
const LEFT_OUT: &[&str] = &["HERMES_PROFILE"];

/// The entry as a line, without its newline.
pub(super) fn render(entry: &Map<String, Value>) -> String {
    let time = entry
        .get("__REALTIME_TIMESTAMP")
        .and_then(text)
        .and_then(|t| t.parse::<u64>().ok())
        .map(|us| {
            humantime::format_rfc3339_micros(SystemTime::UNIX_EPOCH + Duration::from_micros(us))
                .to_string()
        })
        .unwrap_or_else(|| "-".into());
    let level = match entry.get("PRIORITY").and_then(text).as_deref() {
        Some("0" | "1" | "2" | "3") => "ERROR",
        Some("4") => " WARN",
        Some("7") => "DEBUG",
        _ => " INFO",
    };
    let message = entry.get("MESSAGE").and_then(text).unwrap_or_default();
    let mut line = format!("{time} {level} {}", plain_text::message(&message));
    // In the journal's (sorted) order; the component first, as the plain text has no spans.
    let mut fields: Vec<(&String, String)> = entry
        .iter()
        .filter(|(k, _)| k.starts_with(OURS) && !LEFT_OUT.contains(&k.as_str()))
        .filter_map(|(k, v)| Some((k, text(v)?)))
        .collect();
    fields.sort_by_key(|(k, _)| k.as_str() != "HERMES_COMPONENT");
    for (key, value) in fields {
        let name = key[OURS.len()..].to_ascii_lowercase();
        line.push_str(&format!(" {name}={}", plain_text::value(&value)));
    }
    line
}

/// A field's value as text: journalctl writes a string, an array of bytes for what is not
/// UTF-8, and an array of either for a field given more than once.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) if items.iter().all(Value::is_u64) => {
            let bytes: Vec<u8> = items
                .iter()
                .filter_map(Value::as_u64)
                .map(|b| u8::try_from(b).unwrap_or(b'?'))
                .collect();
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        Value::Array(items) => {
            let all: Vec<String> = items.iter().filter_map(text).collect();
            (!all.is_empty()).then(|| all.join(","))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_gateway_line_reads_as_its_plain_text_would() {
        let e = entry(
            r#"{"__REALTIME_TIMESTAMP":"1796000000123456","PRIORITY":"6","MESSAGE":"connection closed",
                "HERMES_PROFILE":"coder","HERMES_COMPONENT":"adapter","HERMES_ADAPTER":"dc",
                "HERMES_CODE":"4000","_PID":"12","SYSLOG_IDENTIFIER":"hermes-svc"}"#,
        );
        assert_eq!(
            render(&e),
            "2026-11-30T00:53:20.123456Z  INFO connection closed component=adapter adapter=dc code=4000"
        );
    }

    #[test]
    fn levels_odd_values_and_control_characters() {
        let warn = entry(r#"{"PRIORITY":"4","MESSAGE":"connection is dead"}"#);
        assert_eq!(render(&warn), "-  WARN connection is dead");
        let err = entry(r#"{"PRIORITY":"3","MESSAGE":[104,105,255]}"#);
        assert_eq!(render(&err), "- ERROR hi\u{fffd}");
        let twice = entry(r#"{"MESSAGE":"m","HERMES_ADAPTER":["a","b"]}"#);
        assert_eq!(render(&twice), "-  INFO m adapter=a,b");
        let hostile = entry(r#"{"MESSAGE":"x\u001b[2Jy"}"#);
        assert!(!render(&hostile).contains('\u{1b}'), "{}", render(&hostile));
    }
}
