//! One file fetched from a platform, as a stream the store writes to disk: never whole in
//! memory, never from anywhere but the platform's own origins, never longer than its cap.
//!
//! A URL in an event is the platform's word, and so hostile input: a link to loopback, to the
//! metadata service, or to another host is refused before a connection is made. The origins a
//! wing allows are its configured API base (a local Bot API server, a test mock) and the hosts
//! the platform documents for its files; a redirect is followed only to one of them, at most
//! [`MAX_REDIRECTS`] times. The body is cut off past the cap, and past the length the server
//! announced: a server that sends more than it said is not believed about the rest. No error
//! carries the URL: a platform's file URL may hold the bot's token.

use std::time::Duration;

use reqwest::header::{HeaderMap, LOCATION};
use reqwest::{Client, Response, StatusCode, Url};

/// Redirects followed at most, each to an allowed origin.
pub const MAX_REDIRECTS: usize = 3;

/// Where a wing's files may come from: `scheme://host[:port]`, exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origins(Vec<(String, String, u16)>);

impl Origins {
    /// The origins of `bases` (URLs; only their scheme, host and port count). A base that is not
    /// a URL with a host is left out: nothing is ever fetched from it.
    pub fn of<'a>(bases: impl IntoIterator<Item = &'a str>) -> Origins {
        Origins(
            bases
                .into_iter()
                .filter_map(|b| Url::parse(b).ok())
                .filter_map(|u| origin(&u))
                .collect(),
        )
    }

    /// Whether `url` is on one of these origins, with no user name or password in it.
    pub fn allows(&self, url: &Url) -> bool {
        url.username().is_empty()
            && url.password().is_none()
            && origin(url).is_some_and(|o| self.0.contains(&o))
    }
}

fn origin(url: &Url) -> Option<(String, String, u16)> {
    let scheme = url.scheme();
    if scheme != "https" && scheme != "http" {
        return None;
    }
    Some((
        scheme.to_owned(),
        url.host_str()?.to_ascii_lowercase(),
        url.port_or_known_default()?,
    ))
}

/// How much one file may be, and how long its fetch may take, start to last byte.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: u64,
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DownloadError {
    #[error(
        "the file's address is not on the platform's own hosts ({host}), so it was not fetched"
    )]
    Origin { host: String },
    #[error("the file's address is not a URL")]
    NotAUrl,
    #[error("the platform answered HTTP {0} for the file")]
    Status(u16),
    #[error("the file is larger than {max} bytes")]
    TooLarge { max: u64 },
    #[error("the server sent more than the {announced} bytes it announced")]
    LongerThanAnnounced { announced: u64 },
    #[error("the file did not arrive within {0} s")]
    Timeout(u64),
    #[error("the platform's file server could not be reached: {0}")]
    Transport(String),
    #[error("more than {MAX_REDIRECTS} redirects")]
    Redirects,
    #[error("the platform would not give the file: {0}")]
    Refused(String),
    #[error("the file could not be decoded: {0}")]
    Undecodable(String),
}

/// A wing's decoding of a file as it streams, for a platform that serves its files encrypted
/// or otherwise encoded: what it gives is what the store keeps. The limits hold for
/// the bytes as served.
pub trait Decode: Send {
    /// The decoded bytes `chunk` completes (perhaps none yet: a cipher holds a part block).
    fn update(&mut self, chunk: &[u8]) -> Result<Vec<u8>, DownloadError>;
    /// The rest, at the end of the body: an error when the body did not end as it must.
    fn finish(&mut self) -> Result<Vec<u8>, DownloadError>;
}

/// The `Authorization` header `value` (`Bearer TOKEN`, `QQBot TOKEN`), marked sensitive so that
/// no debug output of a request shows it.
pub fn authorization(value: &str) -> Result<HeaderMap, DownloadError> {
    let mut header = reqwest::header::HeaderValue::from_str(value)
        .map_err(|_| DownloadError::Refused("the access token is not a header".into()))?;
    header.set_sensitive(true);
    let mut headers = HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, header);
    Ok(headers)
}

