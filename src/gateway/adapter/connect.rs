//! Opening a WebSocket with a deadline on every step and TCP options that let the kernel
//! notice a dead peer too.
//!
//! Keepalive probes catch a peer that vanished while the connection is idle, and
//! `TCP_USER_TIMEOUT` bounds how long written data may stay unacknowledged, which is what
//! makes a blackholed write fail instead of queueing forever (macOS: `TCP_RXT_CONNDROPTIME`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use crate::gateway::adapter::proxy::{ProxyEnv, ProxyError};

/// The transport under a WebSocket: TCP, or TLS over it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Boxed, so that a plain connection (and the adapter task holding it) does not reserve room
/// for the TLS state only a `wss://` connection has: at a thousand connections that room is
/// most of the gateway's memory.
pub(crate) type Socket = WebSocketStream<Box<dyn Io>>;

/// Why a connection attempt failed. All of these are retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error("invalid gateway url: {0}")]
    Url(String),
    #[error("dns: {0}")]
    Dns(String),
    #[error("connect: {0}")]
    Tcp(std::io::Error),
    #[error("websocket upgrade: {0}")]
    Upgrade(String),
    /// The server answered the upgrade with something other than 101. Its headers are kept:
    /// a platform may say there why (a `Handshake-Status` header).
    #[error("websocket upgrade refused: HTTP {status}")]
    Refused {
        status: u16,
        headers: tokio_tungstenite::tungstenite::http::HeaderMap,
    },
    #[error("timed out after {0:?} ({1})")]
    Timeout(Duration, &'static str),
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    #[error("tls: {0}")]
    Tls(String),
}

/// How much a WebSocket read asks for at most: a heartbeat's answer is tens of bytes, an event
/// a few KiB, and a connection's buffer starts at this size.
const READ_CHUNK: usize = 1 << 10;

/// One TLS configuration for every WebSocket, verified the way the HTTPS client verifies (the
/// system's trust store, which `SSL_CERT_FILE` and `SSL_CERT_DIR` can point elsewhere), and
/// shared: built per connection, a thousand connections would carry a thousand root stores.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    use rustls_platform_verifier::ConfigVerifierExt;
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            rustls::ClientConfig::with_platform_verifier()
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(ConnectError::Tls)
}

/// Connect to `url` (ws:// or wss://) within `timeout`, with an optional Authorization header,
/// through the proxy `proxies` name for it, if any.
pub(crate) async fn connect(
    url: &str,
    authorization: Option<&str>,
    proxies: &ProxyEnv,
    timeout: Duration,
    user_timeout: Duration,
) -> Result<Socket, ConnectError> {
    let mut request: Request = url
        .into_client_request()
        .map_err(|e| ConnectError::Url(e.to_string()))?;
    if let Some(auth) = authorization {
        let value =
            HeaderValue::from_str(auth).map_err(|_| ConnectError::Url("bad credential".into()))?;
        request.headers_mut().insert("Authorization", value);
    }
    let uri = request.uri().clone();
    let host = uri
        .host()
        .ok_or_else(|| ConnectError::Url("no host".into()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let scheme = uri.scheme_str().unwrap_or("ws");
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "wss" { 443 } else { 80 });
    let proxy = proxies.for_target(scheme, &host, port)?.map(Box::new);
    let tls = match scheme {
        "wss" => Some((
            tls_config()?,
            ServerName::try_from(host.clone()).map_err(|e| ConnectError::Tls(e.to_string()))?,
        )),
        _ => None,
    };

    let attempt = async {
        let stream = match &proxy {
            // The proxy resolves the platform's name; the keepalive and user timeout then guard
            // the leg to the proxy, which is where a dead tunnel shows.
            // Boxed: rare, and inline its state would enlarge every adapter task for good.
            Some(p) => Box::pin(p.tunnel(&host, port, |s| tune(s, user_timeout))).await?,
            None => direct(&host, port, user_timeout).await?,
        };
        // Small buffers: a gateway may hold a thousand mostly idle connections, and the 128 KiB
        // default read buffer alone would cost 128 MiB for them. tungstenite also zeroes up to
        // this much before every read, which at a thousand connections was 8% of the gateway's
        // CPU at 4 KiB (docs/benchmarks.md); a larger frame reserves room for itself and is
        // read in more chunks. The small write buffer lets a heartbeat and its WS ping leave in
        // one write (frames are flushed explicitly).
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_CHUNK)
            .write_buffer_size(256)
            .max_write_buffer_size(1 << 20)
            .max_message_size(Some(16 << 20))
            .max_frame_size(Some(16 << 20));
        let io: Box<dyn Io> = match tls {
            // The handshake's state is boxed too: it is large and lives only while connecting.
            Some((config, name)) => Box::new(
                Box::pin(tokio_rustls::TlsConnector::from(config).connect(name, stream))
                    .await
                    .map_err(|e| ConnectError::Tls(e.to_string()))?,
            ),
            None => Box::new(stream),
        };
        let (ws, _) = tokio_tungstenite::client_async_with_config(request, io, Some(config))
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Http(response) => ConnectError::Refused {
                    status: response.status().as_u16(),
                    headers: response.headers().clone(),
                },
                e => ConnectError::Upgrade(e.to_string()),
            })?;
        Ok(ws)
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .map_err(|_| ConnectError::Timeout(timeout, "dns, tcp, proxy, tls and upgrade"))?
}

