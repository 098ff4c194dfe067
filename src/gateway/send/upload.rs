//! A file as one part of a multipart upload, streamed from the outbox's copy: a platform's
//! upload of 50 MB costs the gateway a read buffer, not 50 MB.

use reqwest::multipart::Part;

use super::classify::local;
use super::{Answer, OutFile};

/// `file` as a multipart part named `name` on the wire by its file name and type. A copy
/// that cannot be opened fails the message: the outbox made it, and nothing else will.
pub(crate) async fn part(file: &OutFile) -> Result<Part, Answer> {
    let opened = tokio::fs::File::open(&file.path).await.map_err(|e| {
        Answer::Failed(local(format!(
            "the file {:?} to send cannot be read from the outbox: {e}",
            file.name
        )))
    })?;
    Part::stream_with_length(reqwest::Body::from(opened), file.bytes)
        .file_name(file.name.clone())
        .mime_str(&file.mime)
        .map_err(|e| Answer::Failed(local(format!("the file's type is not a MIME type: {e}"))))
}
