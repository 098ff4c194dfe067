//! A robot message's file: its `downloadCode` (a picture's, a rich text's picture's, a file's,
//! a voice note's, a video's) is exchanged for a temporary link with
//! `POST {base}/v1.0/robot/messageFiles/download` (`{downloadCode, robotCode}`, the app's access
//! token in `x-acs-dingtalk-access-token`; open.dingtalk.com "下载机器人接收消息的文件内容"),
//! answered `{"downloadUrl": …}`, and the link is fetched. The token is the wing's own kind
//! (`token.rs`), in a cache of this fetcher's; it never goes to the link, which is presigned.
//!
//! **Where the link may point.** The link is on another origin than the API, and it is the
//! platform's word, so hostile input. The docs show no host; DingTalk's media host is
//! `down.dingtalk.com` and its files are served from Alibaba Cloud OSS buckets
//! (`<bucket>.oss-<region>.aliyuncs.com`), both **inferred** from public code and reports, not
//! a documented list. So a link is fetched only over `https` on port 443 from a host under
//! `dingtalk.com`, or an OSS host under `aliyuncs.com` (a label starting `oss-`), or from the
//! adapter's API base exactly (a mock in tests); a redirect is followed only within the
//! link's own origin (`media/download.rs`). Anything else is said in the message as not
//! fetched, never fetched.
//!
//! **Size.** The docs give no limit; [`MAX_BYTES`] is the 50 MiB the other wings fetch (an
//! agent reads a document or looks at a photo), and a link that announces or streams more is
//! refused and said.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::Url;
use serde_json::{json, Value};

use super::token::{refuses_credentials, says, DingTalkToken};
use crate::gateway::adapter::Shared;
use crate::media::download::{self, DownloadError, Limits, Origins};
use crate::media::fetch::{Fetch, Fetching, Item};

pub(crate) const DOWNLOAD_PATH: &str = "/v1.0/robot/messageFiles/download";
/// The most fetched of one file for the agent (see the module's doc).
const MAX_BYTES: u64 = 50 * 1024 * 1024;
/// The download, start to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The exchange of the code for a link.
const LINK_TIMEOUT: Duration = Duration::from_secs(20);
/// A download code is an opaque base64 string of a few hundred characters.
const MAX_CODE: usize = 4096;

pub struct Fetcher {
    http: reqwest::Client,
    token: DingTalkToken,
    shared: Shared,
    base: String,
    robot_code: String,
    /// The API base's origin, the only non-DingTalk origin a link may point to.
    api: Origins,
}

impl Fetcher {
    pub(super) fn new(
        http: reqwest::Client,
        token: DingTalkToken,
        shared: Shared,
        api_base: &str,
        robot_code: &str,
    ) -> Fetcher {
        let base = api_base.trim_end_matches('/').to_owned();
        Fetcher {
            http,
            token,
            shared,
            api: Origins::of([base.as_str()]),
            base,
            robot_code: robot_code.to_owned(),
        }
    }

    /// The temporary link `code` is exchanged for.
    async fn link(&self, code: &str) -> Result<String, DownloadError> {
        let refused = |why: String| DownloadError::Refused(why);
        let token = self
            .token
            .get(&self.shared)
            .await
            .map_err(|e| refused(format!("no DingTalk access token: {e}")))?;
        let request = self
            .shared
            .http
            .post(format!("{}{DOWNLOAD_PATH}", self.base))
            .headers(token_header(&token)?)
            .json(&json!({"downloadCode": code, "robotCode": self.robot_code}));
        let (status, v) = tokio::time::timeout(
            LINK_TIMEOUT,
            self.shared.call("messageFiles/download", request),
        )
        .await
        .map_err(|_| DownloadError::Timeout(LINK_TIMEOUT.as_secs()))?
        .map_err(|e| DownloadError::Transport(e.to_string()))?;
        if refuses_credentials(status.as_u16()) {
            self.token.invalidate(&token);
        }
        read_link(status.as_u16(), &v)
    }
}

/// The link of a `messageFiles/download` answer, or DingTalk's refusal in words.
fn read_link(status: u16, v: &Value) -> Result<String, DownloadError> {
    let url = v["downloadUrl"].as_str().filter(|u| !u.is_empty());
    match url {
        Some(url) if (200..300).contains(&status) => Ok(url.to_owned()),
        _ => Err(DownloadError::Refused(format!(
            "DingTalk gave no link for the file (messageFiles/download: HTTP {status}{})",
            says(v)
        ))),
    }
}

