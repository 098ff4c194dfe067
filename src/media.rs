//! The files of chat messages: photos, voice notes and documents, fetched with the bot's own
//! credentials into the profile's media store, so that the agent reads them as local files
//! (Hermes 0.19.0 takes the Relay's `media_urls` as paths, and must never hold a platform's
//! token to fetch one itself).
//!
//! Everything here treats the platform's side as hostile: a URL in an event is fetched only
//! from an origin the platform's wing names ([`download`]), a body is streamed to disk and cut
//! off past its cap or past the length it announced, a name from the platform never becomes a
//! path ([`store::file_name`]), and the type is read from the bytes ([`sniff`]). The store is a
//! directory of the profile home under its trust rules, with a quota; the oldest files that
//! no message waits on go first.

pub mod download;
pub mod fetch;
pub(crate) mod named;
pub mod sniff;
pub mod store;

#[cfg(test)]
mod tests;

use axum::body::Bytes;
use futures_util::{Stream, StreamExt};

/// A file as a stream of 64 KiB chunks: a file uploaded or served, never whole in memory,
/// and read in pieces large enough that a 50 MB file is not 12,000 reads of 4 KiB (what
/// `tokio::fs::File` as a body reads).
pub(crate) fn file_chunks(
    file: tokio::fs::File,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send {
    futures_util::stream::unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    })
}

/// `chunks` as standard base64, piece by piece: a file inside a JSON string (for a platform or
/// an agent that takes bytes only so) never whole in memory. Each piece encodes the whole
/// 3-byte groups read so far, and the last the remainder with its padding, so the pieces
/// joined are the encoding of the bytes joined.
pub(crate) fn base64_pieces<S>(chunks: S) -> impl Stream<Item = std::io::Result<Bytes>> + Send
where
    S: Stream<Item = std::io::Result<Bytes>> + Send + 'static,
{
    use base64::Engine;
    let engine = &base64::engine::general_purpose::STANDARD;
    let state = (Box::pin(chunks), Vec::new(), false);
    futures_util::stream::unfold(state, move |(mut chunks, mut carry, ended)| async move {
        if ended {
            return None;
        }
        match chunks.next().await {
            Some(Ok(chunk)) => {
                carry.extend_from_slice(&chunk);
                let whole = carry.len() / 3 * 3;
                let piece = engine.encode(&carry[..whole]);
                carry.drain(..whole);
                Some((Ok(Bytes::from(piece)), (chunks, carry, false)))
            }
            Some(Err(e)) => Some((Err(e), (chunks, carry, true))),
            None => {
                let piece = engine.encode(&carry);
                Some((Ok(Bytes::from(piece)), (chunks, Vec::new(), true)))
            }
        }
    })
}
