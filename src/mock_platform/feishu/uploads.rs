//! Feishu's uploads, and the messages that name them, from the open platform's pages:
//! - "上传图片" `POST /open-apis/im/v1/images` (multipart, `Authorization: Bearer
//!   <tenant_access_token>`): `image_type` (`message` "用于发送消息" or `avatar`) and `image`
//!   ("上传的图片大小不能超过 10 MB，且不支持上传大小为 0 的图片") → `{"code": 0, "msg":
//!   "success", "data": {"image_key"}}`.
//! - "上传文件" `POST /open-apis/im/v1/files`: `file_type` (`opus`, `mp4`, `pdf`, `doc`,
//!   `xls`, `ppt`, `stream`), `file_name` ("带后缀的文件名", required), `duration` (int, ms,
//!   optional) and `file` ("文件大小不得超过 30 MB，且不允许上传空文件") → `data.file_key`.
//! - Their error tables: 400/234001 "Invalid request param.", 400/234006 "The file size
//!   exceed the max value." (文件 30M, 图片 10M), 400/234010 "File's size can't be 0."; a
//!   missing or unknown token is the send endpoints' 99991661/99991663.
//!
//! "MB" is read as 10^6 bytes here, as the sender reads it. The mock keeps each upload's
//! digest (never its bytes) under its key. A message of `msg_type` `image` (`{"image_key"}`),
//! `file` or `audio` (`{"file_key"}`; audio only for an `opus` upload, as "发送消息"'s content
//! page has it) or `media` (`{"file_key"}` of an `mp4`, with an optional cover
//! `image_key`) is taken only when its keys are ones this app uploaded, and is recorded with
//! the file. What Feishu answers for a key it does not know is not on the pages: the mock
//! answers 230001 "invalid parameter" (**inferred**). Keys never expire in the mock.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::multipart::{self, FilePart, Form};
use super::super::post::PostedFile;
use super::super::reply::Answer;
use super::body::error;
use super::events::hex;
use super::send::{authorized, unauthorized};
use super::state::FeishuState;

pub(crate) const IMAGES_PATH: &str = "/open-apis/im/v1/images";
pub(crate) const FILES_PATH: &str = "/open-apis/im/v1/files";

const MAX_IMAGE: usize = 10_000_000;
const MAX_FILE: usize = 30_000_000;
const FILE_TYPES: [&str; 7] = ["opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"];

/// One upload, as the mock keeps it: what a post of it records, and its `file_type`
/// (`None` for an image).
#[derive(Clone)]
struct Stored {
    posted: PostedFile,
    file_type: Option<String>,
}

#[derive(Default)]
pub(crate) struct Uploads(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    /// By `image_key` or `file_key`.
    keys: HashMap<String, Stored>,
    count: u64,
}

impl Uploads {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Uploads taken so far, images and files.
    pub(crate) fn count(&self) -> u64 {
        self.lock().count
    }

    fn keep(&self, prefix: &str, stored: Stored) -> String {
        let key = format!("{prefix}_v3_{}", hex(24));
        let mut inner = self.lock();
        inner.count += 1;
        inner.keys.insert(key.clone(), stored);
        key
    }

    fn get(&self, key: &str) -> Option<Stored> {
        self.lock().keys.get(key).cloned()
    }
}

/// Whether the request is one of the two uploads (decided from the head alone).
pub(crate) fn is_upload(head: &RequestHead) -> bool {
    head.method == "POST" && (head.path == IMAGES_PATH || head.path == FILES_PATH)
}

/// A body over what the mock reads: Feishu's own refusal of a file too large.
pub(crate) fn too_large() -> Answer {
    error(400, 234006, "The file size exceed the max value.")
}

fn invalid(detail: &str) -> Answer {
    error(400, 234001, &format!("Invalid request param. {detail}"))
}

