//! Just enough HTTP/1.1 for the platforms' endpoints: the request head and body, and the
//! response. Hand-written so the WebSocket gateways and the HTTP APIs share one port without
//! pulling a web framework into the crate; every response closes the connection, so there is
//! no keep-alive or pipelining to get wrong.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{sleep, timeout, timeout_at, Instant};

use super::reply::{Answer, Body, Reply};
use super::shutdown::stopped;

const MAX_HEAD: usize = 16 * 1024;
/// What a request body may be unless its endpoint says otherwise: every JSON and form API the
/// mock serves fits in far less.
pub(super) const MAX_BODY: usize = 1024 * 1024;
/// The most any endpoint may read: an upload endpoint asks for more than [`MAX_BODY`] through
/// [`Side::body_limit`](super::side::Side::body_limit), up to this. Telegram's largest
/// documented upload (50 MB) plus its other fields fits; the body is held in memory whole,
/// which a mock can afford.
pub(super) const MAX_UPLOAD_BODY: usize = 64 * 1024 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How fast a body is assumed to arrive at worst, beyond [`READ_TIMEOUT`]: an upload of tens
/// of megabytes on a loaded CI box must not time out where a small body would be late.
const SLOWEST_BODY_BYTES_PER_SEC: usize = 16 * 1024 * 1024;
/// After answering, how long to swallow whatever the client still sends, so that closing a
/// socket with unread input does not turn into an RST that eats the response.
const LINGER: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub(super) struct RequestHead {
    pub(crate) method: String,
    /// The request target without its query string.
    pub(crate) path: String,
    /// What follows the `?`, if anything, undecoded.
    query: String,
    headers: Vec<(String, String)>,
    /// Bytes of the head including the blank line, i.e. where the body starts.
    len: usize,
}

impl RequestHead {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The first query parameter named `name`, percent-decoded (`+` as a space); `None` when
    /// absent or not UTF-8 once decoded.
    pub(crate) fn query_param(&self, name: &str) -> Option<String> {
        self.query
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(key, _)| *key == name)
            .and_then(|(_, value)| percent_decode(value))
    }

    pub(crate) fn is_websocket_upgrade(&self) -> bool {
        self.header("upgrade")
            .is_some_and(|value| value.to_ascii_lowercase().contains("websocket"))
    }

    /// The declared body length: 0 without the header, `None` when it does not parse.
    pub(crate) fn content_length(&self) -> Option<usize> {
        match self.header("content-length") {
            None => Some(0),
            Some(value) => value.trim().parse().ok(),
        }
    }
}

/// Reads the request head without consuming it, so a WebSocket upgrade can be handed to
/// tungstenite with the stream untouched.
pub(super) async fn peek_head(stream: &TcpStream) -> io::Result<RequestHead> {
    let deadline = Instant::now() + READ_TIMEOUT;
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "request head timed out");
    let mut buf = vec![0u8; MAX_HEAD];
    let mut backoff = Duration::from_millis(1);
    loop {
        let n = timeout_at(deadline, stream.peek(&mut buf))
            .await
            .map_err(|_| timed_out())??;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(end) = find(&buf[..n], b"\r\n\r\n") {
            return parse_head(&buf[..end + 4]);
        }
        if n == buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        // peek returns at once while any bytes are pending, so waiting for the rest of a
        // split head has to be a timed retry rather than another readiness wait.
        timeout_at(deadline, sleep(backoff))
            .await
            .map_err(|_| timed_out())?;
        backoff = (backoff * 2).min(Duration::from_millis(20));
    }
}

/// `%XX` escapes decoded, `+` as a space; `None` when the result is not UTF-8.
pub(super) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match bytes[i] {
            b'%' => match (hex(i + 1), hex(i + 2)) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub(super) fn parse_head(bytes: &[u8]) -> io::Result<RequestHead> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("request head is not utf-8"))?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let (Some(method), Some(target)) = (request_line.next(), request_line.next()) else {
        return Err(invalid("malformed request line"));
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Ok(RequestHead {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        len: bytes.len(),
    })
}

/// Writes the reply and closes, or withholds it as the reply says.
pub(super) async fn respond(
    mut stream: TcpStream,
    head: &RequestHead,
    reply: Reply,
    shutdown: watch::Receiver<bool>,
) {
    let answer = match reply {
        Reply::Answer(answer) => answer,
        Reply::Hang => return hold(stream, shutdown).await,
        Reply::Reset => return reset(stream),
        Reply::Partial { answer, sent } => return stall(stream, &answer, sent, shutdown).await,
    };
    tracing::debug!(method = %head.method, path = %head.path, status = answer.status, "mock http request");
    let response = render_answer(&answer);
    if stream.write_all(&response).await.is_ok() {
        finish(stream).await;
    }
}

/// `Reply::Partial`: the head (declaring the whole body's length) and the first `sent` bytes
/// of the body, then silence until the client gives up or the mock stops.
async fn stall(
    mut stream: TcpStream,
    answer: &Answer,
    sent: usize,
    shutdown: watch::Receiver<bool>,
) {
    let response = render_answer(answer);
    let head_len = find(&response, b"\r\n\r\n").map_or(0, |end| end + 4);
    let cut = head_len.saturating_add(sent).min(response.len());
    tracing::debug!(status = answer.status, sent, "mock http answer stalled");
    if stream.write_all(&response[..cut]).await.is_ok() {
        let _ = stream.flush().await;
        hold(stream, shutdown).await;
    }
}

/// A request that is never answered: the connection stays open, reading and discarding, until
/// the client gives up or the mock stops.
async fn hold(mut stream: TcpStream, mut shutdown: watch::Receiver<bool>) {
    let mut sink = [0u8; 1024];
    tokio::select! {
        _ = stopped(&mut shutdown) => {}
        _ = async { while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {} } => {}
    }
}

