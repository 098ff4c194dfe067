//! A message's image, file or video: `GET` its `url` with no credential (the link is presigned,
//! "该url五分钟内有效", docs path/100719; the SDK's `downloadFileRaw` sends nothing but the
//! request), then decrypted as it streams with the message's `aeskey` (`file_cipher.rs`) into
//! the store. The SDK's `WSClient.downloadFile(url, aesKey)` is the reference
//! (`@wecom/aibot-node-sdk` 1.0.7 `dist/index.cjs.js`).
//!
//! **Where a link may point.** The link is the platform's word, and so hostile input. The
//! docs' every example link is on one Tencent Cloud COS bucket,
//! `ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com` (documented as an example, not as
//! a list); a bucket's host is `<name>-<APPID>.cos.<region>.myqcloud.com`, and only the
//! account 1258476243 makes buckets with its APPID. So a link is fetched only over `https` on
//! port 443 from a bucket of that account whose name starts `ww-aibot-`, in any region
//! (**inferred**: another region or a sibling bucket for files is a guess at what WeCom may
//! use, bounded to its own account; other tenants' buckets under `myqcloud.com` are refused).
//! Or from the origin of the adapter's own `url` (`ws` read as `http`, `wss` as `https`: the
//! mock in tests, a privately deployed WeCom). A redirect is followed only within the link's
//! own origin (`media/download.rs`). Anything else is said in the message as not fetched.
//!
//! **Key.** The long connection gives each link its `aeskey`. The SDK hands back the raw bytes
//! when a message has none; the gateway does not, since those bytes are ciphertext, not the
//! file: a link without its key is said as not fetched.
//!
//! **Size.** WeCom calls back files up to 100 MB ("智能机器人目前仅支持100M大小以内的文件回调");
//! [`MAX_BYTES`] is the 50 MiB the other wings fetch for an agent (the store's quota is
//! 512 MiB), counted on the bytes as served (the plaintext is at most that). A larger file is
//! said as not fetched, by its `Content-Length` before a byte is read, else as it streams.
//!
//! **Name.** The SDK reads the file's name from the download's `Content-Disposition`
//! (`filename*=UTF-8''…` or `filename=`); the callback itself names none. The store's shared
//! download reads it the same way (`media/download.rs`, `Body::file_name`) for an item whose
//! message names none.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::Url;

