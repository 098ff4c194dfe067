//! The WebSocket's way out through an HTTP proxy: a `CONNECT` tunnel, chosen from the same
//! environment variables the HTTPS client (reqwest) reads, so that one `HTTPS_PROXY=` in the
//! unit's drop-in covers the whole adapter, not just its HTTPS requests.
//!
//! `wss://` uses `HTTPS_PROXY`, `ws://` uses `HTTP_PROXY`, either falls back to `ALL_PROXY`
//! (each name upper case, then lower case), and `NO_PROXY` exempts hosts. Only `http://`
//! proxies are supported; the proxy's credentials (`http://user:pass@proxy:3128`) are sent as
//! `Proxy-Authorization: Basic` and never shown.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The proxy settings of the process, read once: every connection of every adapter uses them.
/// Not `Debug`: the URLs may carry the proxy's password.
#[derive(Clone, Default)]
pub struct ProxyEnv {
    pub https: Option<String>,
    pub http: Option<String>,
    pub all: Option<String>,
    pub no_proxy: Option<String>,
}

/// A proxy to tunnel one connection through.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    host: String,
    port: u16,
    /// `Basic …` when the proxy URL carries credentials.
    authorization: Option<String>,
    /// The variable it came from, and the proxy without credentials, for messages.
    shown: String,
}

/// Why a proxy could not be used. Connection attempts report it and retry with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("{var}: {why} (expected http://[user:password@]host:port)")]
    Setting { var: &'static str, why: String },
    #[error("proxy {proxy}: {why}")]
    Tunnel { proxy: String, why: String },
}

impl ProxyEnv {
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Read the settings through `lookup` (a variable name to its value).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let var = |upper: &str| {
            lookup(upper)
                .or_else(|| lookup(&upper.to_ascii_lowercase()))
                .filter(|v| !v.trim().is_empty())
        };
        Self {
            https: var("HTTPS_PROXY"),
            http: var("HTTP_PROXY"),
            all: var("ALL_PROXY"),
            no_proxy: var("NO_PROXY"),
        }
    }

    /// The proxy for a connection to `host` over `scheme` (`ws` or `wss`), if any.
    pub fn for_target(&self, scheme: &str, host: &str) -> Result<Option<Proxy>, ProxyError> {
        let (var, url) = match (scheme, &self.https, &self.http, &self.all) {
            ("wss", Some(u), _, _) => ("HTTPS_PROXY", u),
            ("ws", _, Some(u), _) => ("HTTP_PROXY", u),
            (_, _, _, Some(u)) => ("ALL_PROXY", u),
            _ => return Ok(None),
        };
        if self.no_proxy.as_deref().is_some_and(|n| exempt(n, host)) {
            return Ok(None);
        }
        Proxy::parse(var, url).map(Some)
    }
}

/// Whether `NO_PROXY` exempts `host`: `*`, the host itself, or a domain it is under
/// (`example.com` and `.example.com` both cover `gw.example.com`). Ports in entries are
/// ignored; address ranges are not supported.
fn exempt(no_proxy: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    no_proxy.split(',').map(str::trim).any(|entry| {
        let entry = entry
            .rsplit_once(':')
            .filter(|(h, p)| !h.contains(':') && p.chars().all(|c| c.is_ascii_digit()))
            .map_or(entry, |(h, _)| h)
            .trim_start_matches('.')
            .trim_start_matches("*.")
            .to_ascii_lowercase();
        entry == "*"
            || (!entry.is_empty() && (host == entry || host.ends_with(&format!(".{entry}"))))
    })
}

/// Only what may be shown: never the credentials.
impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Proxy {
    fn parse(var: &'static str, url: &str) -> Result<Self, ProxyError> {
        let bad = |why: &str| ProxyError::Setting {
            var,
            why: why.to_owned(),
        };
        let rest = match url.trim().split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => {
                return Err(bad(&format!(
                    "{scheme}:// proxies are not supported for the WebSocket"
                )))
            }
            None => url.trim(),
        };
        let authority = rest.split('/').next().unwrap_or_default();
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad("the port is not a number"))?,
            ),
            _ => (hostport, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no proxy host"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            authorization: userinfo.map(|u| format!("Basic {}", base64(&percent_decode(u)))),
            shown: format!("{var} http://{hostport}"),
        })
    }

    /// A TCP connection to the proxy, turned into a tunnel to `host:port` by `CONNECT`.
    pub async fn tunnel(
        &self,
        host: &str,
        port: u16,
        tune: impl FnOnce(&TcpStream),
    ) -> Result<TcpStream, ProxyError> {
        let fail = |why: String| ProxyError::Tunnel {
            proxy: self.shown.clone(),
            why,
        };
        let mut stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| fail(format!("connect: {e}")))?;
        tune(&stream);
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(auth) = &self.authorization {
            head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|e| fail(format!("send CONNECT: {e}")))?;
        // Read the reply a byte at a time: whatever follows it belongs to TLS or the upgrade.
        let mut reply = Vec::with_capacity(128);
        while !reply.ends_with(b"\r\n\r\n") {
            if reply.len() >= 8 << 10 {
                return Err(fail("reply to CONNECT longer than 8 KiB".into()));
            }
            let mut byte = [0u8];
            match stream.read(&mut byte).await {
                Ok(0) => return Err(fail("closed the connection during CONNECT".into())),
                Ok(_) => reply.push(byte[0]),
                Err(e) => return Err(fail(format!("read CONNECT reply: {e}"))),
            }
        }
        let text = String::from_utf8_lossy(&reply);
        let status = text.lines().next().unwrap_or_default().trim().to_owned();
        match status.split_whitespace().nth(1) {
            Some("200") => Ok(stream),
            Some("407") => Err(fail(format!(
                "CONNECT {target}: {status} (the proxy wants credentials: http://user:password@host:port)"
            ))),
            _ => Err(fail(format!("CONNECT {target}: {status}"))),
        }
    }
}