/// Resolve `host` and try each address in turn.
async fn direct(host: &str, port: u16, user_timeout: Duration) -> Result<TcpStream, ConnectError> {
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| ConnectError::Dns(e.to_string()))?
        .collect();
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                tune(&stream, user_timeout);
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => ConnectError::Tcp(e),
        None => ConnectError::Dns(format!("{host}: no addresses")),
    })
}

/// Keepalive and TCP_USER_TIMEOUT; failures only cost the extra protection, so they are logged.
fn tune(stream: &TcpStream, user_timeout: Duration) {
    let sock = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(15))
        .with_interval(Duration::from_secs(5));
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    let keepalive = keepalive.with_retries(3);
    if let Err(e) = sock.set_tcp_keepalive(&keepalive) {
        tracing::debug!(error = %e, "failed to set tcp keepalive");
    }
    if let Err(e) = set_user_timeout(&sock, user_timeout) {
        tracing::debug!(error = %e, "failed to set TCP_USER_TIMEOUT");
    }
    let _ = stream.set_nodelay(true);
}

/// Bound how long written data may stay unacknowledged before the kernel drops the connection.
#[cfg(target_os = "linux")]
fn set_user_timeout(sock: &socket2::SockRef<'_>, timeout: Duration) -> std::io::Result<()> {
    sock.set_tcp_user_timeout(Some(timeout))
}

/// macOS's counterpart of `TCP_USER_TIMEOUT` is `TCP_RXT_CONNDROPTIME`: the seconds of
/// retransmission after which the connection is dropped. Neither libc nor socket2 names it;
/// 0x80 is its value in XNU's <netinet/tcp.h>, as Go's golang.org/x/sys/unix has it.
#[cfg(target_os = "macos")]
fn set_user_timeout(sock: &socket2::SockRef<'_>, timeout: Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const TCP_RXT_CONNDROPTIME: libc::c_int = 0x80;
    // Rounded up: a sub-second timeout must not become 0, which turns the bound off.
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    let secs = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
    // SAFETY: the descriptor stays open for the call (`sock` borrows it), and the value is a
    // c_int passed with its own size, as setsockopt(2) requires.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_RXT_CONNDROPTIME,
            std::ptr::from_ref(&secs).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn set_user_timeout(_: &socket2::SockRef<'_>, _: Duration) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "no TCP user timeout on this platform",
    ))
}
