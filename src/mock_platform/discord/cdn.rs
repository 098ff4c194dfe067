//! Discord's CDN for message attachments: an attachment's `url` is
//! `https://cdn.discordapp.com/attachments/{channel_id}/{attachment_id}/{filename}` with the
//! signed parameters `ex` (expiry, hex Unix seconds), `is` and `hm`
//! (discord.com/developers/docs/reference#signed-attachment-cdn-urls). Here the same path is
//! served on the mock's port, and an expired `ex` is refused as the CDN refuses it (404).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::reply::Answer;

#[derive(Default)]
pub(super) struct Cdn {
    /// By path (`/attachments/{channel}/{id}/{filename}`): the bytes.
    files: Mutex<HashMap<String, Vec<u8>>>,
    next: Mutex<u64>,
}

impl Cdn {
    /// Keep `bytes` as an attachment of `channel` named `filename`, typed `content_type`; the
    /// Attachment object a message carries, its `url` on `base`, valid for `valid_s` seconds
    /// (negative: already expired).
    pub(super) fn add(
        &self,
        base: &str,
        channel: &str,
        filename: &str,
        content_type: &str,
        bytes: Vec<u8>,
        valid_s: i64,
    ) -> Value {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            1_300_000_000_000_000_000 + *next
        };
        let path = format!("/attachments/{channel}/{id}/{filename}");
        let expires = super::super::post::unix_ms_now() as i64 / 1000 + valid_s;
        let url = format!("{base}{path}?ex={expires:x}&is=0&hm=00");
        let size = bytes.len();
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path, bytes);
        json!({
            "id": id.to_string(), "filename": filename, "size": size, "url": url,
            "proxy_url": url, "content_type": content_type,
        })
    }

    /// `GET /attachments/...`: the file, or 404 for an unknown or expired one.
    pub(super) fn serve(&self, head: &RequestHead) -> Option<Answer> {
        if head.method != "GET" || !head.path.starts_with("/attachments/") {
            return None;
        }
        let path = head.path.as_str();
        let expires = head
            .query_param("ex")
            .and_then(|hex| i64::from_str_radix(&hex, 16).ok())
            .unwrap_or(0);
        let now = super::super::post::unix_ms_now() as i64 / 1000;
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        Some(match files.get(path) {
            Some(bytes) if expires > now => {
                Answer::bytes("application/octet-stream", bytes.clone())
            }
            _ => Answer::raw(
                404,
                Some("text/plain"),
                "This content is no longer available.".into(),
            ),
        })
    }
}