/// A client for downloads: redirects are this module's to follow (only to an allowed origin),
/// never reqwest's.
pub fn client() -> Result<Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The answer to `GET url`, its status a success, after allowed redirects; its body is for
/// [`Body`] to read within `limits`.
pub async fn get(
    http: &Client,
    url: &str,
    headers: HeaderMap,
    origins: &Origins,
    limits: Limits,
) -> Result<Body, DownloadError> {
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let mut url = Url::parse(url).map_err(|_| DownloadError::NotAUrl)?;
    for _ in 0..=MAX_REDIRECTS {
        if !origins.allows(&url) {
            return Err(DownloadError::Origin {
                host: url.host_str().unwrap_or("none").chars().take(80).collect(),
            });
        }
        let send = http.get(url.clone()).headers(headers.clone()).send();
        let response = tokio::time::timeout_at(deadline, send)
            .await
            .map_err(|_| DownloadError::Timeout(limits.timeout.as_secs()))?
            .map_err(|e| {
                DownloadError::Transport(crate::error_chain::one_line(&e.without_url()))
            })?;
        let status = response.status();
        if status.is_redirection() {
            let next = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok())
                .ok_or(DownloadError::Status(status.as_u16()))?;
            url = next;
            continue;
        }
        if status != StatusCode::OK {
            return Err(DownloadError::Status(status.as_u16()));
        }
        let announced = response.content_length();
        if announced.is_some_and(|n| n > limits.max_bytes) {
            return Err(DownloadError::TooLarge {
                max: limits.max_bytes,
            });
        }
        return Ok(Body {
            response,
            announced,
            read: 0,
            limits,
            deadline,
            decode: None,
            ended: false,
        });
    }
    Err(DownloadError::Redirects)
}

/// Where the store reads a file from, chunk by chunk, each source within its own limits: a
/// platform's download, or a local client's upload. An error ends it: what was read is not
/// the file.
pub trait Source: Send {
    fn next_chunk(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<hyper::body::Bytes>, DownloadError>> + Send;
}

/// Bytes already in memory (an image an agent's answer carried inline).
pub struct InMemory(pub Option<hyper::body::Bytes>);

impl Source for InMemory {
    async fn next_chunk(&mut self) -> Result<Option<hyper::body::Bytes>, DownloadError> {
        Ok(self.0.take())
    }
}

impl Source for Body {
    async fn next_chunk(&mut self) -> Result<Option<hyper::body::Bytes>, DownloadError> {
        self.chunk().await
    }
}

/// A body being read, chunk by chunk, within its limits.
pub struct Body {
    response: Response,
    announced: Option<u64>,
    read: u64,
    limits: Limits,
    deadline: tokio::time::Instant,
    /// The wing's decoding, when its platform serves files encoded.
    decode: Option<Box<dyn Decode>>,
    /// Whether the end was reached (and the decoding finished).
    ended: bool,
}

impl Body {
    /// This body as `decode` decodes it, chunk by chunk.
    pub fn decoded(mut self, decode: Box<dyn Decode>) -> Body {
        self.decode = Some(decode);
        self
    }

    /// The type the server said its answer is: a platform that answers an error in JSON on
    /// its file path is told apart by it.
    pub fn content_type(&self) -> Option<&str> {
        self.response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The file's name as the server gave it (`Content-Disposition`, RFC 6266), for an item
    /// whose message names none: some platforms name a file only in its download.
    pub fn file_name(&self) -> Option<String> {
        let header = self
            .response
            .headers()
            .get(reqwest::header::CONTENT_DISPOSITION)?;
        disposition_name(&String::from_utf8_lossy(header.as_bytes()))
    }

    /// The next chunk, decoded if the wing said so, or `None` at the end. An error ends the
    /// body: what was read is not the file.
    pub async fn chunk(&mut self) -> Result<Option<hyper::body::Bytes>, DownloadError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let raw = self.raw_chunk().await?;
            let Some(decode) = self.decode.as_mut() else {
                self.ended = raw.is_none();
                return Ok(raw);
            };
            let out = match raw {
                Some(chunk) => decode.update(&chunk)?,
                None => {
                    self.ended = true;
                    decode.finish()?
                }
            };
            if !out.is_empty() {
                return Ok(Some(out.into()));
            }
        }
    }

