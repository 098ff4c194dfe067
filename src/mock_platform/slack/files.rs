//! Uploading a file, as Slack's "external" upload flow has it (docs.slack.dev,
//! `files.getUploadURLExternal` and `files.completeUploadExternal`; the older `files.upload`
//! is gone):
//! 1. `POST /api/files.getUploadURLExternal` (bot token; `filename` and `length`, "Size in
//!    bytes of the file being uploaded", as a form or JSON) → `{"ok": true, "upload_url",
//!    "file_id"}`. Errors: `missing_argument` ("Typically only occurs when the `length`
//!    provided is 0"), `file_upload_size_restricted` past what the mock reads.
//! 2. `POST upload_url` with the bytes: "Files can be sent as raw bytes or can be multipart
//!    form encoded. Slack will return HTTP 200 if the upload is successful; a non-200
//!    response indicates a failure." Slack's URL is on `files.slack.com`; the mock's is on
//!    its own port, under [`UPLOAD_PREFIX`], and needs no token (the URL is the capability,
//!    as the docs' `curl` example sends none). A body whose size is not the `length` given
//!    is refused (**inferred**: the docs ask for the size and do not say what another does).
//! 3. `POST /api/files.completeUploadExternal` (bot token; `files` "Array of file ids and
//!    their corresponding (optional) titles", `channel_id` "Channel ID where the file will be
//!    shared. If not specified the file will be private", `initial_comment` "The message
//!    text introducing the file", `thread_ts` another message's ts "to upload this file as a
//!    reply") → `{"ok": true, "files": [{"id", "title"}]}`, the docs' "Typical success
//!    response". Shared into a channel, it is a post: recorded with its files (the field is
//!    the file id, the name the one given in step 1) and failed by the
//!    [`SendFault`](crate::mock_platform::SendFault)s as `chat.postMessage` is, and it comes
//!    back as the bot's own message event. "This method can only be called once": a file
//!    already completed, never uploaded or unknown is `file_not_found` (**inferred**: the
//!    docs name no error for it). No key makes a repeat the same post.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::super::http::{percent_decode, RequestHead, MAX_UPLOAD_BODY};
use super::super::multipart;
use super::super::post::{Platform, Post, PostedFile, SendAttempt, Target};
use super::super::post_record::{Dedupe, PostRecord};
use super::super::reply::{Answer, Reply};
use super::super::send_attempt::{attempted, settled, struck_after, struck_before};
use super::endpoint::{bearer, not_ok, WebApi};
use super::state::{SlackState, Token};

pub(crate) const GET_URL_PATH: &str = "/api/files.getUploadURLExternal";
pub(crate) const COMPLETE_PATH: &str = "/api/files.completeUploadExternal";
/// Where the mock's upload URLs point, on its own port.
pub(crate) const UPLOAD_PREFIX: &str = "/upload/v1/";

/// One upload, from its URL on.
struct Upload {
    filename: String,
    length: u64,
    /// The bytes and their type, once posted to the URL.
    content: Option<(Vec<u8>, Option<String>)>,
    completed: bool,
}

#[derive(Default)]
struct Inner {
    /// By file id.
    uploads: HashMap<String, Upload>,
    /// The secret in an upload URL → the file id.
    keys: HashMap<String, String>,
    serial: u64,
}

/// The uploads the mock knows, and where its upload URLs start.
pub(crate) struct Files {
    base: String,
    inner: Mutex<Inner>,
}

