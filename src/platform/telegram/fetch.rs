//! A message's file, from the Bot API: `getFile` with its `file_id` gives a `file_path`, and the
//! file is at `API_BASE/file/bot<token>/<file_path>` ("bots can download files of up to 20MB
//! in size"; core.telegram.org/bots/api#getfile). That URL holds the token, so it is never
//! logged, never in an error, and never given to the agent: the agent gets the stored file.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use crate::config::Secret;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// "bots can download files of up to 20MB in size".
const MAX_BYTES: u64 = 20 * 1000 * 1000;
/// A `getFile` answer is a few hundred bytes.
const MAX_ANSWER: usize = 64 * 1024;
/// The whole fetch of one file, `getFile` included.
const TIMEOUT: Duration = Duration::from_secs(60);

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
            origins: Origins::of([api_base.as_str()]),
            http,
            api_base,
            token,
        }
    }

    /// The file's `file_path`, from `getFile`.
    async fn file_path(&self, file_id: &str) -> Result<String, DownloadError> {
        let url = format!("{}/bot{}/getFile", self.api_base, self.token.expose());
        let send = self.http.post(url).json(&json!({ "file_id": file_id })).send();
        let mut response = tokio::time::timeout(TIMEOUT, send)
            .await
            .map_err(|_| DownloadError::Timeout(TIMEOUT.as_secs()))?
            .map_err(|e| DownloadError::Transport(crate::error_chain::one_line(&e.without_url())))?;
        let mut body = Vec::new();
        while let Some(chunk) = tokio::time::timeout(TIMEOUT, response.chunk())
            .await
            .map_err(|_| DownloadError::Timeout(TIMEOUT.as_secs()))?
            .map_err(|e| DownloadError::Transport(crate::error_chain::one_line(&e.without_url())))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(DownloadError::Refused("getFile answered at length".into()));
            }
            body.extend_from_slice(&chunk);
        }
        let v: Value = serde_json::from_slice(&body).unwrap_or_default();
        if v["ok"] != json!(true) {
            let said = v["description"].as_str().unwrap_or("no description");
            return Err(DownloadError::Refused(crate::safe_text::clip(said, 200)));
        }
        if v["result"]["file_size"]
            .as_u64()
            .is_some_and(|n| n > MAX_BYTES)
        {
            return Err(DownloadError::TooLarge { max: MAX_BYTES });
        }
        let path = v["result"]["file_path"].as_str().unwrap_or("");
        // A path is the server's to give, and only ever a relative path of plain segments.
        let plain = !path.is_empty()
            && !path.starts_with('/')
            && path
                .split('/')
                .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
            && !path.contains(['?', '#', '\\', '%'])
            && !path.chars().any(char::is_control);
        if !plain {
            return Err(DownloadError::Refused(
                "getFile gave no file path it can be fetched at (a file over 20 MB has none)"
                    .into(),
            ));
        }
        Ok(path.to_owned())
    }
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let id = item
                .id
                .ok_or_else(|| DownloadError::Refused("the message names no file_id".into()))?;
            let path = self.file_path(id).await?;
            let url = format!(
                "{}/file/bot{}/{path}",
                self.api_base,
                self.token.expose()
            );
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            download::get(&self.http, &url, HeaderMap::new(), &self.origins, limits).await
        })
    }
}
