//! A file as one part of a multipart upload, or as a request's whole body, streamed from the
//! outbox's copy: a platform's upload of 50 MB costs the gateway a read buffer, not 50 MB.

use std::time::Duration;

use reqwest::multipart::Part;

use super::classify::local;
use super::{Answer, OutFile};

/// `file` as a multipart part named `name` on the wire by its file name and type. A copy
/// that cannot be opened fails the message: the outbox made it, and nothing else will.
pub(crate) async fn part(file: &OutFile) -> Result<Part, Answer> {
    Part::stream_with_length(body(file).await?, file.bytes)
        .file_name(file.name.clone())
        .mime_str(&file.mime)
        .map_err(|e| Answer::Failed(local(format!("the file's type is not a MIME type: {e}"))))
}

/// `file` as a request body of its own (a platform that takes the raw bytes: the caller sets
/// `Content-Length` to `file.bytes`, which the stream cannot say). A copy that cannot be
/// opened fails the message, as for [`part`].
pub(crate) async fn body(file: &OutFile) -> Result<reqwest::Body, Answer> {
    let opened = tokio::fs::File::open(&file.path).await.map_err(|e| {
        Answer::Failed(local(format!(
            "the file {:?} to send cannot be read from the outbox: {e}",
            file.name
        )))
    })?;
    Ok(reqwest::Body::wrap_stream(crate::media::file_chunks(
        opened,
    )))
}

/// The slowest an upload is assumed to go: 256 KiB/s, a poor uplink.
const SLOWEST_BYTES_PER_SEC: u64 = 256 * 1024;
/// What any request is given (the shared client's timeout), before the bytes.
const BASE: Duration = Duration::from_secs(15);

/// How long an upload of `bytes` may take, start to answer: the shared client's 15 s would
/// cut a 50 MB upload off on any ordinary line, and a cut-off upload is retried from the
/// start.
pub(crate) fn timeout_for(bytes: u64) -> Duration {
    BASE + Duration::from_secs(bytes / SLOWEST_BYTES_PER_SEC)
}