impl Files {
    /// `http_base` is the mock's own `http://` address, which the upload URLs are on.
    pub(crate) fn new(http_base: String) -> Files {
        Files {
            base: format!("{http_base}{UPLOAD_PREFIX}"),
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Answers the request if it is one of the three steps.
pub(crate) fn route(
    head: &RequestHead,
    body: &[u8],
    state: &SlackState,
    files: &Files,
    posts: &PostRecord,
) -> Option<Reply> {
    if head.method != "POST" {
        return None;
    }
    if let Some(key) = head.path.strip_prefix(UPLOAD_PREFIX) {
        return Some(Reply::Answer(upload(key, head, body, state, files)));
    }
    let reply = match head.path.as_str() {
        GET_URL_PATH => Reply::Answer(get_url(head, body, state, files)),
        COMPLETE_PATH => complete(head, body, state, files, posts),
        _ => return None,
    };
    Some(reply)
}

/// A body over what the mock reads for an upload: not a 200, as Slack refuses one.
pub(crate) fn too_large() -> Answer {
    Answer::raw(413, Some("text/plain"), "Request Entity Too Large".into())
}

/// A method's arguments, "application/x-www-form-urlencoded" or "application/json": every
/// value as JSON, a form's as strings.
fn arguments(head: &RequestHead, body: &[u8]) -> HashMap<String, Value> {
    let kind = head.header("content-type").unwrap_or_default();
    if kind.to_ascii_lowercase().contains("json") {
        return match serde_json::from_slice(body) {
            Ok(Value::Object(fields)) => fields.into_iter().collect(),
            _ => HashMap::new(),
        };
    }
    let text = String::from_utf8_lossy(body);
    let pairs = text
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(name)?, Value::String(percent_decode(value)?)))
        });
    pairs.collect()
}

fn text(args: &HashMap<String, Value>, name: &str) -> Option<String> {
    match args.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn get_url(head: &RequestHead, body: &[u8], state: &SlackState, files: &Files) -> Answer {
    if let Some(code) = state.refuse_token(bearer(head), Token::Bot) {
        return not_ok(&code);
    }
    let args = arguments(head, body);
    let filename = text(&args, "filename").filter(|f| !f.is_empty());
    let length = text(&args, "length").and_then(|l| l.trim().parse::<u64>().ok());
    let (Some(filename), Some(length)) = (filename, length.filter(|&n| n > 0)) else {
        return not_ok("missing_argument");
    };
    if length > MAX_UPLOAD_BODY as u64 {
        return not_ok("file_upload_size_restricted");
    }
    let mut inner = files.lock();
    inner.serial += 1;
    let file_id = format!("F0MOCK{:06}", inner.serial);
    let key = format!("{:016x}{:04}", fastrand::u64(..), inner.serial);
    inner.keys.insert(key.clone(), file_id.clone());
    let upload = Upload {
        filename,
        length,
        content: None,
        completed: false,
    };
    inner.uploads.insert(file_id.clone(), upload);
    drop(inner);
    state.count(|s| s.upload_urls += 1);
    let upload_url = format!("{}{key}", files.base);
    Answer::new(
        200,
        json!({"ok": true, "upload_url": upload_url, "file_id": file_id}),
    )
}

/// `POST upload_url`: the bytes, raw or as a form's (first) file part.
fn upload(key: &str, head: &RequestHead, body: &[u8], state: &SlackState, files: &Files) -> Answer {
    let (bytes, kind) = match read_file(head, body) {
        Ok(file) => file,
        Err(why) => return Answer::raw(400, Some("text/plain"), why),
    };
    let mut inner = files.lock();
    let Some(id) = inner.keys.get(key).cloned() else {
        return Answer::raw(404, Some("text/plain"), "Not Found".into());
    };
    let Some(upload) = inner.uploads.get_mut(&id) else {
        return Answer::raw(404, Some("text/plain"), "Not Found".into());
    };
    if bytes.len() as u64 != upload.length {
        let why = format!("length {} given, {} sent", upload.length, bytes.len());
        return Answer::raw(400, Some("text/plain"), why);
    }
    let n = bytes.len();
    upload.content = Some((bytes, kind));
    drop(inner);
    state.count(|s| s.uploads += 1);
    Answer::raw(200, Some("text/plain"), format!("OK - {n}"))
}

type FileBody = (Vec<u8>, Option<String>);

fn read_file(head: &RequestHead, body: &[u8]) -> Result<FileBody, String> {
    if !multipart::is_multipart(head) {
        let kind = head.header("content-type").map(str::to_owned);
        return Ok((body.to_vec(), kind));
    }
    // The form is in memory already; parsing it needs no waiting.
    let form = futures_util::FutureExt::now_or_never(multipart::parse(head, body))
        .unwrap_or_else(|| Err("the form could not be read at once".into()))?;
    let file = form
        .files
        .into_iter()
        .next()
        .ok_or("the form has no file")?;
    Ok((file.bytes, file.content_type))
}

fn complete(
    head: &RequestHead,
    body: &[u8],
    state: &SlackState,
    files: &Files,
    posts: &PostRecord,
) -> Reply {
    let args = arguments(head, body);
    let channel = text(&args, "channel_id").unwrap_or_default();
    attempted(
        posts,
        Platform::Slack,
        Target::Channel,
        channel,
        |attempt| {
            if let Some(code) = state.refuse_token(bearer(head), Token::Bot) {
                return Reply::Answer(not_ok(&code));
            }
            if let Some(refused) = struck_before(posts, attempt, &WebApi) {
                return refused;
            }
            let Some(wanted) = listed(&args) else {
                return Reply::Answer(not_ok("invalid_arguments"));
            };
            let channel = attempt.target_id.clone();
            if !channel.is_empty() && !state.config.channels.contains(&channel) {
                return Reply::Answer(not_ok("channel_not_found"));
            }
            let shared = match take(files, &wanted) {
                Ok(shared) => shared,
                Err(code) => return Reply::Answer(not_ok(code)),
            };
            let answer = json!({"ok": true, "files": wanted.iter().map(|(id, title)| {
            json!({"id": id, "title": title})
        }).collect::<Vec<_>>()});
            if channel.is_empty() {
                // Private: completed, shared nowhere, no post.
                return Reply::Answer(Answer::new(200, answer));
            }
            let comment = text(&args, "initial_comment").unwrap_or_default();
            let thread = text(&args, "thread_ts");
            let post = Share {
                comment,
                thread,
                files: shared,
            };
            share(post, answer, state, posts, attempt)
        },
    )
}

/// `files`: `[{"id", "title"}]`, as JSON or (in a form) a JSON string; each id with its
/// title (the name given in step 1 stands in for a missing one, as Slack shows it).
fn listed(args: &HashMap<String, Value>) -> Option<Vec<(String, Option<String>)>> {
    let files = match args.get("files")? {
        Value::String(text) => serde_json::from_str(text).ok()?,
        other => other.clone(),
    };
    let files = files.as_array().filter(|f| !f.is_empty())?;
    files
        .iter()
        .map(|f| {
            let id = f["id"].as_str()?.to_owned();
            Some((id, f["title"].as_str().map(str::to_owned)))
        })
        .collect()
}

/// Completes every listed upload, or none: what the post records of each.
fn take(
    files: &Files,
    wanted: &[(String, Option<String>)],
) -> Result<Vec<PostedFile>, &'static str> {
    let mut inner = files.lock();
    let ready = |id: &String| {
        let upload = inner.uploads.get(id);
        upload.is_some_and(|u| u.content.is_some() && !u.completed)
    };
    if !wanted.iter().all(|(id, _)| ready(id)) {
        return Err("file_not_found");
    }
    let mut shared = Vec::new();
    for (id, _) in wanted {
        let Some(upload) = inner.uploads.get_mut(id) else {
            return Err("file_not_found");
        };
        upload.completed = true;
        if let Some((bytes, kind)) = &upload.content {
            let name = Some(upload.filename.as_str());
            shared.push(PostedFile::of(id, name, kind.as_deref(), bytes));
        }
    }
    Ok(shared)
}