/// `%XX` escapes in a URL's userinfo, so that `p%40ss` is the password `p@ss`.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Standard base64 with padding, for the one header that needs it.
fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> ProxyEnv {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProxyEnv::from_lookup(|name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_scheme_picks_the_variable_and_all_proxy_is_the_fallback() {
        let e = env(&[
            ("HTTPS_PROXY", "http://s:3128"),
            ("http_proxy", "http://p:8080"),
        ]);
        assert_eq!(
            e.for_target("wss", "gw.example.com").unwrap().unwrap().host,
            "s"
        );
        assert_eq!(
            e.for_target("ws", "gw.example.com").unwrap().unwrap().host,
            "p"
        );
        let e = env(&[("ALL_PROXY", "proxy:3128")]);
        let p = e.for_target("wss", "x").unwrap().unwrap();
        assert_eq!((p.host.as_str(), p.port), ("proxy", 3128));
        assert_eq!(env(&[]).for_target("wss", "x").unwrap(), None);
        assert_eq!(
            env(&[("HTTPS_PROXY", " ")]).for_target("wss", "x").unwrap(),
            None
        );
    }

    #[test]
    fn no_proxy_exempts_hosts_and_domains() {
        let no = "localhost, .internal.example,10.0.0.1,api.qq.com:443";
        for host in [
            "localhost",
            "a.internal.example",
            "internal.example",
            "10.0.0.1",
            "API.qq.com",
        ] {
            assert!(exempt(no, host), "{host}");
        }
        for host in [
            "gateway.discord.gg",
            "notinternal.example",
            "10.0.0.10",
            "qq.com",
        ] {
            assert!(!exempt(no, host), "{host}");
        }
        assert!(exempt("*", "anything"));
        let e = env(&[("HTTPS_PROXY", "http://s:1"), ("NO_PROXY", "example.com")]);
        assert_eq!(e.for_target("wss", "gw.example.com").unwrap(), None);
    }

    #[test]
    fn credentials_are_sent_encoded_and_never_shown() {
        let e = env(&[("HTTPS_PROXY", "http://al%40ice:s3cr%3At@proxy.corp:3128/")]);
        let p = e.for_target("wss", "x").unwrap().unwrap();
        // base64("al@ice:s3cr:t")
        assert_eq!(
            p.authorization.as_deref(),
            Some("Basic YWxAaWNlOnMzY3I6dA==")
        );
        assert_eq!(p.shown, "HTTPS_PROXY http://proxy.corp:3128");
        assert_eq!(format!("{p:?}"), "HTTPS_PROXY http://proxy.corp:3128");
        let err = ProxyError::Tunnel {
            proxy: p.shown.clone(),
            why: "x".into(),
        };
        assert!(!err.to_string().contains("s3cr"));
    }

    #[test]
    fn unsupported_or_broken_settings_name_the_variable() {
        let e = env(&[("HTTPS_PROXY", "socks5://127.0.0.1:1080")]);
        let err = e.for_target("wss", "x").unwrap_err().to_string();
        assert!(
            err.starts_with("HTTPS_PROXY: socks5:// proxies are not supported"),
            "{err}"
        );
        let e = env(&[("HTTP_PROXY", "http://proxy:port")]);
        assert!(e
            .for_target("ws", "x")
            .unwrap_err()
            .to_string()
            .contains("HTTP_PROXY"));
        let p = env(&[("HTTP_PROXY", "http://[::1]:3128")])
            .for_target("ws", "x")
            .unwrap()
            .unwrap();
        assert_eq!((p.host.as_str(), p.port), ("::1", 3128));
    }

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }
}
