//! A message's file, from Slack's file host: `GET url_private_download` (or `url_private`)
//! with `Authorization: Bearer` and the bot token, which needs the `files:read` scope ("Both
//! `url_private` and `url_private_download` require an authorization header ... bearing at
//! least the `files:read` scope", api.slack.com/types/file, "Authentication").
//!
//! **The URL is the event's word**, and so hostile input: it is fetched only from Slack's file
//! host ([`FILE_HOST`], where `url_private*` point) and the adapter's API base (a mock in
//! tests), never anywhere else, and the bot token goes nowhere else either
//! (`media/download.rs`; a redirect is followed only between those). Enterprise Grid or
//! GovSlack file hosts are not on the list (**inferred**: none is documented): such a file is
//! said in the message as not fetched, never fetched from an unchecked host.
//!
//! **A 200 is not always the file.** A token Slack does not take, or one without
//! `files:read`, gets HTTP 200 with an HTML sign-in page instead of the bytes
//! (vercel/eve#1567; docs/research/media-platforms.md §6). An answer of `text/html` is
//! therefore refused, never stored as a "document": a sign-in page would sniff as text and be
//! put into the agent's text. The cost: an HTML file a person shares is not fetched either
//! (it is said in the message), since its answer cannot be told from the sign-in page.
//!
//! **A Slack Connect file** comes as `{"id", "mode": "file_access", "file_access":
//! "check_file_info"}` with no URL ("further action is required from your app",
//! api.slack.com/apis/channels-between-orgs#check_file_info): the full object is asked of
//! `files.info` (`GET /api/files.info?file=ID`, "Preferred HTTP method: GET", form arguments
//! only; `files:read`), and its URL fetched as any other. An external file (Google Drive,
//! Dropbox: `is_external`) has no bytes on Slack and is said as such.
//!
//! **Size.** Slack documents no download limit; its upload limit is 1 GB. [`MAX_BYTES`] is
//! 50 MiB, what Feishu and Matrix fetch: an agent reads a document or looks at a photo, and a
//! file of hundreds of megabytes would take most of the store's 512 MiB quota (and a minute's
//! fetch) for something no model reads whole. A larger file is said as not fetched; the
//! `size` `files.info` gives is checked before a byte is fetched, the rest as it streams.

use std::time::Duration;

use serde_json::Value;

use crate::config::Secret;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// Where Slack's `url_private*` (and its upload URLs) point.
pub(super) const FILE_HOST: &str = "https://files.slack.com";
/// The most fetched of one file for the agent (see the module's doc).
const MAX_BYTES: u64 = 50 * 1024 * 1024;
/// The download, start to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);
/// `files.info`, before the download.
const INFO_TIMEOUT: Duration = Duration::from_secs(20);
/// A `files.info` answer is a file object and a page of comments: a few KB, more with a
/// snippet's preview.
const MAX_INFO: usize = 1024 * 1024;

/// Why Slack did not give a file, in words the agent is given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum Refusal {
    #[error(
        "Slack answered its sign-in page instead of the file: the bot token is not valid or \
         lacks the files:read scope (or the file is an HTML page, which cannot be told apart)"
    )]
    SignInPage,
    #[error(
        "the bot token lacks the files:read scope (files.info: missing_scope): add it under \
         the app's OAuth & Permissions and reinstall the app"
    )]
    MissingScope,
    #[error("Slack refuses the bot token (files.info: {0})")]
    Token(String),
    #[error("Slack says the file is gone (files.info: {0})")]
    Gone(String),
    #[error("files.info answered {0}")]
    Info(String),
    #[error("files.info answered something that is not a file object")]
    NotAFile,
    #[error("the file is not on Slack (an external file, {0})")]
    External(String),
    #[error("Slack gave no address for the file")]
    NoUrl,
    #[error("the file has neither an address nor an id to look it up by")]
    NoId,
}

impl From<Refusal> for DownloadError {
    fn from(r: Refusal) -> Self {
        DownloadError::Refused(r.to_string())
    }
}

pub struct Fetcher {
    http: reqwest::Client,
    api_base: String,
    token: Secret,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(http: reqwest::Client, api_base: &str, token: Secret) -> Fetcher {
        let api_base = api_base.trim_end_matches('/').to_owned();
        Fetcher {
            origins: Origins::of([FILE_HOST, api_base.as_str()]),
            http,
            api_base,
            token,
        }
    }