fn token_header(token: &str) -> Result<HeaderMap, DownloadError> {
    let mut value = reqwest::header::HeaderValue::from_str(token)
        .map_err(|_| DownloadError::Refused("the access token is not a header".into()))?;
    value.set_sensitive(true);
    let mut headers = HeaderMap::new();
    headers.insert("x-acs-dingtalk-access-token", value);
    Ok(headers)
}

/// Whether a link may be fetched: DingTalk's own hosts or its OSS buckets over https on 443,
/// or the API base's origin exactly (see the module's doc).
fn allowed(url: &Url, api: &Origins) -> bool {
    if api.allows(url) {
        return true;
    }
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    let under = |domain: &str| host.ends_with(&format!(".{domain}"));
    let oss = under("aliyuncs.com") && host.split('.').any(|label| label.starts_with("oss-"));
    url.scheme() == "https"
        && url.port_or_known_default() == Some(443)
        && url.username().is_empty()
        && url.password().is_none()
        && (host == "dingtalk.com" || under("dingtalk.com") || oss)
}

/// A download code as DingTalk writes them: base64 (`+`, `/`, `=`) and URL-safe base64.
fn code(id: &str) -> Option<&str> {
    (!id.is_empty()
        && id.len() <= MAX_CODE
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=_-".contains(&b)))
    .then_some(id)
}

impl Fetch for Fetcher {
    fn fetch<'a>(&'a self, item: Item<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let code = item
                .id
                .and_then(code)
                .ok_or_else(|| DownloadError::Refused("the file has no download code".into()))?;
            let link = self.link(code).await?;
            let url = Url::parse(&link).map_err(|_| DownloadError::NotAUrl)?;
            if !allowed(&url, &self.api) {
                return Err(DownloadError::Origin {
                    host: url.host_str().unwrap_or("none").chars().take(80).collect(),
                });
            }
            // Redirects stay within the link's own origin.
            let origins = Origins::of([link.as_str()]);
            let limits = Limits {
                max_bytes: MAX_BYTES,
                timeout: TIMEOUT,
            };
            let body = download::get(&self.http, &link, HeaderMap::new(), &origins, limits).await?;
            if body
                .content_type()
                .is_some_and(|t| t.trim_start().starts_with("application/json"))
            {
                return Err(DownloadError::Refused(
                    "DingTalk answered an error instead of the file".into(),
                ));
            }
            Ok(body)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dingtalk_its_oss_buckets_and_the_api_base_are_fetched_from() {
        let api = Origins::of(["http://127.0.0.1:4100"]);
        let ok = |u: &str| allowed(&Url::parse(u).unwrap(), &api);
        assert!(ok("https://down.dingtalk.com/ddmedia/a.png"));
        assert!(ok("https://dingtalk-im.oss-cn-zhangjiakou.aliyuncs.com/a?Expires=1"));
        assert!(ok("http://127.0.0.1:4100/dtfiles/x"));
        for bad in [
            "http://down.dingtalk.com/a",
            "https://down.dingtalk.com:8443/a",
            "https://evildingtalk.com/a",
            "https://dingtalk.com.evil.example/a",
            "https://ecs.aliyuncs.com/a",
            "https://user:pw@down.dingtalk.com/a",
            "http://127.0.0.1:4101/a",
            "http://169.254.169.254/latest",
        ] {
            assert!(!ok(bad), "{bad}");
        }
    }

    #[test]
    fn a_link_or_dingtalk_s_word_why_not() {
        let v = json!({"downloadUrl": "https://down.dingtalk.com/x"});
        assert_eq!(read_link(200, &v).unwrap(), "https://down.dingtalk.com/x");
        let v = json!({"code": "resource.not.found", "message": "下载码无效"});
        let why = read_link(400, &v).unwrap_err().to_string();
        assert!(why.contains("resource.not.found") && why.contains("HTTP 400"), "{why}");
        assert!(read_link(200, &json!({"downloadUrl": ""})).is_err());
    }

    #[test]
    fn only_a_code_goes_into_the_request() {
        assert_eq!(code("mIofN+a/b=="), Some("mIofN+a/b=="));
        for bad in ["", "a b", "a\"b", "a\nb", &"a".repeat(MAX_CODE + 1)] {
            assert_eq!(code(bad), None, "{bad:?}");
        }
    }
}