use super::file_cipher::{Decryptor, Key};
use crate::media::download::{self, Decode, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

/// The most fetched of one file for the agent (see the module's doc).
const MAX_BYTES: u64 = 50 * 1024 * 1024;
/// The download, start to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The Tencent Cloud account of the docs' bucket (`ww-aibot-img-1258476243`).
const COS_APPID: &str = "1258476243";
/// A presigned COS link is a few hundred characters; a longer one is not WeCom's.
const MAX_LINK: usize = 4096;

pub struct Fetcher {
    http: reqwest::Client,
    /// The adapter's own `url`'s origin, the only non-COS origin a link may point to.
    own: Origins,
}

impl Fetcher {
    /// `url` is the adapter's long connection (`wss://…`, or `ws://` to loopback in tests).
    pub(super) fn new(http: reqwest::Client, url: &str) -> Fetcher {
        Fetcher {
            http,
            own: Origins::of([http_of(url).as_str()]),
        }
    }
}

/// The long connection's address read as its HTTP origin's: `wss` as `https`, `ws` as `http`.
fn http_of(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("wss://") {
        format!("https://{rest}")
    } else if let Some(rest) = url.strip_prefix("ws://") {
        format!("http://{rest}")
    } else {
        url.to_owned()
    }
}

/// Whether a link may be fetched: a `ww-aibot-*` bucket of WeCom's COS account over https on
/// 443, or the adapter's own origin exactly (see the module's doc).
fn allowed(url: &Url, own: &Origins) -> bool {
    if own.allows(url) {
        return true;
    }
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    url.scheme() == "https"
        && url.port_or_known_default() == Some(443)
        && url.username().is_empty()
        && url.password().is_none()
        && wecom_bucket(&host)
}

/// `ww-aibot-<name>-1258476243.cos.<region>.myqcloud.com`, each label of the DNS alphabet.
fn wecom_bucket(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    let [bucket, "cos", region, "myqcloud", "com"] = labels.as_slice() else {
        return false;
    };
    let dns = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let own = bucket
        .strip_prefix("ww-aibot-")
        .and_then(|rest| rest.strip_suffix(COS_APPID))
        .and_then(|name| name.strip_suffix('-'))
        .is_some_and(|name| !name.is_empty());
    own && dns(bucket) && dns(region)
}

/// WeCom's cipher as a download's decoding.
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

/// COS's statuses for a link it will not serve, said as what they likely mean.
fn refusal(e: DownloadError) -> DownloadError {
    match e {
        DownloadError::Status(403) => DownloadError::Refused(
            "WeCom's file host refused the link (HTTP 403); a link is valid five minutes".into(),
        ),
        DownloadError::Status(404) => {
            DownloadError::Refused("WeCom's file host says the file is gone (HTTP 404)".into())
        }
        other => other,
    }
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let refused = |why: &str| DownloadError::Refused(why.to_owned());
            let link = item
                .url
                .filter(|u| !u.is_empty() && u.len() <= MAX_LINK)
                .ok_or_else(|| refused("the message named no link to the file"))?;
            let key = item
                .extra
                .ok_or_else(|| refused("the file came without its key (aeskey)"))?;
            let key = Key::from_aeskey(key).map_err(|e| DownloadError::Undecodable(e.to_string()))?;
            let url = Url::parse(link).map_err(|_| DownloadError::NotAUrl)?;
            if !allowed(&url, &self.own) {
                let host: String = url.host_str().unwrap_or("none").chars().take(80).collect();
                tracing::warn!(%host, "a WeCom file link is not on WeCom's hosts; not fetched");
                return Err(DownloadError::Origin { host });
            }
            // Redirects stay within the link's own origin.
            let origins = Origins::of([link]);
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            let body = download::get(&self.http, link, HeaderMap::new(), &origins, limits)
                .await
                .map_err(refusal)?;
            Ok(body.decoded(Box::new(Decrypt(Decryptor::new(&key)))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wecom_s_buckets_and_the_adapter_s_own_origin_are_fetched_from() {
        let own = Origins::of([http_of("ws://127.0.0.1:4100/wecom/aibot").as_str()]);
        let ok = |u: &str| allowed(&Url::parse(u).unwrap(), &own);
        assert!(ok(
            "https://ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com/BHoPdA3/7571?sign=q"
        ));
        assert!(ok("https://ww-aibot-file-1258476243.cos.ap-shanghai.myqcloud.com/x"));
        assert!(ok("http://127.0.0.1:4100/wecom/files/1?sign=mock"));
        for bad in [
            "http://ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com/x",
            "https://ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com:8443/x",
            "https://ww-aibot-img-1258476244.cos.ap-guangzhou.myqcloud.com/x",
            "https://evil-1258476243.cos.ap-guangzhou.myqcloud.com/x",
            "https://ww-aibot--1258476243.cos.ap-guangzhou.myqcloud.com/x",
            "https://ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com.evil.example/x",
            "https://x.ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com/x",
            "https://user:pw@ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com/x",
            "http://127.0.0.1:4101/x",
            "http://169.254.169.254/latest",
        ] {
            assert!(!ok(bad), "{bad}");
        }
        let prod = Origins::of([http_of("wss://openws.work.weixin.qq.com").as_str()]);
        assert!(prod.allows(&Url::parse("https://openws.work.weixin.qq.com/f").unwrap()));
    }

    #[test]
    fn cos_s_refusals_are_said_as_what_they_mean() {
        assert!(refusal(DownloadError::Status(403)).to_string().contains("five minutes"));
        assert!(refusal(DownloadError::Status(404)).to_string().contains("gone"));
        assert_eq!(refusal(DownloadError::Status(500)), DownloadError::Status(500));
    }

    #[tokio::test]
    async fn no_link_no_key_or_a_bad_key_is_refused_before_any_request() {
        // Port 9 (discard) on loopback: nothing is ever sent there.
        let fetcher = Fetcher::new(download::client().unwrap(), "ws://127.0.0.1:9/wecom/aibot");
        let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let link = "http://127.0.0.1:9/wecom/files/1";
        for (url, extra, says) in [
            (None, Some(key), "no link"),
            (Some(link), None, "without its key"),
            (Some(link), Some("short"), "base64 of 32 bytes"),
            (Some("https://evil.example/x"), Some(key), "evil.example"),
        ] {
            let item = Item {
                id: None,
                url,
                message: None,
                kind: "photo",
                extra,
            };
            let why = fetcher.fetch(item).await.err().unwrap().to_string();
            assert!(why.contains(says), "{why}");
        }
    }
}
