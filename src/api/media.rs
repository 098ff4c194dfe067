//! The media store through the API: `POST /v1/media` puts a file in (what a message then
//! names in `attachments`), `GET /v1/media/{id}` reads one out (a file a chat message
//! carried, or one put in).
//!
//! A file goes in on its own request, not inside `POST /v1/messages`: the message stays a
//! small JSON that a client may send again with its idempotency key without sending
//! megabytes again, and the upload streams to disk within its own cap and pace, never whole
//! in memory. The server passes this one route's body through unread (server.rs).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use hyper::body::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::problem::Problem;
use super::routes::Ctx;
use super::BODY_TIMEOUT;
use crate::gateway::outbox::NewFile;
use crate::media::download::{DownloadError, Source};
use crate::media::store::{self, Store, StoreError};

/// The largest file taken: above every platform's own limit for a bot's upload (50 MB is the
/// largest of them; each wing's docs give its own), so the platform's limit is the one a
/// caller meets.
pub const MAX_UPLOAD: u64 = 64 * 1024 * 1024;

/// The path whose body the server hands over unread.
pub(super) const UPLOAD_PATH: &str = "/v1/media";

#[derive(Deserialize)]
pub(super) struct Upload {
    /// The file's name as the chat is to show it.
    name: Option<String>,
}

/// An upload's body as the store reads it: at most [`MAX_UPLOAD`] bytes, and never more
/// than [`BODY_TIMEOUT`] between two chunks (a client that stops sending is cut off).
struct UploadBody {
    stream: axum::body::BodyDataStream,
    read: u64,
}

impl Source for UploadBody {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, DownloadError> {
        let next = tokio::time::timeout(BODY_TIMEOUT, self.stream.next())
            .await
            .map_err(|_| DownloadError::Timeout(BODY_TIMEOUT.as_secs()))?;
        let Some(chunk) = next else {
            return Ok(None);
        };
        let chunk = chunk.map_err(|e| DownloadError::Transport(e.to_string()))?;
        self.read += chunk.len() as u64;
        if self.read > MAX_UPLOAD {
            return Err(DownloadError::TooLarge { max: MAX_UPLOAD });
        }
        Ok(Some(chunk))
    }
}

pub(super) async fn post_media(
    State(ctx): State<Arc<Ctx>>,
    Query(upload): Query<Upload>,
    body: Body,
) -> Result<Response, Problem> {
    let store = open(&ctx)?;
    let body = UploadBody {
        stream: body.into_data_stream(),
        read: 0,
    };
    let id = format!("{:016x}", fastrand::u64(..));
    let stored = store
        .put("file", &id, upload.name.as_deref(), body)
        .await
        .map_err(|e| match e {
            StoreError::Download(DownloadError::TooLarge { .. }) => Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "file_too_large",
                format!("the file is larger than the {MAX_UPLOAD} bytes the API takes"),
            ),
            StoreError::Download(DownloadError::Timeout(_)) => Problem::body_timeout(),
            // The store cannot take it now (a full disk): the server's condition, not the
            // caller's mistake.
            other => unavailable(&other),
        })?;
    // An upload counts toward the store's quota as a fetched file does: the oldest go first,
    // never the one just stored.
    if let Err(e) = store.evict(crate::media::fetch::QUOTA, |n| n == stored.name) {
        tracing::warn!(error = %crate::error_chain::one_line(&e), "cannot keep the media store under its quota");
    }
    let answer = json!({
        "id": stored.name,
        "bytes": stored.bytes,
        "sha256": stored.sha256,
        "mime": stored.mime,
    });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

pub(super) async fn get_media(
    State(ctx): State<Arc<Ctx>>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let store = open(&ctx)?;
    let file = item(&store, &id)?;
    let mime = {
        let mut head = [0u8; 64];
        let n = std::os::unix::fs::FileExt::read_at(&file, &mut head, 0).unwrap_or(0);
        crate::media::sniff::sniff(&head[..n]).0
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let file = tokio::fs::File::from_std(file);
    let mut response = Body::from_stream(crate::media::file_chunks(file)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    Ok(response)
}

/// The files `POST /v1/messages` names in `attachments`, each opened now, so that the store
/// evicting one a moment later costs the message nothing.
pub(super) fn attachments(ctx: &Ctx, ids: &[String]) -> Result<Vec<NewFile>, Problem> {
    if ids.is_empty() {
        return Ok(vec![]);
    }
    let store = open(ctx)?;
    ids.iter()
        .map(|id| match store.open_item(id) {
            Ok(Some(file)) => Ok(NewFile {
                file: Arc::new(file),
                name: store::shown_name(id).to_owned(),
            }),
            Ok(None) => {
                Err(Problem::bad_request("unknown_media", unknown(id)).field("attachments"))
            }
            Err(e) => Err(unavailable(&e)),
        })
        .collect()
}

fn open(ctx: &Ctx) -> Result<Store, Problem> {
    Store::open(&ctx.state.media_dir).map_err(|e| unavailable(&e))
}

fn item(store: &Store, id: &str) -> Result<std::fs::File, Problem> {
    match store.open_item(id) {
        Ok(Some(file)) => Ok(file),
        Ok(None) => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_media",
            unknown(id),
        )),
        Err(e) => Err(unavailable(&e)),
    }
}

fn unknown(id: &str) -> String {
    format!(
        "no media item {id:?}; ids are what POST /v1/media answered (the store removes the oldest files past its quota)"
    )
}

/// The store cannot be opened, read or written: it names the directory and the fix.
fn unavailable(e: &StoreError) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "media_unavailable",
        crate::error_chain::one_line(e),
    )
}
