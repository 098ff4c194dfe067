//! A message's attachment, from Discord's CDN: the Attachment object's `url`
//! (`https://cdn.discordapp.com/attachments/...`, signed, and so expiring: fetched when the
//! turn starts, which is soon after it arrived). No credential is needed, and none is sent: the
//! URL is the message's, and so hostile input, fetched only from Discord's own CDN hosts or the
//! adapter's configured API base (a test mock).

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// The most fetched for the agent. Discord's own upload limit depends on the uploader (10 MiB
/// by default today, more with Nitro or a boosted server: docs/research/media-platforms.md);
/// a larger file is said in the text as not fetched.
const MAX_BYTES: u64 = 25 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);
/// Where Discord serves attachments.
const CDN: [&str; 2] = ["https://cdn.discordapp.com", "https://media.discordapp.net"];

pub struct Fetcher {
    http: reqwest::Client,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(http: reqwest::Client, api_base: &str) -> Fetcher {
        Fetcher {
            http,
            origins: Origins::of(CDN.into_iter().chain([api_base])),
        }
    }
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let url = item
                .url
                .ok_or_else(|| DownloadError::Refused("the attachment has no url".into()))?;
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            download::get(&self.http, url, HeaderMap::new(), &self.origins, limits).await
        })
    }
}
