//! QQ's rich-media upload, `POST /v2/users/{openid}/files` and
//! `POST /v2/groups/{group_openid}/files`, written from tencent-connect/bot-docs
//! `docs/develop/api-v2/server-inter/message/send-receive/rich-media.md`, and the `file_info`
//! it hands out, which a media message (`msg_type` 7, `send.rs`) then names.
//!
//! The body is JSON: `file_type` (1 image png/jpg, 2 video mp4, 3 voice silk/amr, 4 file),
//! `srv_send_msg`, and the file. The docs make `url` required and `file_data` "【暂未支持】";
//! real clients (Hermes's `_upload_media`) send the bytes as `file_data`, plain base64, and
//! that is what the mock takes (docs/research/media-platforms.md §4 B). It fetches no `url` (it has
//! no internet to fetch from) and refuses one, and refuses a body with neither. The answer is
//! `{file_uuid, file_info, ttl}`; with `srv_send_msg: false` nothing is posted. A `file_info`
//! from `/groups/…/files` posts only to groups, from `/users/…/files` only to users ("用
//! `/v2/groups/{group_openid}/files` 上传的文件，仅能发到群聊内 …"), and lapses after `ttl`.
//!
//! Where the docs give no code for a refusal (a malformed body, a file not in its type's
//! format), the mock answers its request-invalid 12002 with words that say which. It keeps
//! of each upload what the post record keeps of a file (its digest and size), not the bytes.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use super::super::http::RequestHead;
use super::super::opcode_gateway::state::Gateway;
use super::super::post::{PostedFile, Target};
use super::super::reply::Answer;
use super::body::qq_error;

/// How long a `file_info` stays good, as `ttl` says it (the docs give no figure).
const TTL: Duration = Duration::from_secs(3600);

/// Which kind of chat an upload is for, and so where its `file_info` may be posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Users,
    Groups,
}

struct Upload {
    scope: Scope,
    file: PostedFile,
    lapses: Instant,
}

#[derive(Default)]
pub(super) struct Files {
    /// By `file_info`.
    uploads: Mutex<HashMap<String, Upload>>,
    next: Mutex<u64>,
}

/// Whether the request is for an upload endpoint.
pub(super) fn is_upload(head: &RequestHead) -> bool {
    let parts: Vec<&str> = head.path.trim_start_matches('/').split('/').collect();
    head.method == "POST"
        && matches!(parts.as_slice(), ["v2", "users" | "groups", id, "files"] if !id.is_empty())
}

/// A body over what the mock reads at all.
pub(super) fn too_large() -> Answer {
    qq_error(413, 413, "request entity too large")
}

impl Files {
    /// Uploads taken so far, orphans included.
    pub(super) fn count(&self) -> u64 {
        *self.next.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `POST /v2/{users|groups}/{id}/files`.
    pub(super) fn upload(&self, gateway: &Gateway, head: &RequestHead, body: &[u8]) -> Answer {
        let auth = head.header("authorization").unwrap_or_default();
        if !(auth.starts_with("QQBot ") && gateway.token_accepted(auth)) {
            return qq_error(401, 11244, "token not exist or expire");
        }
        let scope = if head.path.starts_with("/v2/groups/") {
            Scope::Groups
        } else {
            Scope::Users
        };
        let file = match read(body) {
            Ok(file) => file,
            Err(message) => return qq_error(400, 12002, message),
        };
        let n = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            *next
        };
        let file_info = format!("Q0ZJTkZP{n:010}{:016x}", fastrand::u64(..));
        let upload = Upload {
            scope,
            file,
            lapses: Instant::now() + TTL,
        };
        self.uploads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(file_info.clone(), upload);
        let file_uuid = format!("{:032x}", fastrand::u128(..));
        Answer::new(
            200,
            json!({"file_uuid": file_uuid, "file_info": file_info, "ttl": TTL.as_secs()}),
        )
    }

