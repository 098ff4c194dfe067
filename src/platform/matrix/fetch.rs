//! A message's file, from the homeserver's content repository: an event's `url` is an
//! `mxc://{serverName}/{mediaId}` URI, fetched with the access token at `GET
//! /_matrix/client/v1/media/download/{serverName}/{mediaId}` (client-server API v1.11,
//! "authenticated media"; Synapse freezes the unauthenticated `/_matrix/media/v3/` for new
//! content, so it is not tried). Encrypted files (`file`, not `url`) are not read: the
//! gateway holds no room keys.

use std::time::Duration;

use crate::config::Secret;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// Synapse's default `max_upload_size` is 50 MiB; more is not fetched for the agent.
const MAX_BYTES: u64 = 50 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Fetcher {
    http: reqwest::Client,
    homeserver: String,
    token: Secret,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(http: reqwest::Client, homeserver: &str, token: Secret) -> Fetcher {
        let homeserver = homeserver.trim_end_matches('/').to_owned();
        Fetcher {
            origins: Origins::of([homeserver.as_str()]),
            http,
            homeserver,
            token,
        }
    }
}

/// `mxc://{serverName}/{mediaId}` as its two parts, each only of what the spec allows: a
/// server name's host characters and port, a media id of `[A-Za-z0-9_-]`. Anything else is
/// not a content URI, and nothing of it goes into a request path.
fn mxc(uri: &str) -> Option<(&str, &str)> {
    let (server, id) = uri.strip_prefix("mxc://")?.split_once('/')?;
    let server_ok = !server.is_empty()
        && server.len() <= 255
        && server
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    let id_ok = !id.is_empty()
        && id.len() <= 255
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    (server_ok && id_ok).then_some((server, id))
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let (server, id) = item.url.and_then(mxc).ok_or_else(|| {
                DownloadError::Refused("the event's url is not an mxc:// content URI".into())
            })?;
            let url = format!(
                "{}/_matrix/client/v1/media/download/{server}/{id}",
                self.homeserver
            );
            let headers = download::authorization(&format!("Bearer {}", self.token.expose()))?;
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
    use super::mxc;

    #[test]
    fn only_a_content_uri_names_a_path() {
        assert_eq!(
            mxc("mxc://example.org/SEsfnsuifSDFSSEF"),
            Some(("example.org", "SEsfnsuifSDFSSEF"))
        );
        assert_eq!(mxc("mxc://[::1]:8448/a_b-c"), Some(("[::1]:8448", "a_b-c")));
        for bad in [
            "https://example.org/x",
            "mxc://example.org/../../x",
            "mxc://example.org/a/b",
            "mxc://ex ample.org/a",
            "mxc:///a",
            "mxc://example.org/",
            "mxc://example.org/a?b",
        ] {
            assert_eq!(mxc(bad), None, "{bad}");
        }
    }
}