/// Answers an upload ([`is_upload`]).
pub(crate) async fn serve(head: &RequestHead, body: &[u8], state: &FeishuState) -> Answer {
    let auth = head.header("authorization").unwrap_or_default();
    if !authorized(auth, state) {
        return unauthorized(auth);
    }
    if !multipart::is_multipart(head) {
        return invalid("the body must be multipart/form-data");
    }
    let form = match multipart::parse(head, body).await {
        Ok(form) => form,
        Err(why) => return invalid(&why),
    };
    let (answer, prefix, field) = if head.path == IMAGES_PATH {
        (image(&form), "img", "image_key")
    } else {
        (file(&form), "file", "file_key")
    };
    match answer {
        Ok(stored) => {
            let key = state.uploads.keep(prefix, stored);
            Answer::new(
                200,
                json!({"code": 0, "msg": "success", "data": {field: key}}),
            )
        }
        Err(refused) => refused,
    }
}

/// The file part `name` within `max` bytes and not empty.
fn sized<'a>(form: &'a Form, name: &str, max: usize) -> Result<&'a FilePart, Answer> {
    let part = form
        .file(name)
        .ok_or_else(|| invalid(&format!("{name} is required")))?;
    if part.bytes.is_empty() {
        return Err(error(400, 234010, "File's size can't be 0."));
    }
    if part.bytes.len() > max {
        return Err(too_large());
    }
    Ok(part)
}

fn image(form: &Form) -> Result<Stored, Answer> {
    match form.field("image_type") {
        Some("message" | "avatar") => {}
        _ => return Err(invalid("image_type must be message or avatar")),
    }
    let part = sized(form, "image", MAX_IMAGE)?;
    Ok(Stored {
        posted: part.posted(),
        file_type: None,
    })
}

fn file(form: &Form) -> Result<Stored, Answer> {
    let file_type = form.field("file_type").unwrap_or_default();
    if !FILE_TYPES.contains(&file_type) {
        return Err(invalid(
            "file_type is not one of opus, mp4, pdf, doc, xls, ppt, stream",
        ));
    }
    let name = form.field("file_name").unwrap_or_default();
    if name.trim().is_empty() {
        return Err(invalid("file_name is required"));
    }
    if let Some(duration) = form.field("duration") {
        if duration.trim().parse::<u64>().is_err() {
            return Err(invalid("duration must be an int"));
        }
    }
    let part = sized(form, "file", MAX_FILE)?;
    let mut posted = part.posted();
    // The name the chat shows is `file_name`, whatever the part's own.
    posted.filename = Some(name.to_owned());
    Ok(Stored {
        posted,
        file_type: Some(file_type.to_owned()),
    })
}

/// The files a message of `msg_type` with `content` (parsed) posts, each recorded under the
/// message type; an error when a key it names is not an upload of the right kind.
pub(crate) fn attached(
    msg_type: &str,
    content: &str,
    state: &FeishuState,
) -> Result<Vec<PostedFile>, Answer> {
    let content: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    let key = |field: &str| content[field].as_str().unwrap_or_default().to_owned();
    let uploads = &state.uploads;
    let upload = |field: &str, kinds: &[Option<&str>]| {
        let key = key(field);
        uploads
            .get(&key)
            .filter(|s| kinds.contains(&s.file_type.as_deref()))
            .map(|s| {
                let mut posted = s.posted;
                posted.field = msg_type.to_owned();
                posted
            })
            .ok_or_else(|| invalid_message(&format!("{field} {key:?} is not a usable upload")))
    };
    let files = match msg_type {
        "image" => vec![upload("image_key", &[None])?],
        "file" => {
            let kinds = FILE_TYPES.map(Some);
            vec![upload("file_key", &kinds)?]
        }
        "audio" => vec![upload("file_key", &[Some("opus")])?],
        "media" => {
            if !key("image_key").is_empty() {
                upload("image_key", &[None])?;
            }
            vec![upload("file_key", &[Some("mp4")])?]
        }
        _ => Vec::new(),
    };
    Ok(files)
}

/// A message's refusal, in the send endpoints' shape (230001).
fn invalid_message(detail: &str) -> Answer {
    error(
        400,
        230001,
        &format!("Your request contains an invalid request parameter, {detail}."),
    )
}

#[cfg(test)]
mod tests;
