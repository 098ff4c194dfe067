//! A message's file, from the Open API: "获取消息中的资源文件", `GET {base}/open-apis/im/v1/
//! messages/{message_id}/resources/{file_key}?type=image|file` with the app's
//! `tenant_access_token` (the sender's kind of token, a cache of its own). The key alone is not
//! enough: "the requested file_key and message_id must match", so the fetch names both.
//! `type=image` for an image's `image_key`, `file` for a file's, an audio's or a video's
//! `file_key`. Up to 100 MB is served ("仅支持下载 100 MB 以内的资源文件"); an error comes as
//! JSON `{code, msg}`, told apart by its `Content-Type` (oapi-sdk-python
//! `message_resource.py`), never stored as the file. Served from the API base only
//! (docs/research/media-platforms.md §5).

use std::time::Duration;

use super::token::FeishuToken;
use crate::gateway::adapter::Shared;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// The most fetched for the agent, below Feishu's own 100 MB.
const MAX_BYTES: u64 = 50 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Fetcher {
    http: reqwest::Client,
    token: FeishuToken,
    shared: Shared,
    base: String,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(
        http: reqwest::Client,
        token: FeishuToken,
        shared: Shared,
        api_base: &str,
    ) -> Fetcher {
        let base = api_base.trim_end_matches('/').to_owned();
        Fetcher {
            http,
            token,
            shared,
            origins: Origins::of([base.as_str()]),
            base,
        }
    }
}

/// A path segment of what a platform sent: only the characters Feishu's ids are made of.
fn segment(id: &str) -> Option<&str> {
    (!id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    .then_some(id)
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let refused = |why: &str| DownloadError::Refused(why.to_owned());
            let key = item.id.and_then(segment).ok_or_else(|| refused("the file has no key"))?;
            let message = item
                .message
                .and_then(segment)
                .ok_or_else(|| refused("the file's message has no id"))?;
            let kind = if item.kind == "photo" { "image" } else { "file" };
            let url = format!(
                "{}/open-apis/im/v1/messages/{message}/resources/{key}?type={kind}",
                self.base
            );
            let token = self
                .token
                .get(&self.shared)
                .await
                .map_err(|e| refused(&format!("no tenant access token: {e}")))?;
            let headers = download::authorization(&format!("Bearer {token}"))?;
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            let body = download::get(&self.http, &url, headers, &self.origins, limits).await?;
            if body
                .content_type()
                .is_some_and(|t| t.starts_with("application/json"))
            {
                return Err(refused("Feishu answered an error instead of the file"));
            }
            Ok(body)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::segment;

    #[test]
    fn only_an_id_goes_into_the_path() {
        assert_eq!(segment("img_v3_02ab-Cd"), Some("img_v3_02ab-Cd"));
        for bad in ["", "../x", "a/b", "a?type=file", "a%2Fb", "a b"] {
            assert_eq!(segment(bad), None, "{bad}");
        }
    }
}