    /// The next chunk as the server sent it, within the limits.
    async fn raw_chunk(&mut self) -> Result<Option<hyper::body::Bytes>, DownloadError> {
        let next = tokio::time::timeout_at(self.deadline, self.response.chunk())
            .await
            .map_err(|_| DownloadError::Timeout(self.limits.timeout.as_secs()))?
            .map_err(|e| {
                DownloadError::Transport(crate::error_chain::one_line(&e.without_url()))
            })?;
        let Some(chunk) = next else {
            return Ok(None);
        };
        self.read += chunk.len() as u64;
        if let Some(announced) = self.announced.filter(|a| self.read > *a) {
            return Err(DownloadError::LongerThanAnnounced { announced });
        }
        if self.read > self.limits.max_bytes {
            return Err(DownloadError::TooLarge {
                max: self.limits.max_bytes,
            });
        }
        Ok(Some(chunk))
    }
}

/// The name in a `Content-Disposition` value: `filename*=UTF-8''…` (percent-encoded, RFC
/// 5987) before `filename=`, its last path part only, control characters dropped, at most
/// 255 characters. It is a server's word: the store makes it safe again before it is a path.
fn disposition_name(value: &str) -> Option<String> {
    let param = |key: &str| {
        value.split(';').find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case(key)
                .then(|| v.trim().trim_matches('"'))
        })
    };
    let name = match param("filename*").and_then(|v| v.split_once("''")) {
        Some((charset, encoded)) if charset.eq_ignore_ascii_case("utf-8") => {
            percent_decoded(encoded)
        }
        _ => param("filename")?.to_owned(),
    };
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let clean: String = last.chars().filter(|c| !c.is_control()).take(255).collect();
    (!clean.trim().is_empty()).then_some(clean)
}

/// `%XX` escapes decoded as UTF-8 (an invalid sequence replaced, never an error).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_name_is_read_from_content_disposition() {
        let name = |v: &str| disposition_name(v);
        assert_eq!(
            name("attachment; filename=\"plain.pdf\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.pdf")
                .as_deref(),
            Some("报告.pdf")
        );
        assert_eq!(name("attachment; filename=a.txt").as_deref(), Some("a.txt"));
        assert_eq!(name("inline; FILENAME=\"b.png\"").as_deref(), Some("b.png"));
        assert_eq!(
            name("attachment; filename=\"../../etc/passwd\"").as_deref(),
            Some("passwd")
        );
        assert_eq!(
            name("attachment; filename*=UTF-8''%ZZ%41").as_deref(),
            Some("%ZZA")
        );
        assert_eq!(name("attachment; filename*=ISO-8859-1''x").as_deref(), None);
        assert_eq!(name("attachment; filename=\"\""), None);
        assert_eq!(name("attachment"), None);
        assert_eq!(
            name(&format!("attachment; filename={}", "x".repeat(999))).map(|n| n.len()),
            Some(255)
        );
    }

    #[test]
    fn only_the_wings_origins_are_allowed() {
        let origins = Origins::of(["https://api.telegram.org", "http://127.0.0.1:8081/x"]);
        let ok = |u: &str| origins.allows(&Url::parse(u).unwrap());
        assert!(ok("https://api.telegram.org/file/bot1:a/photos/x.jpg"));
        assert!(ok("https://API.telegram.org:443/file"));
        assert!(ok("http://127.0.0.1:8081/file/bot/x"));
        for refused in [
            "http://api.telegram.org/file",
            "https://api.telegram.org:8443/file",
            "https://api.telegram.org.evil.example/file",
            "https://user:pw@api.telegram.org/file",
            "http://127.0.0.1:8082/file",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:8081/file",
            "file:///etc/passwd",
        ] {
            assert!(!ok(refused), "{refused}");
        }
        assert!(!Origins::of(["not a url"]).allows(&Url::parse("https://x/").unwrap()));
    }
}
