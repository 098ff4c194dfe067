//! Files people share, the inbound side: a `file_share` message's `files`, the bytes behind
//! their `url_private*`, and `files.info`, as Slack's docs describe them:
//! - The file object (api.slack.com/types/file): `id`, `name`, `title`, `mimetype`,
//!   `filetype`, `size`, `mode` `hosted`, `url_private` and `url_private_download`. Slack's
//!   URLs look like `https://files.slack.com/files-pri/T…-F…/name` and
//!   `…/files-pri/T…-F…/download/name`; the mock's are the same paths on its own port (or on
//!   a base a test names, to play a URL on another host).
//! - `GET url_private*`: "Both `url_private` and `url_private_download` require an
//!   authorization header of the form `Authorization: Bearer A_VALID_TOKEN` ... bearing at
//!   least the `files:read` scope." A request without one, with a token Slack does not take,
//!   or with a token lacking the scope gets HTTP 200 and an HTML sign-in page, not a 401
//!   (vercel/eve#1567: "returns an HTTP 200 HTML sign-in page instead of the file bytes").
//!   The download URL "includes headers to force a browser download": `Content-Disposition:
//!   attachment`. The bytes come with the file's `mimetype` where the mock knows it.
//! - A file shared into a Slack Connect channel comes in the event as `{"id", "mode":
//!   "file_access", "file_access": "check_file_info", "created": 0, "timestamp": 0, "user":
//!   ""}` ("Slack Connect files", the same page): the app must call `files.info`.
//! - `files.info` (`GET` preferred, `file` as a query or form argument, never JSON; bot token
//!   with `files:read`): `{"ok": true, "file": {…}, "comments": [], "response_metadata":
//!   {"next_cursor": ""}}`; `file_not_found` for an unknown id; `missing_scope` with `needed`
//!   and `provided` without the scope; the token errors as every method has them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::super::http::{percent_decode, RequestHead};
use super::super::reply::{Answer, Reply};
use super::endpoint::{bearer, not_ok};
use super::state::{SlackState, Token};

/// Where Slack serves private files, on the mock's port as on `files.slack.com`.
pub(crate) const FILES_PRI: &str = "/files-pri/";
pub(crate) const INFO_PATH: &str = "/api/files.info";

/// What Slack answers a file request it will not serve: its sign-in page.
const SIGN_IN_PAGE: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
    <title>Slack</title></head><body><h1>Sign in to your workspace</h1>\
    <form action=\"/signin\" method=\"post\"><input name=\"domain\"></form></body></html>";

/// A file a test has the mock's user share.
#[derive(Clone, Debug)]
pub struct SlackFile {
    pub name: String,
    /// The file object's `mimetype` (the uploader's word, as on Slack).
    pub mimetype: String,
    pub bytes: Vec<u8>,
    /// Shared as into a Slack Connect channel: the event carries only the `check_file_info`
    /// stub, and `files.info` the rest.
    pub connect: bool,
    /// The base its URLs are on instead of the mock's own (`http://localhost:PORT`: a URL on
    /// another host).
    pub url_base: Option<String>,
}

impl SlackFile {
    pub fn new(name: &str, mimetype: &str, bytes: Vec<u8>) -> SlackFile {
        SlackFile {
            name: name.to_owned(),
            mimetype: mimetype.to_owned(),
            bytes,
            connect: false,
            url_base: None,
        }
    }

    /// The same file, shared as into a Slack Connect channel.
    pub fn connect(self) -> SlackFile {
        SlackFile {
            connect: true,
            ..self
        }
    }

    /// The same file, its URLs on `base`.
    pub fn at(self, base: &str) -> SlackFile {
        SlackFile {
            url_base: Some(base.trim_end_matches('/').to_owned()),
            ..self
        }
    }
}

/// A shared file, as the mock keeps it.
struct Kept {
    id: String,
    file: SlackFile,
}

/// The files people shared, and whether the bot token has `files:read`.
pub(crate) struct UserFiles {
    base: String,
    team: String,
    /// By `{team}-{id}`, the path segment the URLs name them by.
    files: Mutex<HashMap<String, Kept>>,
    files_read: AtomicBool,
}

impl UserFiles {
    /// `http_base` is the mock's own `http://` address; `team` the workspace's id.
    pub(crate) fn new(http_base: String, team: String) -> UserFiles {
        UserFiles {
            base: http_base,
            team,
            files: Mutex::default(),
            files_read: AtomicBool::new(true),
        }
    }

    /// Whether the bot token has `files:read` (it has unless a test takes it away).
    pub(crate) fn set_files_read(&self, granted: bool) {
        self.files_read.store(granted, Ordering::SeqCst);
    }

    /// Keeps `file`, shared by `user`: the object the event carries.
    pub(crate) fn add(&self, file: SlackFile, user: &str) -> Value {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        let id = format!("F0SHARE{:05}", files.len() + 1);
        let kept = Kept { id, file };
        let object = if kept.file.connect {
            json!({"id": kept.id, "mode": "file_access", "file_access": "check_file_info",
                   "created": 0, "timestamp": 0, "user": ""})
        } else {
            self.object(&kept, user)
        };
        files.insert(format!("{}-{}", self.team, kept.id), kept);
        object
    }

