//! A method's parameters, read the way the Bot API reads them ("Making requests": "query
//! string, application/x-www-form-urlencoded, application/json"): every value as a string,
//! objects and arrays JSON-serialized, so a form and a JSON body mean the same thing. A body
//! field wins over a query parameter of the same name. A `multipart/form-data` body (the
//! fourth way, needed to upload a file) is split by the caller, which hands its text fields
//! here and keeps its files.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::super::http::RequestHead;
use super::super::multipart::Form;
use super::super::reply::Answer;
use super::answers;

pub(crate) struct Params<'a> {
    body: HashMap<String, String>,
    head: &'a RequestHead,
}

impl<'a> Params<'a> {
    /// The parameters, or the server's answer to a JSON body it cannot read.
    pub(crate) fn parse(head: &'a RequestHead, body: &[u8]) -> Result<Params<'a>, Answer> {
        let kind = head
            .header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let looks_json = body.trim_ascii_start().starts_with(b"{");
        let body = if kind.contains("json") || (kind.is_empty() && looks_json) {
            json_fields(body)?
        } else if kind.contains("x-www-form-urlencoded") {
            form_fields(body)
        } else {
            HashMap::new()
        };
        Ok(Params { body, head })
    }

    /// The text fields of a `multipart/form-data` body; the first of a repeated name wins.
    pub(crate) fn from_form(head: &'a RequestHead, form: &Form) -> Params<'a> {
        let mut body = HashMap::new();
        for (name, value) in &form.fields {
            body.entry(name.clone()).or_insert_with(|| value.clone());
        }
        Params { body, head }
    }

    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.body
            .get(name)
            .cloned()
            .or_else(|| self.head.query_param(name))
    }

    /// An integer parameter; one that is absent or not an integer reads as `None`.
    pub(crate) fn int(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|value| value.trim().parse().ok())
    }

    /// `true` or `1`, as the server reads a boolean.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|value| matches!(value.trim(), "true" | "1"))
    }

    /// `allowed_updates`: a JSON array of update types, or an empty string for the default
    /// set; `None` when absent or unreadable (the setting then stays as it was).
    pub(crate) fn allowed_updates(&self) -> Option<Vec<String>> {
        match self.get("allowed_updates")?.trim() {
            "" => Some(Vec::new()),
            text => serde_json::from_str(text).ok(),
        }
    }

    /// A JSON-serialized parameter (an object or array); `None` when absent or unreadable.
    pub(crate) fn json<T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        self.get(name)
            .and_then(|value| serde_json::from_str(&value).ok())
    }
}

fn json_fields(body: &[u8]) -> Result<HashMap<String, String>, Answer> {
    if body.trim_ascii().is_empty() {
        return Ok(HashMap::new());
    }
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return Err(answers::bad_request("can't parse JSON object"));
    };
    Ok(fields
        .into_iter()
        .filter_map(|(name, value)| {
            let text = match value {
                Value::Null => return None,
                Value::String(text) => text,
                other => other.to_string(),
            };
            Some((name, text))
        })
        .collect())
}

fn form_fields(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((decode(name)?, decode(value)?))
        })
        .collect()
}

/// Percent-decoding with `+` as a space; `None` when the result is not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
            (b'+', _, _) => out.push(b' '),
            (other, _, _) => out.push(other),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_bodies_decode_like_query_strings() {
        let fields = form_fields(b"chat_id=1001&text=hi+there%21&reply_parameters=%7B%22message_id%22%3A3%7D&bad=%ff&flag");
        assert_eq!(fields["chat_id"], "1001");
        assert_eq!(fields["text"], "hi there!");
        assert_eq!(fields["reply_parameters"], r#"{"message_id":3}"#);
        assert_eq!(fields["flag"], "");
        assert!(!fields.contains_key("bad"));
    }

    #[test]
    fn json_bodies_become_strings_and_nested_values_stay_json() {
        let fields = json_fields(
            br#"{"chat_id":1001,"text":"x","allowed_updates":["message"],"n":null,"b":true}"#,
        )
        .unwrap_or_default();
        assert_eq!(fields["chat_id"], "1001");
        assert_eq!(fields["text"], "x");
        assert_eq!(fields["allowed_updates"], r#"["message"]"#);
        assert_eq!(fields["b"], "true");
        assert!(!fields.contains_key("n"));
        assert!(json_fields(b"[1]").is_err());
        assert!(json_fields(b"  ").is_ok_and(|f| f.is_empty()));
    }
}
