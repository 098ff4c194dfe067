//! The files people send the robot: each a `downloadCode` in its message, exchanged at
//! `POST /v1.0/robot/messageFiles/download` (`{downloadCode, robotCode}`, the access token in
//! `x-acs-dingtalk-access-token`) for `{"downloadUrl": …}`, a temporary link, as
//! open.dingtalk.com "下载机器人接收消息的文件内容" gives it. The link points to this mock
//! (`GET /dtfiles/<link>?Expires=…`), standing for DingTalk's file host, another origin than
//! the API in production; it serves the file's bytes without the token, as a presigned link
//! does.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::state::DingTalkState;

pub(crate) const DOWNLOAD_PATH: &str = "/v1.0/robot/messageFiles/download";
/// Where the links point, on this mock.
pub(crate) const FILES_PATH: &str = "/dtfiles/";

struct File {
    content_type: &'static str,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct Inner {
    serial: u64,
    /// By download code.
    files: HashMap<String, File>,
    /// Each link handed out, to its download code.
    links: HashMap<String, String>,
    links_given: u64,
    downloads: u64,
    /// Where links point instead of this mock, when a test says so.
    host: Option<String>,
}

/// What the mock keeps of the files, apart from the messages.
#[derive(Default)]
pub(crate) struct Files {
    inner: Mutex<Inner>,
}

impl Files {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep a file; its download code (base64-like, as DingTalk's are).
    pub(crate) fn add(&self, content_type: &'static str, bytes: Vec<u8>) -> String {
        let mut inner = self.lock();
        inner.serial += 1;
        let code = format!(
            "mockDownloadCode{:08x}+{:08x}/Q==",
            inner.serial,
            fastrand::u32(..)
        );
        inner.files.insert(
            code.clone(),
            File {
                content_type,
                bytes,
            },
        );
        code
    }

    /// Links point to `host` (`scheme://host[:port]`) instead of this mock, or to it again.
    pub(crate) fn set_host(&self, host: Option<String>) {
        self.lock().host = host;
    }

    /// `(links given, downloads served)`.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let inner = self.lock();
        (inner.links_given, inner.downloads)
    }
}

/// `messageFiles/download`: a link for a known code from the app's robot with a good token.
pub(crate) fn link(head: &RequestHead, v: &Value, state: &DingTalkState) -> Answer {
    let error = |status, code: &str, message: &str| {
        Answer::new(
            status,
            json!({"code": code, "message": message, "requestid": "mock-request"}),
        )
    };
    if !state.token_ok(head.header("x-acs-dingtalk-access-token")) {
        return error(401, "InvalidAuthentication", "不合法的access_token");
    }
    if v["robotCode"].as_str() != Some(state.config.robot_code.as_str()) {
        return error(400, "invalidParameter.robotCode", "robotCode无效");
    }
    let code = v["downloadCode"].as_str().unwrap_or("");
    let mut inner = state.files.lock();
    if !inner.files.contains_key(code) {
        return error(400, "invalidParameter.downloadCode", "下载码无效");
    }
    inner.serial += 1;
    let link = format!("link{:08x}{:08x}", inner.serial, fastrand::u32(..));
    inner.links.insert(link.clone(), code.to_owned());
    inner.links_given += 1;
    let host = inner.host.clone();
    let host = host.as_deref().unwrap_or(state.http_base());
    let url = format!("{host}{FILES_PATH}{link}?Expires=3600&Signature=mock");
    Answer::new(200, json!({"downloadUrl": url}))
}

/// `GET /dtfiles/<link>`: the file's bytes, or OSS's 404.
pub(crate) fn serve(head: &RequestHead, state: &DingTalkState) -> Option<Answer> {
    let link = head.path.strip_prefix(FILES_PATH)?;
    let mut inner = state.files.lock();
    let code = inner.links.get(link).cloned();
    let Some(file) = code.and_then(|c| inner.files.get(&c)) else {
        return Some(Answer::raw(
            404,
            Some("application/xml"),
            "<Error><Code>NoSuchKey</Code></Error>".into(),
        ));
    };
    let answer = Answer::bytes(file.content_type, file.bytes.clone());
    inner.downloads += 1;
    Some(answer)
}