    /// The whole file object of `kept`.
    fn object(&self, kept: &Kept, user: &str) -> Value {
        let f = &kept.file;
        let base = f.url_base.as_deref().unwrap_or(&self.base);
        let segment = format!("{}-{}", self.team, kept.id);
        let name = url_escape(&f.name);
        let filetype = f
            .name
            .rsplit_once('.')
            .map_or("binary".to_owned(), |(_, ext)| ext.to_ascii_lowercase());
        json!({
            "id": kept.id, "created": 1_531_763_342, "timestamp": 1_531_763_342,
            "name": f.name, "title": f.name, "mimetype": f.mimetype, "filetype": filetype,
            "pretty_type": filetype.to_ascii_uppercase(), "user": user, "editable": false,
            "size": f.bytes.len(), "mode": "hosted", "is_external": false, "external_type": "",
            "is_public": true, "public_url_shared": false, "display_as_bot": false,
            "username": "",
            "url_private": format!("{base}{FILES_PRI}{segment}/{name}"),
            "url_private_download": format!("{base}{FILES_PRI}{segment}/download/{name}"),
            "permalink": format!("https://mock-workspace.slack.com/files/{user}/{}/{name}", kept.id),
        })
    }
}

/// Answers `GET /files-pri/…` and `files.info`; `None` for any other request.
pub(crate) fn route(
    head: &RequestHead,
    body: &[u8],
    state: &SlackState,
    files: &UserFiles,
) -> Option<Reply> {
    if let Some(rest) = head.path.strip_prefix(FILES_PRI) {
        return (head.method == "GET").then(|| Reply::Answer(download(rest, head, state, files)));
    }
    if head.path == INFO_PATH && (head.method == "GET" || head.method == "POST") {
        return Some(Reply::Answer(info(head, body, state, files)));
    }
    None
}

/// `GET /files-pri/{team}-{id}/[download/]{name}`: the bytes, to the bot token with
/// `files:read`; the sign-in page to anyone else.
fn download(rest: &str, head: &RequestHead, state: &SlackState, files: &UserFiles) -> Answer {
    let granted = files.files_read.load(Ordering::SeqCst);
    if !granted || state.refuse_token(bearer(head), Token::Bot).is_some() {
        state.count(|s| s.sign_in_pages += 1);
        return Answer::raw(
            200,
            Some("text/html; charset=utf-8"),
            SIGN_IN_PAGE.to_owned(),
        );
    }
    let segment = rest.split('/').next().unwrap_or_default();
    let forced = rest.split('/').nth(1) == Some("download");
    let found = {
        let files = files.files.lock().unwrap_or_else(PoisonError::into_inner);
        files.get(segment).map(|k| k.file.clone())
    };
    let Some(file) = found else {
        return Answer::raw(404, Some("text/html; charset=utf-8"), "Not Found".into());
    };
    state.count(|s| s.file_downloads += 1);
    let mut answer = Answer::bytes(served_type(&file.mimetype), file.bytes);
    if forced {
        let name: String = file
            .name
            .chars()
            .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
            .collect();
        answer.headers.push((
            "content-disposition",
            format!("attachment; filename=\"{name}\""),
        ));
    }
    answer
}

/// `files.info`: the whole object of the file named by `file`.
fn info(head: &RequestHead, body: &[u8], state: &SlackState, files: &UserFiles) -> Answer {
    state.count(|s| s.files_info_calls += 1);
    if let Some(code) = state.refuse_token(bearer(head), Token::Bot) {
        return not_ok(&code);
    }
    if !files.files_read.load(Ordering::SeqCst) {
        return Answer::new(
            200,
            json!({"ok": false, "error": "missing_scope", "needed": "files:read",
                   "provided": "chat:write,channels:history"}),
        );
    }
    let Some(id) = head.query_param("file").or_else(|| form_file(body)) else {
        return not_ok("invalid_arguments");
    };
    let kept = files.files.lock().unwrap_or_else(PoisonError::into_inner);
    let found = kept.values().find(|k| k.id == id);
    match found {
        Some(k) => Answer::new(
            200,
            json!({"ok": true, "file": files.object(k, &state.config.user_id),
                   "comments": [], "response_metadata": {"next_cursor": ""}}),
        ),
        None => not_ok("file_not_found"),
    }
}

/// `file` from a form body (`file=F…&…`).
fn form_file(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "file")
        .and_then(|(_, value)| percent_decode(value))
}

/// The `Content-Type` the bytes are served with: the file's `mimetype` where the mock knows
/// it, else what Slack's docs call `binary`.
fn served_type(mimetype: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "application/pdf",
        "text/plain",
        "text/html",
        "audio/ogg",
        "audio/mpeg",
        "audio/webm",
        "video/mp4",
    ];
    KNOWN
        .iter()
        .find(|k| mimetype.eq_ignore_ascii_case(k))
        .copied()
        .unwrap_or("application/octet-stream")
}

/// A file name as a URL path segment.
fn url_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