    /// The file object `files.info` gives for file `id`.
    async fn file_info(&self, id: &str) -> Result<Value, DownloadError> {
        let id = file_id(id).ok_or(Refusal::NoId)?;
        let send = self
            .http
            // `id` is letters and digits only: nothing in it needs escaping.
            .get(format!("{}/api/files.info?file={id}", self.api_base))
            .headers(download::authorization(&format!(
                "Bearer {}",
                self.token.expose()
            ))?)
            .send();
        let transport = |e: reqwest::Error| {
            DownloadError::Transport(crate::error_chain::one_line(&e.without_url()))
        };
        let timeout = || DownloadError::Timeout(INFO_TIMEOUT.as_secs());
        let deadline = tokio::time::Instant::now() + INFO_TIMEOUT;
        let mut response = tokio::time::timeout_at(deadline, send)
            .await
            .map_err(|_| timeout())?
            .map_err(transport)?;
        if !response.status().is_success() {
            return Err(DownloadError::Status(response.status().as_u16()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .map_err(|_| timeout())?
            .map_err(transport)?
        {
            if body.len() + chunk.len() > MAX_INFO {
                return Err(Refusal::Info("at length".into()).into());
            }
            body.extend_from_slice(&chunk);
        }
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        info_file(answer).map_err(DownloadError::from)
    }
}

/// The file object of a `files.info` answer, or Slack's refusal.
fn info_file(mut answer: Value) -> Result<Value, Refusal> {
    if answer["ok"] != true {
        let error = answer["error"].as_str().unwrap_or("no answer");
        return Err(match error {
            "missing_scope" | "no_permission" => Refusal::MissingScope,
            "file_not_found" | "file_deleted" => Refusal::Gone(error.to_owned()),
            "not_authed" | "invalid_auth" | "token_revoked" | "account_inactive" => {
                Refusal::Token(error.to_owned())
            }
            other => Refusal::Info(crate::safe_text::clip(other, 80)),
        });
    }
    let file = answer["file"].take();
    file.is_object().then_some(file).ok_or(Refusal::NotAFile)
}

/// Where file object `f` is served, within [`MAX_BYTES`] by its `size`.
fn url_of(f: &Value) -> Result<String, DownloadError> {
    if f["size"].as_u64().is_some_and(|n| n > MAX_BYTES) {
        return Err(DownloadError::TooLarge { max: MAX_BYTES });
    }
    if f["is_external"] == true || f["mode"] == "external" {
        let kind = f["external_type"].as_str().filter(|t| !t.is_empty());
        let kind = crate::safe_text::clip(kind.unwrap_or("elsewhere"), 40);
        return Err(Refusal::External(kind).into());
    }
    if f["mode"] == "tombstone" {
        return Err(Refusal::Gone("tombstone".into()).into());
    }
    let url = |key: &str| f[key].as_str().filter(|u| !u.is_empty());
    url("url_private_download")
        .or_else(|| url("url_private"))
        .map(str::to_owned)
        .ok_or_else(|| Refusal::NoUrl.into())
}

/// A file id as it may go into a query: Slack's ids are capitals and digits (`F0S43PZDF`).
fn file_id(id: &str) -> Option<&str> {
    (!id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some(id)
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let url = match item.url {
                Some(url) => url.to_owned(),
                None => {
                    let id = item.id.ok_or(Refusal::NoId)?;
                    url_of(&self.file_info(id).await?)?
                }
            };
            let headers = download::authorization(&format!("Bearer {}", self.token.expose()))?;
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            let body = download::get(&self.http, &url, headers, &self.origins, limits).await?;
            let html = body.content_type().is_some_and(|t| {
                let t = t.trim_start().to_ascii_lowercase();
                t.starts_with("text/html") || t.starts_with("application/xhtml")
            });
            if html {
                return Err(Refusal::SignInPage.into());
            }
            Ok(body)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn files_info_gives_the_object_or_says_why_not() {
        let file = json!({"id": "F1", "url_private": "https://files.slack.com/files-pri/T-F1/a"});
        assert_eq!(info_file(json!({"ok": true, "file": file})), Ok(file.clone()));
        let refused = |error: &str| info_file(json!({"ok": false, "error": error})).unwrap_err();
        assert_eq!(refused("missing_scope"), Refusal::MissingScope);
        assert_eq!(refused("file_deleted"), Refusal::Gone("file_deleted".into()));
        assert_eq!(refused("invalid_auth"), Refusal::Token("invalid_auth".into()));
        assert_eq!(refused("ratelimited"), Refusal::Info("ratelimited".into()));
        assert_eq!(info_file(json!({"ok": true})), Err(Refusal::NotAFile));
        assert_eq!(info_file(Value::Null), Err(Refusal::Info("no answer".into())));
    }

    #[test]
    fn a_file_object_gives_its_download_url_unless_it_is_too_large_or_elsewhere() {
        let f = json!({"size": 10, "url_private": "https://files.slack.com/p",
            "url_private_download": "https://files.slack.com/p/download"});
        assert_eq!(url_of(&f).unwrap(), "https://files.slack.com/p/download");
        let only_private =
            json!({"url_private": "https://files.slack.com/p", "url_private_download": ""});
        assert_eq!(url_of(&only_private).unwrap(), "https://files.slack.com/p");
        let big = json!({"size": MAX_BYTES + 1, "url_private": "https://files.slack.com/p"});
        assert_eq!(
            url_of(&big),
            Err(DownloadError::TooLarge { max: MAX_BYTES })
        );
        let gdoc = json!({"is_external": true, "external_type": "gdrive", "mode": "external"});
        assert!(matches!(url_of(&gdoc), Err(DownloadError::Refused(w)) if w.contains("gdrive")));
        assert!(url_of(&json!({"mode": "hosted"})).is_err());
    }

    #[test]
    fn only_an_id_goes_into_the_query() {
        assert_eq!(file_id("F0S43PZDF"), Some("F0S43PZDF"));
        for bad in ["", "F1&file=F2", "../x", "F 1", "F1#", &"F".repeat(65)] {
            assert_eq!(file_id(bad), None, "{bad}");
        }
    }
}
