//! End-to-end checks of the mock against a real tokio-tungstenite client on loopback, and the
//! client helpers they share (one file of tests per part of the mock lives under `tests/`).
//! Every wait has a deadline; "nothing arrives" is asserted as a read that times out.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::{Response, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

use super::stats::MockStats;
use super::{BlackholeProxy, Fault, MockConfig, MockPlatform};

mod discord_upload;
mod faults;
mod feishu;
mod feishu_faults;
mod feishu_mentions;
mod feishu_send;
mod http;
mod lifecycle;
mod matrix;
mod messages;
mod protocol;
mod proxy;
mod qq_files;
mod send_faults;
mod slack;
mod telegram;
mod weixin;

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Upper bound for anything that is expected to happen; generous so a loaded CI box passes.
const DEADLINE: Duration = Duration::from_secs(5);
/// How long "nothing arrives" is observed for.
const QUIET: Duration = Duration::from_millis(300);

async fn platform() -> MockPlatform {
    MockPlatform::start(MockConfig::default()).await.unwrap()
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match timeout(DEADLINE, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

async fn wait_for_stats(mock: &MockPlatform, what: &str, check: impl Fn(&MockStats) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let stats = mock.stats();
        if check(&stats) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn connect(url: &str) -> Client {
    within("websocket connect", connect_async(url))
        .await
        .unwrap()
        .0
}

async fn send(ws: &mut Client, value: Value) {
    ws.send(Message::text(value.to_string())).await.unwrap();
}

/// The next text frame as JSON, skipping control frames.
async fn next_json(ws: &mut Client) -> Value {
    within("a text frame", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    })
    .await
}

async fn assert_quiet(ws: &mut Client) {
    if let Ok(message) = timeout(QUIET, ws.next()).await {
        panic!("expected silence, got {message:?}");
    }
}

async fn hello(ws: &mut Client) -> Value {
    let hello = next_json(ws).await;
    assert_eq!(hello["op"], 10, "{hello}");
    hello
}

/// Connects, reads Hello, identifies; returns the client and its session id.
async fn identified(mock: &MockPlatform) -> (Client, String) {
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    send(&mut ws, identify("t")).await;
    let ready = next_json(&mut ws).await;
    assert_eq!(ready["t"], "READY", "{ready}");
    let session_id = ready["d"]["session_id"].as_str().unwrap().to_owned();
    (ws, session_id)
}

fn identify(token: &str) -> Value {
    json!({"op": 2, "d": {"token": token, "intents": 513, "shard": [0, 1], "properties": {}}})
}

fn resume(session_id: &str, seq: u64) -> Value {
    json!({"op": 6, "d": {"token": "t", "session_id": session_id, "seq": seq}})
}

fn heartbeat() -> Value {
    json!({"op": 1, "d": null})
}

async fn close_code(ws: &mut Client) -> u16 {
    within("a close frame", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(Some(frame)))) => return u16::from(frame.code),
                Some(Ok(_)) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    })
    .await
}

/// Sends a raw HTTP/1.1 request and returns (status, body), checking Content-Length.
async fn http(addr: SocketAddr, request: String) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    within("an http response", stream.read_to_end(&mut raw))
        .await
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("response head");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Length: "))
        .expect("content-length")
        .parse()
        .unwrap();
    assert_eq!(length, body.len(), "content-length matches the body");
    assert!(head.contains("Connection: close"));
    (status, serde_json::from_str(body).unwrap())
}

fn get(path: &str, authorization: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: mock\r\nAuthorization: {authorization}\r\n\r\n")
}

fn post_json(path: &str, body: &Value) -> String {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nHost: mock\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A reqwest client for the send endpoints.
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // No pooling: every answer closes its connection, and a fault test must not have its
    // request retried on a connection the mock already closed.
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(DEADLINE)
        .build()
        .unwrap()
}

/// An access token the mock issued, as a QQ `Authorization` value.
async fn qq_auth(http: &reqwest::Client, mock: &MockPlatform) -> String {
    let url = format!("{}/app/getAppAccessToken", mock.http_base());
    let body = json!({"appId": "1", "clientSecret": "s"});
    let token: Value = http
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    format!("QQBot {}", token["access_token"].as_str().unwrap())
}

async fn post(
    http: &reqwest::Client,
    mock: &MockPlatform,
    path: &str,
    auth: &str,
    body: Value,
) -> Response {
    let url = format!("{}{path}", mock.http_base());
    within(
        "a send answer",
        http.post(url)
            .header("Authorization", auth)
            .json(&body)
            .send(),
    )
    .await
    .unwrap()
}

async fn answer(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    (status, response.json().await.unwrap())
}

fn discord(channel: &str) -> String {
    format!("/channels/{channel}/messages")
}
