//! "获取消息中的资源文件" (`GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}
//! ?type=image|file`, `Authorization: Bearer <tenant_access_token>`): the file of an image,
//! file, audio or video message, by the message's id and the key its `content` names, which
//! "must match". The answer is the bytes with their `Content-Type`; an error is JSON
//! `{code, msg}` (400/234001 an invalid parameter, 234002 unauthorized, as the sibling
//! "下载文件" page lists them), which a client tells apart by `Content-Type:
//! application/json` (oapi-sdk-python `message_resource.py`).

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::body::error;
use super::send::{authorized, unauthorized};
use super::state::FeishuState;

pub(crate) const PREFIX: &str = "/open-apis/im/v1/messages/";

/// A message's file, as the mock keeps it for this endpoint.
#[derive(Clone, Debug)]
pub(crate) struct Resource {
    pub(crate) message_id: String,
    pub(crate) key: String,
    /// `image` for an `image_key`, `file` for a `file_key`.
    pub(crate) kind: &'static str,
    pub(crate) bytes: Vec<u8>,
}

/// Answers `GET …/messages/{id}/resources/{key}`; `None` for any other path.
pub(crate) fn route(head: &RequestHead, state: &FeishuState) -> Option<Answer> {
    let rest = head.path.strip_prefix(PREFIX)?;
    let (message_id, key) = rest.split_once("/resources/")?;
    if head.method != "GET" {
        return None;
    }
    let auth = head.header("authorization").unwrap_or_default();
    if !authorized(auth, state) {
        return Some(unauthorized(auth));
    }
    let kind = head.query_param("type").unwrap_or_default();
    if kind != "image" && kind != "file" {
        return Some(error(
            400,
            234001,
            "Invalid request param. type must be image or file",
        ));
    }
    let found = state.resource(message_id, key).filter(|r| r.kind == kind);
    Some(match found {
        Some(r) => Answer::bytes("application/octet-stream", r.bytes),
        None => error(
            400,
            234001,
            "Invalid request param. the file_key and the message_id do not match",
        ),
    })
}