/// Closes with RST (linger zero) rather than FIN, so the client sees the connection fail
/// rather than a clean end of an empty response.
fn reset(stream: TcpStream) {
    if let Err(error) = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)) {
        tracing::debug!(%error, "mock could not arm a reset");
    }
    drop(stream);
}

/// Consumes the head, then the body; `None` when the declared body is over `max` bytes (or
/// [`MAX_UPLOAD_BODY`], whichever is less), which is then left unread.
pub(super) async fn read_body(
    stream: &mut TcpStream,
    head: &RequestHead,
    max: usize,
) -> io::Result<Option<Vec<u8>>> {
    let max = max.min(MAX_UPLOAD_BODY);
    let Some(length) = head.content_length().filter(|&n| n <= max) else {
        return Ok(None);
    };
    let mut bytes = vec![0u8; head.len + length];
    let slack = Duration::from_secs((length / SLOWEST_BODY_BYTES_PER_SEC) as u64);
    timeout(READ_TIMEOUT + slack, stream.read_exact(&mut bytes))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "request body timed out"))??;
    Ok(Some(bytes.split_off(head.len)))
}

fn render_answer(answer: &Answer) -> Vec<u8> {
    match &answer.body {
        Body::Json(value) => render_response(
            answer.status,
            &answer.headers,
            Some("application/json"),
            value.to_string().as_bytes(),
        ),
        Body::Raw { content_type, text } => render_response(
            answer.status,
            &answer.headers,
            *content_type,
            text.as_bytes(),
        ),
        Body::Bytes {
            content_type,
            bytes,
        } => render_response(answer.status, &answer.headers, Some(content_type), bytes),
    }
}

fn render_response(
    status: u16,
    headers: &[(&'static str, String)],
    content_type: Option<&str>,
    body: &[u8],
) -> Vec<u8> {
    // RFC 9110: a 204 response cannot contain content.
    let body: &[u8] = if status == 204 { b"" } else { body };
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    };
    let content_type = content_type
        .map(|value| format!("Content-Type: {value}\r\n"))
        .unwrap_or_default();
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\n{content_type}Content-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Consumes the request head (a refused upgrade has no body) and answers, then closes.
pub(super) async fn answer_consumed(mut stream: TcpStream, head: &RequestHead, answer: &Answer) {
    let mut consumed = vec![0u8; head.len];
    if timeout(READ_TIMEOUT, stream.read_exact(&mut consumed))
        .await
        .is_err()
    {
        return;
    }
    let response = render_answer(answer);
    if stream.write_all(&response).await.is_ok() {
        finish(stream).await;
    }
}

/// The `NoUpgrade` fault: a server (or middlebox) that ignores the upgrade and answers as if
/// it were a plain request.
pub(super) async fn answer_without_upgrade(mut stream: TcpStream, head: &RequestHead) {
    let mut consumed = vec![0u8; head.len];
    if timeout(READ_TIMEOUT, stream.read_exact(&mut consumed))
        .await
        .is_err()
    {
        return;
    }
    let response =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if stream.write_all(response.as_bytes()).await.is_ok() {
        finish(stream).await;
    }
}

async fn finish(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = timeout(LINGER, async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_request_line_headers_and_strips_query() {
        let raw = b"GET /ws?v=10&encoding=json HTTP/1.1\r\nHost: x\r\nUPGRADE: WebSocket\r\nContent-Length: 3\r\n\r\n";
        let head = parse_head(raw).unwrap();
        assert_eq!(head.method, "GET");
        assert_eq!(head.path, "/ws");
        assert_eq!(head.query_param("encoding").as_deref(), Some("json"));
        assert_eq!(head.query_param("missing"), None);
        assert!(head.is_websocket_upgrade());
        assert_eq!(head.content_length(), Some(3));
        assert_eq!(head.len, raw.len());
    }

    #[test]
    fn query_params_are_percent_decoded() {
        let raw = b"POST /m?a=x%2By+z&b=%E9%A3%9E&c&bad=%ff HTTP/1.1\r\n\r\n";
        let head = parse_head(raw).unwrap();
        assert_eq!(head.query_param("a").as_deref(), Some("x+y z"));
        assert_eq!(head.query_param("b").as_deref(), Some("飞"));
        assert_eq!(head.query_param("c").as_deref(), Some(""));
        assert_eq!(head.query_param("bad"), None);
    }

    #[test]
    fn rejects_a_garbage_request_line() {
        assert!(parse_head(b"\r\n\r\n").is_err());
    }

    #[test]
    fn response_declares_the_exact_body_length() {
        let response = render_response(
            200,
            &[("Retry-After", "2".into())],
            Some("application/json"),
            "{\"a\":\"é\"}".as_bytes(),
        );
        let response = String::from_utf8(response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        assert!(head.contains("Connection: close"));
        assert!(head.contains("\r\nRetry-After: 2\r\n"));
    }

    #[test]
    fn a_raw_body_is_sent_as_is_with_its_own_content_type_or_none() {
        let page = String::from_utf8(render_answer(&Answer::raw(
            502,
            Some("text/html"),
            "<html/>".into(),
        )))
        .unwrap();
        assert!(page.starts_with("HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n"));
        assert!(page.ends_with("\r\n\r\n<html/>"));
        let empty =
            String::from_utf8(render_answer(&Answer::raw(503, None, String::new()))).unwrap();
        assert!(!empty.contains("Content-Type"), "{empty}");
        assert!(empty.contains("Content-Length: 0\r\n"));
    }
}