    /// The file a media message to `target` names by `file_info`: `None` when the mock never
    /// gave it, it has lapsed, or it was uploaded for the other kind of chat.
    pub(super) fn posted(&self, file_info: &str, target: Target) -> Option<PostedFile> {
        let scope = match target {
            Target::User => Scope::Users,
            Target::Group => Scope::Groups,
            _ => return None,
        };
        let uploads = self.uploads.lock().unwrap_or_else(PoisonError::into_inner);
        let upload = uploads.get(file_info)?;
        (upload.scope == scope && Instant::now() < upload.lapses).then(|| upload.file.clone())
    }
}

/// The upload's body, checked as the docs and the clients describe it: the file it carries.
fn read(body: &[u8]) -> Result<PostedFile, &'static str> {
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(body) else {
        return Err("request invalid: the body is not a JSON object");
    };
    let file_type = body.get("file_type").and_then(Value::as_u64);
    let field = match file_type {
        Some(1) => "image",
        Some(2) => "video",
        Some(3) => "voice",
        Some(4) => "file",
        _ => return Err("request invalid: file_type must be 1, 2, 3 or 4"),
    };
    match body.get("srv_send_msg") {
        Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(
                "request invalid: the mock posts nothing from an upload (srv_send_msg: true)",
            )
        }
        _ => return Err("request invalid: srv_send_msg must be a boolean"),
    }
    let url = body
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty());
    let data = body.get("file_data").and_then(Value::as_str);
    let bytes = match (data, url) {
        (Some(data), _) => base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| "request invalid: file_data is not base64")?,
        (None, Some(_)) => return Err("request invalid: the mock fetches no url; send file_data"),
        (None, None) => return Err("request invalid: url or file_data is required"),
    };
    if bytes.is_empty() {
        return Err("request invalid: the file is empty");
    }
    if !in_format(file_type.unwrap_or(4), &bytes) {
        return Err("request invalid: the file is not in its file_type's format (image png/jpg, video mp4, voice silk/amr)");
    }
    let name = body.get("file_name").and_then(Value::as_str);
    Ok(PostedFile::of(field, name, None, &bytes))
}

/// Whether `bytes` are in the format the docs give for `file_type`: "图片：png/jpg，视频：
/// mp4，语音：silk/amr", read from their first bytes. A file (4) may be anything.
fn in_format(file_type: u64, bytes: &[u8]) -> bool {
    match file_type {
        1 => bytes.starts_with(b"\x89PNG\r\n\x1a\n") || bytes.starts_with(b"\xff\xd8\xff"),
        2 => bytes.get(4..8) == Some(b"ftyp"),
        3 => {
            bytes.starts_with(b"#!SILK")
                || bytes.starts_with(b"\x02#!SILK")
                || bytes.starts_with(b"#!AMR")
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    #[test]
    fn an_upload_takes_base64_file_data_in_its_type_s_format() {
        let png = b"\x89PNG\r\n\x1a\nrest";
        let data = base64::engine::general_purpose::STANDARD.encode(png);
        let ok = read(&body(
            json!({"file_type": 1, "file_data": data, "srv_send_msg": false}),
        ))
        .unwrap();
        assert_eq!((ok.field.as_str(), ok.bytes), ("image", png.len() as u64));
        let named = read(&body(
            json!({"file_type": 4, "file_data": data, "srv_send_msg": false, "file_name": "a.pdf"}),
        ))
        .unwrap();
        assert_eq!(named.filename.as_deref(), Some("a.pdf"));
        for bad in [
            json!({"file_type": 1, "srv_send_msg": false}),
            json!({"file_type": 1, "url": "https://example.com/a.png", "srv_send_msg": false}),
            json!({"file_type": 1, "file_data": "%%%", "srv_send_msg": false}),
            json!({"file_type": 2, "file_data": data, "srv_send_msg": false}),
            json!({"file_type": 5, "file_data": data, "srv_send_msg": false}),
            json!({"file_type": 1, "file_data": data}),
            json!({"file_type": 1, "file_data": data, "srv_send_msg": true}),
        ] {
            assert!(read(&body(bad.clone())).is_err(), "{bad}");
        }
    }
}