/// What a completed upload shares into a channel.
struct Share {
    comment: String,
    thread: Option<String>,
    files: Vec<PostedFile>,
}

fn share(
    share: Share,
    answer: Value,
    state: &SlackState,
    posts: &PostRecord,
    attempt: &mut SendAttempt,
) -> Reply {
    let channel = attempt.target_id.clone();
    let post = Post {
        platform: Platform::Slack,
        target: Target::Channel,
        target_id: channel.clone(),
        content: share.comment.clone(),
        reply_to: share.thread.clone(),
        msg_seq: None,
        nonce: None,
        message_id: String::new(),
        received_at: attempt.received_at,
        received_unix_ms: attempt.received_unix_ms,
        files: share.files,
    };
    state.count(|s| s.files_shared += post.files.len() as u64);
    let ts = state.mint_ts();
    let accepted = posts.accept(post, Dedupe::None, |_| ts, |_| answer);
    let Some(answer) = settled(accepted, attempt) else {
        return Reply::Answer(not_ok("internal_error"));
    };
    // The share comes back as the bot's own message.
    state.emit(&channel, &share.comment, share.thread.as_deref(), true);
    if let Some(withheld) = struck_after(posts, attempt) {
        return withheld;
    }
    Reply::Answer(Answer::new(200, answer))
}
