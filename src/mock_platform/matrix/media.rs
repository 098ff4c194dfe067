//! Authenticated media (client-server API v1.11, "Content repository"): `GET
//! /_matrix/client/v1/media/download/{serverName}/{mediaId}` with the access token, answering
//! the file, `404 M_NOT_FOUND` for an unknown one. Content is put here by the test, as a user's
//! client would have uploaded it, and named by its `mxc://{serverName}/{mediaId}` URI.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::super::http::RequestHead;
use super::super::reply::Answer;
use super::state::MatrixState;
use super::{auth, errors};

#[derive(Default)]
pub(crate) struct Media {
    /// By `(serverName, mediaId)`: the bytes.
    files: Mutex<HashMap<(String, String), Vec<u8>>>,
    next: Mutex<u64>,
}

impl Media {
    /// Keep `bytes` as content of `server`: its `mxc://` URI.
    pub(crate) fn add(&self, server: &str, bytes: Vec<u8>) -> String {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            format!("MockMedia{:06}", *next)
        };
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((server.to_owned(), id.clone()), bytes);
        format!("mxc://{server}/{id}")
    }
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
        Some(bytes) => Answer::bytes("application/octet-stream", bytes.clone()),
        None => errors::error(404, "M_NOT_FOUND", "Not found"),
    }
}
