//! A message's attachment, from QQ's multimedia host: the attachment's `url`, fetched with the
//! bot's `Authorization: QQBot <access token>` (the app token the REST API uses, one cache per
//! credential, `token.rs`), without which the host does not answer with the file
//! (docs/research/media-platforms.md §4: hermes-agent's QQ adapter; the official docs say
//! nothing of it). A URL may come without its scheme (`//host/…`): it is read as HTTPS.

use std::sync::Arc;
use std::time::Duration;

use super::token::QqToken;
use crate::gateway::adapter::Shared;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// The most fetched for the agent; QQ documents no download limit.
const MAX_BYTES: u64 = 20 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);
/// Where QQ serves attachments: group and C2C files, and (seen in the field, not documented)
/// guild images.
const HOSTS: [&str; 2] = ["https://multimedia.nt.qq.com.cn", "https://gchat.qpic.cn"];

pub struct Fetcher {
    http: reqwest::Client,
    token: Arc<QqToken>,
    shared: Shared,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(
        http: reqwest::Client,
        token: Arc<QqToken>,
        shared: Shared,
        api_base: &str,
    ) -> Fetcher {
        Fetcher {
            http,
            token,
            shared,
            origins: Origins::of(HOSTS.into_iter().chain([api_base])),
        }
    }
}

/// `url` with a scheme: QQ sends some as `//host/path`, or as `host/path`.
fn with_scheme(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("//") {
        format!("https://{rest}")
    } else if url.contains("://") {
        url.to_owned()
    } else {
        format!("https://{url}")
    }
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let url = item
                .url
                .map(with_scheme)
                .ok_or_else(|| DownloadError::Refused("the attachment has no url".into()))?;
            let token = self
                .token
                .get(&self.shared)
                .await
                .map_err(|e| DownloadError::Refused(format!("no access token: {e}")))?;
            let headers = download::authorization(&format!("QQBot {token}"))?;
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            download::get(&self.http, &url, headers, &self.origins, limits).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::with_scheme;

    #[test]
    fn a_url_without_its_scheme_is_https() {
        assert_eq!(
            with_scheme("//multimedia.nt.qq.com.cn/download?fileid=1"),
            "https://multimedia.nt.qq.com.cn/download?fileid=1"
        );
        assert_eq!(with_scheme("gchat.qpic.cn/x"), "https://gchat.qpic.cn/x");
        assert_eq!(with_scheme("http://127.0.0.1:1/d"), "http://127.0.0.1:1/d");
    }
}
