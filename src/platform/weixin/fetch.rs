//! A message's file, from Weixin's CDN: `GET full_url` when the item has one ("The client
//! prefers `full_url`"), else `GET {cdn_base}/download?encrypted_query_param=<the item's
//! encrypt_query_param>`, with no credential at all (neither Tencent's plugin nor Hermes sends
//! one: `src/cdn/pic-decrypt.ts` `fetchCdnBytes`), then decrypted as it streams
//! ([`cdn_cipher`](super::cdn_cipher): AES-128-ECB, PKCS#7) into the store. Tencent's
//! `docs/protocol.md`, "CDN media reference" and "Download"; docs/research/media-platforms.md §7.
//!
//! Only from the CDN: the configured `cdn-base` and Tencent's documented default host. The
//! host of a server-given `full_url` is not documented; one elsewhere is refused (and said to
//! the agent), never followed. An image without a key is plain on the CDN (Tencent's
//! `downloadPlainCdnBuffer`); any other kind without one is refused, as Tencent skips it.
//! Up to 100 MiB, Tencent's own cap (`WEIXIN_MEDIA_MAX_BYTES`, `src/media/media-download.ts`).
//! A voice note is SILK, stored as such (`voice.silk`): Tencent transcodes it to WAV when it
//! can; the gateway does not, and iLink's transcript, when it sends one, is the message's text.

use std::time::Duration;

use reqwest::header::HeaderMap;

use super::cdn_cipher::{Decryptor, Key};
use super::config::CDN_BASE;
use super::normalise::BAD_KEY;
use crate::media::download::{self, Decode, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// Tencent's cap on a file it fetches.
const MAX_BYTES: u64 = 100 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Fetcher {
    http: reqwest::Client,
    cdn_base: String,
    origins: Origins,
}

impl Fetcher {
    pub(super) fn new(http: reqwest::Client, cdn_base: &str) -> Fetcher {
        let cdn_base = cdn_base.trim_end_matches('/').to_owned();
        Fetcher {
            http,
            origins: origins(&cdn_base),
            cdn_base,
        }
    }
}

/// Where files may come from and go to: the configured CDN and the documented one.
pub(super) fn origins(cdn_base: &str) -> Origins {
    Origins::of([cdn_base, CDN_BASE])
}

/// `{cdn_base}/{action}?{query}`, each value of `query` percent-encoded.
pub(super) fn cdn_url(cdn_base: &str, action: &str, query: &[(&str, &str)]) -> String {
    let mut url = format!("{}/{action}", cdn_base.trim_end_matches('/'));
    for (n, (k, v)) in query.iter().enumerate() {
        url.push(if n == 0 { '?' } else { '&' });
        url.push_str(k);
        url.push('=');
        url.extend(url_escape(v));
    }
    url
}

/// A query value with everything but the unreserved characters percent-encoded.
fn url_escape(v: &str) -> impl Iterator<Item = char> + '_ {
    v.bytes().flat_map(|b| {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~');
        let s: Vec<char> = if plain {
            vec![char::from(b)]
        } else {
            format!("%{b:02X}").chars().collect()
        };
        s.into_iter()
    })
}

/// The CDN's cipher as a download's decoding.
struct Decrypt(Decryptor);

impl Decode for Decrypt {
    fn update(&mut self, chunk: &[u8]) -> Result<Vec<u8>, DownloadError> {
        Ok(self.0.update(chunk))
    }

    fn finish(&mut self) -> Result<Vec<u8>, DownloadError> {
        self.0
            .finish()
            .map_err(|e| DownloadError::Undecodable(e.to_string()))
    }
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let refused = |why: &str| DownloadError::Refused(why.to_owned());
            let key = match item.extra {
                Some(BAD_KEY) => {
                    return Err(DownloadError::Undecodable(
                        "its key is not 16 bytes (neither hex nor base64 of 16 bytes or of their hex)".into(),
                    ))
                }
                Some(hex) => Some(Key::from_hex(hex).map_err(|e| refused(&e.to_string()))?),
                None if item.kind == "photo" => None,
                None => return Err(refused("the file came without its key")),
            };
            let url = match (item.url, item.id) {
                (Some(full), _) => full.to_owned(),
                (None, Some(param)) if !param.is_empty() && param.len() <= 4096 => cdn_url(
                    &self.cdn_base,
                    "download",
                    &[("encrypted_query_param", param)],
                ),
                _ => return Err(refused("the file has no address on the CDN")),
            };
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            let body = download::get(&self.http, &url, HeaderMap::new(), &self.origins, limits)
                .await
                .inspect_err(|e| {
                    if let DownloadError::Origin { host } = e {
                        tracing::warn!(%host, "a Weixin file's full_url is not on the CDN; not fetched");
                    }
                })?;
            Ok(match key {
                Some(key) => body.decoded(Box::new(Decrypt(Decryptor::new(&key)))),
                None => body,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdn_url_escapes_the_parameter() {
        assert_eq!(
            cdn_url("http://127.0.0.1:9/c2c/", "download", &[("encrypted_query_param", "a+b/c=&d")]),
            "http://127.0.0.1:9/c2c/download?encrypted_query_param=a%2Bb%2Fc%3D%26d"
        );
        assert_eq!(
            cdn_url(CDN_BASE, "upload", &[("encrypted_query_param", "p"), ("filekey", "k")]),
            "https://novac2c.cdn.weixin.qq.com/c2c/upload?encrypted_query_param=p&filekey=k"
        );
    }

    #[test]
    fn only_the_cdn_is_an_origin() {
        let o = origins("http://127.0.0.1:8080/c2c");
        let ok = |u: &str| o.allows(&reqwest::Url::parse(u).unwrap());
        assert!(ok("http://127.0.0.1:8080/c2c/download?x=1"));
        assert!(ok("https://novac2c.cdn.weixin.qq.com/c2c/download?x=1"));
        assert!(!ok("http://127.0.0.1:8081/c2c/download"));
        assert!(!ok("https://evil.example/c2c/download"));
    }
}
