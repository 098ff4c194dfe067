//! One request and its answer, or why none came. What the transport says decides between
//! "retry" and "unknown": a connection that was never made carried no request, so sending
//! again cannot post twice; a request that was written and then met a timeout or a closed
//! connection may have been posted.

use reqwest::header::HeaderMap;

use super::classify::local;
use super::Answer;

/// An answer as the classifiers read it.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

/// A platform's answer to a send is a few hundred bytes; past this, the rest is not read.
const MAX_BODY: usize = 64 * 1024;

/// Send `request` and read the answer. A body that breaks off after the status came is read
/// as empty, and one past [`MAX_BODY`] is cut there: the status has already said what
/// happened, and the body only adds the platform's words.
pub(crate) async fn exchange(request: reqwest::RequestBuilder) -> Result<Response, Answer> {
    let mut resp = request.send().await.map_err(transport)?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() <= MAX_BODY => {
                body.extend_from_slice(&chunk)
            }
            Ok(Some(_)) => break,
            Ok(None) => break,
            Err(_) => {
                body.clear();
                break;
            }
        }
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// A request that got no HTTP answer. The URL is left out of the text: it says nothing the
/// message's target does not, and a URL is where a credential would hide if one ever did.
pub(crate) fn transport(e: reqwest::Error) -> Answer {
    let builder = e.is_builder();
    let connect = e.is_connect();
    let timeout = e.is_timeout();
    let text = crate::error_chain::one_line(&e.without_url());
    if builder {
        return Answer::Failed(local(format!("the request could not be built: {text}")));
    }
    // A failed connect (refused, unreachable, DNS, TLS, or `connect_timeout`) is checked
    // first: it can also be a timeout, but no request went out.
    if connect {
        return Answer::Retry {
            after: None,
            reply: local(format!("not sent, no connection: {text}")),
        };
    }
    if timeout {
        return Answer::Unknown(format!("sent, and no answer in time: {text}"));
    }
    Answer::Unknown(format!(
        "sent, and the connection ended without an answer: {text}"
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    fn client(timeout: Duration) -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(2))
            .no_proxy()
            .build()
            .unwrap()
    }

    /// Read one request, head and body (by Content-Length), as a server would before acting.
    async fn read_request(sock: &mut TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = sock.read(&mut chunk).await.unwrap();
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                return;
            }
        }
    }

    /// A loopback server that does `then` with each connection after reading its request.
    async fn server<F, Fut>(then: F) -> String
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                read_request(&mut sock).await;
                then(sock).await;
            }
        });
        format!("http://{addr}/channels/1/messages")
    }

    fn post(url: &str, timeout: Duration) -> reqwest::RequestBuilder {
        client(timeout).post(url).body("{\"content\":\"hi\"}")
    }

    #[tokio::test]
    async fn a_refused_connection_sent_nothing_and_is_retried() {
        // Bind and drop: nothing listens on the port now.
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let url = format!("http://{addr}/x");
        let e = exchange(post(&url, Duration::from_secs(5)))
            .await
            .err()
            .unwrap();
        assert!(matches!(e, Answer::Retry { after: None, .. }), "{e:?}");
    }

    #[tokio::test]
    async fn a_connection_closed_after_the_request_is_unknown() {
        let url = server(|sock| async move { drop(sock) }).await;
        let e = exchange(post(&url, Duration::from_secs(5)))
            .await
            .err()
            .unwrap();
        assert!(matches!(e, Answer::Unknown(_)), "{e:?}");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_unknown_after_the_timeout() {
        let url = server(|sock| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(sock);
        })
        .await;
        let e = exchange(post(&url, Duration::from_millis(300)))
            .await
            .err()
            .unwrap();
        match e {
            Answer::Unknown(m) => assert!(m.contains("in time"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_answer_is_read_whole_and_a_truncated_body_reads_as_empty() {
        let url = server(|mut sock| async move {
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"id\":\"7\"}")
                .await;
        })
        .await;
        let r = exchange(post(&url, Duration::from_secs(5)))
            .await
            .ok()
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"{\"id\":\"7\"}".to_vec());

        let url = server(|mut sock| async move {
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"id\"")
                .await;
        })
        .await;
        let r = exchange(post(&url, Duration::from_secs(5)))
            .await
            .ok()
            .unwrap();
        assert_eq!((r.status, r.body.len()), (200, 0));
    }

    #[tokio::test]
    async fn a_huge_body_is_cut_short() {
        let url = server(|mut sock| async move {
            let n = 4 * MAX_BODY;
            let head = format!("HTTP/1.1 502 Bad Gateway\r\nContent-Length: {n}\r\n\r\n");
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(&vec![b'x'; n]).await;
        })
        .await;
        let r = exchange(post(&url, Duration::from_secs(5)))
            .await
            .ok()
            .unwrap();
        assert_eq!(r.status, 502);
        assert!(r.body.len() <= MAX_BODY, "{}", r.body.len());
    }
}
