//! Message attachments as QQ serves them: an attachment's `url` is on QQ's multimedia host
//! (`https://multimedia.nt.qq.com.cn/download?appid=…&fileid=…`), and a download without the
//! bot's `Authorization: QQBot <access token>` is not answered with the file (hermes-agent
//! 0.19.0, `gateway/platforms/qqbot/adapter.py`, `_qq_media_headers`; docs/research/
//! media-platforms.md §4). Here the same path is served on the mock's port.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::opcode_gateway::state::Gateway;
use super::super::reply::Answer;
use super::body::qq_error;

#[derive(Default)]
pub(super) struct Media {
    /// By `fileid`: the bytes.
    files: Mutex<HashMap<String, Vec<u8>>>,
    next: Mutex<u64>,
}

impl Media {
    /// Keep `bytes` as an attachment named `filename` of `content_type`: the attachment object
    /// an event carries, its `url` on `base`.
    pub(super) fn add(
        &self,
        base: &str,
        filename: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> Value {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            format!("CgoxMDAw{:08}", *next)
        };
        let size = bytes.len();
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), bytes);
        let url = format!("{base}/download?appid=1407&fileid={id}&spec=0");
        json!({"content_type": content_type, "filename": filename, "size": size, "url": url,
               "height": 1, "width": 1})
    }

    /// `GET /download?fileid=…`: the file for the bot's access token; 401 without one.
    pub(super) fn serve(&self, head: &RequestHead, gateway: &Gateway) -> Option<Answer> {
        if head.method != "GET" || head.path != "/download" {
            return None;
        }
        let auth = head.header("authorization").unwrap_or_default();
        if !(auth.starts_with("QQBot ") && gateway.token_accepted(auth)) {
            return Some(qq_error(401, 11244, "token not exist or expire"));
        }
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        Some(
            match head.query_param("fileid").and_then(|id| files.get(&id)) {
                Some(bytes) => Answer::bytes("application/octet-stream", bytes.clone()),
                None => qq_error(404, 404, "file not found"),
            },
        )
    }
}
