//! Create Message with files, from Discord's public docs: "Uploading Files"
//! (`docs/reference.mdx`) and Create Message (`docs/resources/message.mdx`). The body is
//! `multipart/form-data`: the JSON params in a `payload_json` part (or, without one, as plain
//! form fields), and each file in a `files[n]` part with a `filename`. The `attachments`
//! array in `payload_json` names the files by that `n` ("the suffixed index `n` is the
//! snowflake placeholder"), and may give each its `filename` and `description`. A part
//! without a `filename` is not a file, whatever its name (the docs require one of every
//! `files[n]`), so it attaches nothing.
//!
//! Limits, each answered as the JSON error codes table (`docs/topics/opcodes-and-status-codes`)
//! names it:
//! - "The maximum request size when sending a message is 25 MiB" (Create Message,
//!   Limitations): 413 `40005`, from the head, the body unread.
//! - "The file upload size limit applies to each file in a request. The default limit is
//!   10 MiB" (Uploading Files): a larger file is 413 `40005`. The mock is a bot with no Nitro
//!   and no boosted server, so the default is its limit.
//! - At most 10 files: `30015` "Maximum number of attachments in a message reached (10)".

use serde_json::{Map, Value};

use super::super::multipart::{FilePart, Form};
use super::super::reply::Answer;
use super::body::{self, discord_error, Request};

/// Create Message's "maximum request size".
pub(crate) const MAX_REQUEST: usize = 25 * 1024 * 1024;
/// Uploading Files' default per-file limit.
const MAX_FILE: usize = 10 * 1024 * 1024;
/// JSON error 30015's "(10)".
const MAX_FILES: usize = 10;

/// One uploaded file of a Create Message request, with what `attachments` said of it.
pub(crate) struct Upload {
    pub(crate) part: FilePart,
    /// The attachment's `filename` if `attachments` gave one, else the part's own.
    pub(crate) filename: String,
    pub(crate) description: Option<String>,
}

/// JSON error 40005, with the HTTP status Discord gives it.
pub(crate) fn too_large() -> Answer {
    discord_error(413, 40005, "Request entity too large")
}

/// A `multipart/form-data` Create Message request, checked as a JSON one is (content, nonce,
/// reply) plus its files; `content` may be empty when a file is attached.
pub(crate) fn form_request(form: Form) -> Result<Request, Answer> {
    if form.files.len() > MAX_FILES {
        return Err(discord_error(
            400,
            30015,
            "Maximum number of attachments in a message reached (10)",
        ));
    }
    if form.files.iter().any(|file| file.bytes.len() > MAX_FILE) {
        return Err(too_large());
    }
    let params = match form.field("payload_json") {
        Some(json) => match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(params)) => params,
            _ => return Err(body::invalid_json()),
        },
        None => plain_fields(&form),
    };
    let placeholders = placeholders(&params);
    let uploads = form
        .files
        .into_iter()
        .map(|part| {
            let said = index(&part.name).and_then(|n| placeholders.iter().find(|p| p.0 == n));
            let filename = said
                .and_then(|p| p.1.clone())
                .or_else(|| part.filename.clone())
                .unwrap_or_default();
            let description = said.and_then(|p| p.2.clone());
            Upload {
                part,
                filename,
                description,
            }
        })
        .collect();
    body::request_from(params, uploads)
}

/// The JSON params sent as plain form fields ("usage of the endpoint *without*
/// `payload_json`"): strings, except the documented booleans.
fn plain_fields(form: &Form) -> Map<String, Value> {
    form.fields
        .iter()
        .map(|(name, value)| {
            let value = match (name.as_str(), value.as_str()) {
                ("tts" | "enforce_nonce", "true" | "True" | "1") => Value::Bool(true),
                ("tts" | "enforce_nonce", "false" | "False" | "0") => Value::Bool(false),
                _ => Value::String(value.clone()),
            };
            (name.clone(), value)
        })
        .collect()
}

/// `attachments` as (placeholder index, filename, description); entries without a usable
/// `id` name no file and are left out.
fn placeholders(params: &Map<String, Value>) -> Vec<(String, Option<String>, Option<String>)> {
    let Some(Value::Array(attachments)) = params.get("attachments") else {
        return Vec::new();
    };
    let text = |value: &Value, key: &str| value.get(key)?.as_str().map(str::to_owned);
    attachments
        .iter()
        .filter_map(|attachment| {
            let id = match attachment.get("id")? {
                Value::Number(n) => n.to_string(),
                Value::String(id) => id.clone(),
                _ => return None,
            };
            Some((
                id,
                text(attachment, "filename"),
                text(attachment, "description"),
            ))
        })
        .collect()
}

/// The `n` of a `files[n]` field name.
fn index(name: &str) -> Option<String> {
    let n = name.strip_prefix("files[")?.strip_suffix(']')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| n.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(name: &str, filename: &str, size: usize) -> FilePart {
        FilePart {
            name: name.into(),
            filename: Some(filename.into()),
            content_type: Some("image/png".into()),
            bytes: vec![0; size],
        }
    }

    #[test]
    fn attachments_name_files_by_their_index_and_may_rename_them() {
        let payload = r#"{"attachments":[{"id":1,"filename":"renamed.png","description":"d"}]}"#;
        let form = Form {
            fields: vec![("payload_json".into(), payload.into())],
            files: vec![part("files[0]", "a.png", 1), part("files[1]", "b.png", 2)],
        };
        let request = form_request(form).unwrap_or_else(|_| panic!("a valid form"));
        assert!(request.content.is_empty());
        let names: Vec<_> = request
            .uploads
            .iter()
            .map(|u| u.filename.as_str())
            .collect();
        assert_eq!(names, ["a.png", "renamed.png"]);
        assert_eq!(request.uploads[1].description.as_deref(), Some("d"));
        assert_eq!(index("files[12]").as_deref(), Some("12"));
        assert_eq!(index("files[]"), None);
    }

    #[test]
    fn limits_are_the_documented_ones() {
        let status = |form: Form| form_request(form).err().map(|a| a.status);
        let eleven = (0..11)
            .map(|n| part(&format!("files[{n}]"), "a", 1))
            .collect();
        assert_eq!(
            status(Form {
                fields: vec![],
                files: eleven
            }),
            Some(400)
        );
        let big = vec![part("files[0]", "a", MAX_FILE + 1)];
        assert_eq!(
            status(Form {
                fields: vec![],
                files: big
            }),
            Some(413)
        );
        let exact = vec![part("files[0]", "a", MAX_FILE)];
        assert_eq!(
            status(Form {
                fields: vec![],
                files: exact
            }),
            None
        );
        let plain = Form {
            fields: vec![
                ("content".into(), "hi".into()),
                ("enforce_nonce".into(), "true".into()),
                ("nonce".into(), "n".into()),
            ],
            files: vec![],
        };
        let request = form_request(plain).unwrap_or_else(|_| panic!("a valid form"));
        assert!(request.enforce_nonce && request.content == "hi");
        let nothing = Form::default();
        assert_eq!(status(nothing), Some(400));
    }
}
