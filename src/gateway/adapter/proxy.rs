//! The WebSocket's way out through an HTTP proxy: a `CONNECT` tunnel, chosen by the very matcher
//! the HTTPS client (reqwest, through hyper-util) uses, so that one `HTTPS_PROXY=` in the unit's
//! drop-in covers the whole adapter and `NO_PROXY` means the same thing to both halves.
//!
//! `wss://` is matched as `https://` (`HTTPS_PROXY`), `ws://` as `http://` (`HTTP_PROXY`), with
//! `ALL_PROXY` as the fallback and `NO_PROXY` exempting hosts (names, domains, addresses and
//! ranges). Only `http://` proxies can carry the WebSocket; credentials in the proxy URL are
//! sent as `Proxy-Authorization: Basic` and never shown.

use std::sync::Arc;

use hyper_util::client::proxy::matcher::Matcher;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri};

/// The proxy settings of the process, read once: every connection of every adapter uses them.
/// Not `Debug`: they may carry the proxy's password.
#[derive(Clone)]
pub struct ProxyEnv(Arc<Matcher>);

impl Default for ProxyEnv {
    /// No proxy at all, whatever the environment says.
    fn default() -> Self {
        Self(Arc::new(Matcher::builder().build()))
    }
}

/// A proxy to tunnel one connection through.
#[derive(Clone)]
pub(crate) struct Proxy {
    uri: Uri,
    authorization: Option<HeaderValue>,
}

/// Only what may be shown: never the credentials.
impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.uri)
    }
}

/// Why a proxy could not be used. Connection attempts report it and retry with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error("proxy {proxy}: only http:// proxies can carry the WebSocket")]
    Unsupported { proxy: String },
    #[error("proxy {proxy}: {why}")]
    Tunnel { proxy: String, why: String },
}

impl ProxyEnv {
    /// `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (either case), as reqwest reads them.
    pub(crate) fn from_env() -> Self {
        Self(Arc::new(Matcher::from_env()))
    }

    /// Explicit settings, for tests and tools that must not depend on the environment.
    pub fn from_matcher(matcher: Matcher) -> Self {
        Self(Arc::new(matcher))
    }

    /// The proxy for a connection to `host:port` over `scheme` (`ws` or `wss`), if any.
    pub(crate) fn for_target(
        &self,
        scheme: &str,
        host: &str,
        port: u16,
    ) -> Result<Option<Proxy>, ProxyError> {
        let as_http = if scheme == "wss" { "https" } else { "http" };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        let Ok(target) = format!("{as_http}://{host}:{port}/").parse::<Uri>() else {
            return Ok(None);
        };
        let Some(found) = self.0.intercept(&target) else {
            return Ok(None);
        };
        let uri = found.uri().clone();
        if uri.scheme_str() != Some("http") {
            return Err(ProxyError::Unsupported {
                proxy: uri.to_string(),
            });
        }
        Ok(Some(Proxy {
            uri,
            authorization: found.basic_auth().cloned(),
        }))
    }
}

impl Proxy {
    /// A TCP connection to the proxy, turned into a tunnel to `host:port` by `CONNECT`.
    pub(crate) async fn tunnel(
        &self,
        host: &str,
        port: u16,
        tune: impl FnOnce(&TcpStream),
    ) -> Result<TcpStream, ProxyError> {
        let fail = |why: String| ProxyError::Tunnel {
            proxy: self.uri.to_string(),
            why,
        };
        let proxy_host = self.uri.host().unwrap_or_default();
        let proxy_host = proxy_host.trim_start_matches('[').trim_end_matches(']');
        let proxy_port = self.uri.port_u16().unwrap_or(80);
        let mut stream = TcpStream::connect((proxy_host, proxy_port))
            .await
            .map_err(|e| fail(format!("connect: {e}")))?;
        tune(&stream);
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
        if let Some(auth) = &self.authorization {
            head.extend_from_slice(b"Proxy-Authorization: ");
            head.extend_from_slice(auth.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        stream
            .write_all(&head)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env(
        build: impl FnOnce(
            hyper_util::client::proxy::matcher::Builder,
        ) -> hyper_util::client::proxy::matcher::Builder,
    ) -> ProxyEnv {
        ProxyEnv::from_matcher(build(Matcher::builder()).build())
    }

    #[test]
    fn wss_follows_https_proxy_and_ws_follows_http_proxy() {
        let e = env(|b| b.https("http://s:3128").http("http://p:8080"));
        let p = e.for_target("wss", "gw.example.com", 443).unwrap().unwrap();
        assert_eq!(p.uri.host(), Some("s"));
        let p = e.for_target("ws", "gw.example.com", 80).unwrap().unwrap();
        assert_eq!(p.uri.host(), Some("p"));
        assert!(ProxyEnv::default()
            .for_target("wss", "x", 443)
            .unwrap()
            .is_none());
    }

    #[test]
    fn no_proxy_exempts_hosts_as_for_https() {
        let e = env(|b| {
            b.all("http://s:3128")
                .no("localhost,.internal.example,10.0.0.0/8")
        });
        for host in ["localhost", "a.internal.example", "10.1.2.3"] {
            assert!(e.for_target("wss", host, 443).unwrap().is_none(), "{host}");
        }
        assert!(e
            .for_target("wss", "gateway.example.com", 443)
            .unwrap()
            .is_some());
    }

    #[test]
    fn credentials_are_sent_and_never_shown() {
        let e = env(|b| b.https("http://al%40ice:s3cr3t@proxy.corp:3128"));
        let p = e.for_target("wss", "x", 443).unwrap().unwrap();
        // base64("al@ice:s3cr3t")
        assert_eq!(
            p.authorization.as_ref().unwrap(),
            "Basic YWxAaWNlOnMzY3IzdA=="
        );
        assert_eq!(format!("{p:?}"), "http://proxy.corp:3128/");
        assert!(!p.uri.to_string().contains("s3cr3t"));
    }

    #[test]
    fn a_socks_proxy_is_refused_by_name() {
        let e = env(|b| b.https("socks5://127.0.0.1:1080"));
        let err = e.for_target("wss", "x", 443).unwrap_err().to_string();
        assert!(err.contains("only http:// proxies"), "{err}");
    }
}
