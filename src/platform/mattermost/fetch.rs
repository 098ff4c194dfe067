//! A post's file, from the server it was posted on: `GET /api/v4/files/{file_id}` with the
//! bot's token as `Authorization: Bearer` (api.mattermost.com, "Get a file"; the server's
//! `api4/file.go` `getFile`, which checks the session may read the post's channel and
//! answers the bytes).
//!
//! **The id is the event's word**, and so hostile input: only a Mattermost id (26 lowercase
//! letters and digits) goes into the path, and the request goes to the adapter's own
//! `server-url` only (`media/download.rs`), never anywhere an event names; the token goes
//! nowhere else either. A redirect to another host is therefore not followed (**inferred**:
//! a server set to hand downloads to its file store would answer one): such a file is said
//! in the message as not fetched, never fetched with the token from an unchecked host.
//!
//! **Size.** A server's `MaxFileSize` defaults to 100 MB; [`MAX_BYTES`] is 50 MiB, what the
//! other wings fetch for an agent (a model reads no file of hundreds of megabytes whole, and
//! the store's quota is 512 MiB). A larger file is said as not fetched, by its
//! `Content-Length` before a byte is read, else as it streams.

use std::time::Duration;

use crate::config::Secret;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// The most fetched of one file for the agent (see the module's doc).
const MAX_BYTES: u64 = 50 * 1024 * 1024;
/// The download, start to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Why the server did not give a file, in words the agent is given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum Refusal {
    #[error("the post named no file id a Mattermost server gives")]
    NoId,
    #[error("the server refuses the bot's token (HTTP 401): make a new one")]
    Token,
    #[error("the bot may not read the channel the file was posted in (HTTP 403)")]
    Forbidden,
    #[error("the server says the file is gone (HTTP 404)")]
    Gone,
    #[error("the server has file attachments off (HTTP 501, EnableFileAttachments)")]
    Disabled,
}

impl From<Refusal> for DownloadError {
    fn from(r: Refusal) -> Self {
        DownloadError::Refused(r.to_string())
    }
}

pub struct Fetcher {
    http: reqwest::Client,
    server_url: String,
    token: Secret,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(http: reqwest::Client, server_url: &str, token: Secret) -> Fetcher {
        let server_url = server_url.trim_end_matches('/').to_owned();
        Fetcher {
            origins: Origins::of([server_url.as_str()]),
            http,
            server_url,
            token,
        }
    }
}

/// The server's statuses for a file it will not give, said as what they mean.
fn refusal(e: DownloadError) -> DownloadError {
    match e {
        DownloadError::Status(401) => Refusal::Token.into(),
        DownloadError::Status(403) => Refusal::Forbidden.into(),
        DownloadError::Status(404) => Refusal::Gone.into(),
        DownloadError::Status(501) => Refusal::Disabled.into(),
        other => other,
    }
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let id = item
                .id
                .filter(|id| super::api::is_id(id))
                .ok_or(Refusal::NoId)?;
            let url = format!("{}/api/v4/files/{id}", self.server_url);
            let headers = download::authorization(&format!("Bearer {}", self.token.expose()))?;
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            download::get(&self.http, &url, headers, &self.origins, limits)
                .await
                .map_err(refusal)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_refusals_are_said_as_what_they_mean() {
        let said = |status| refusal(DownloadError::Status(status)).to_string();
        assert!(said(401).contains("token"));
        assert!(said(403).contains("may not read"));
        assert!(said(404).contains("gone"));
        assert_eq!(refusal(DownloadError::Status(500)), DownloadError::Status(500));
    }

    #[tokio::test]
    async fn only_an_id_goes_into_the_path() {
        let fetcher = Fetcher::new(
            download::client().unwrap(),
            "http://127.0.0.1:9",
            Secret::new("t".into()),
        );
        for bad in [None, Some(""), Some("../../users/me"), Some("ABCDEFGHIJKLMNOPQRSTUVWXYZ")] {
            let item = Item {
                id: bad,
                url: None,
                message: None,
                kind: "document",
                extra: None,
            };
            let refused = fetcher.fetch(item).await.err();
            assert_eq!(refused, Some(Refusal::NoId.into()), "{bad:?}");
        }
    }
}
