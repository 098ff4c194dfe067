//! The content repository (matrix-org/matrix-spec `data/api/client-server/content-repo.yaml`
//! and `authed-content-repo.yaml`):
//! - `POST /_matrix/media/v3/upload?filename=NAME` with the access token: the body is the
//!   file, its type the `Content-Type` header ("Defaults to `application/octet-stream` if it
//!   is not set"); the answer `{"content_uri": "mxc://…"}`, 413 `M_TOO_LARGE` ("The uploaded
//!   content is too large for the server") over the homeserver's limit. Every upload is new
//!   content: the endpoint has no key, so a repeat is a second copy.
//! - `GET /_matrix/client/v1/media/config`: `{"m.upload.size": …}`, "the maximum size an upload
//!   can be in bytes".
//! - `GET /_matrix/client/v1/media/download/{serverName}/{mediaId}` with the access token:
//!   the file, `404 M_NOT_FOUND` for an unknown one.
//!
//! Content comes from an upload, or from the test, as a user's client would have uploaded
//! it; either way it is named by its `mxc://{serverName}/{mediaId}` URI, which is what an
//! event's `url` carries and what the send endpoint looks up to record a file post.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::json;

use super::super::http::RequestHead;
use super::super::post::PostedFile;
use super::super::reply::Answer;
use super::state::MatrixState;
use super::{auth, errors};

/// The type content has when its upload named none.
const DEFAULT_TYPE: &str = "application/octet-stream";

/// One piece of content, as uploaded.
struct Content {
    bytes: Vec<u8>,
    content_type: String,
    filename: Option<String>,
}

#[derive(Default)]
pub(crate) struct Media {
    /// By `(serverName, mediaId)`.
    files: Mutex<HashMap<(String, String), Content>>,
    next: Mutex<u64>,
}

impl Media {
    /// Keep `bytes` as content of `server`: its `mxc://` URI.
    pub(crate) fn add(&self, server: &str, bytes: Vec<u8>) -> String {
        self.keep(server, bytes, DEFAULT_TYPE.to_owned(), None)
    }

    fn keep(
        &self,
        server: &str,
        bytes: Vec<u8>,
        content_type: String,
        filename: Option<String>,
    ) -> String {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            format!("MockMedia{:06}", *next)
        };
        let content = Content {
            bytes,
            content_type,
            filename,
        };
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((server.to_owned(), id.clone()), content);
        format!("mxc://{server}/{id}")
    }

    /// What the send record keeps of the content at `uri`, posted as `field` (the event's
    /// `msgtype`) under `filename` (the event's; the upload's when the event names none).
    pub(crate) fn posted(
        &self,
        uri: &str,
        field: &str,
        filename: Option<&str>,
    ) -> Option<PostedFile> {
        let (server, id) = uri.strip_prefix("mxc://")?.split_once('/')?;
        let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        let content = files.get(&(server.to_owned(), id.to_owned()))?;
        let filename = filename.or(content.filename.as_deref());
        Some(PostedFile::of(
            field,
            filename,
            Some(&content.content_type),
            &content.bytes,
        ))
    }
}

/// `POST /_matrix/media/v3/upload`.
pub(crate) fn upload(head: &RequestHead, body: &[u8], state: &MatrixState) -> Answer {
    state.count(|s| s.uploads += 1);
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    if body.len() as u64 > state.config.max_upload {
        return too_large_for(state.config.max_upload);
    }
    let content_type = head
        .header("content-type")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(DEFAULT_TYPE)
        .to_owned();
    let filename = head.query_param("filename");
    let server = state.config.server_name().to_owned();
    let uri = state
        .media
        .keep(&server, body.to_vec(), content_type, filename);
    state.count(|s| s.uploaded += 1);
    Answer::new(200, json!({"content_uri": uri}))
}

/// 413 `M_TOO_LARGE`, as the spec's example words it.
fn too_large_for(max: u64) -> Answer {
    let message = format!("Cannot upload files larger than {max} bytes");
    errors::error(413, "M_TOO_LARGE", &message)
}

/// A body over what the mock reads at all: the same refusal.
pub(crate) fn too_large() -> Answer {
    too_large_for(super::super::http::MAX_UPLOAD_BODY as u64)
}

/// `GET /_matrix/client/v1/media/config`.
pub(crate) fn config(head: &RequestHead, state: &MatrixState) -> Answer {
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    Answer::new(200, json!({"m.upload.size": state.config.max_upload}))
}

/// `GET /_matrix/client/v1/media/download/{serverName}/{mediaId}`.
pub(crate) fn download(head: &RequestHead, server: &str, id: &str, state: &MatrixState) -> Answer {
    if let Err(answer) = auth::check(head, state) {
        return answer;
    }
    let files = state
        .media
        .files
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    match files.get(&(server.to_owned(), id.to_owned())) {
        Some(content) => Answer::bytes("application/octet-stream", content.bytes.clone()),
        None => errors::error(404, "M_NOT_FOUND", "Not found"),
    }
}
