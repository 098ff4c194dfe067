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

/// A file as a stream of 64 KiB chunks: a file uploaded or served, never whole in memory,
/// and read in pieces large enough that a 50 MB file is not 12,000 reads of 4 KiB (what
/// `tokio::fs::File` as a body reads).
pub(crate) fn file_chunks(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<axum::body::Bytes>> + Send {
    futures_util::stream::unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(axum::body::Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    })
}
