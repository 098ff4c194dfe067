//! End-to-end checks of the mock against a real tokio-tungstenite client on loopback. Every
//! wait has a deadline; "nothing arrives" is asserted as a read that times out.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

use super::{BlackholeProxy, Fault, MockConfig, MockPlatform, MockStats};

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

#[tokio::test]
async fn identify_gets_hello_then_ready() {
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: Duration::from_millis(250),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let mut ws = connect(&format!("{}?v=10&encoding=json", mock.ws_url())).await;
    let hello = hello(&mut ws).await;
    assert_eq!(hello["d"]["heartbeat_interval"], 250);

    send(&mut ws, identify("t")).await;
    let ready = next_json(&mut ws).await;
    assert_eq!(ready["op"], 0);
    assert_eq!(ready["s"], 1);
    assert_eq!(ready["t"], "READY");
    assert_eq!(ready["d"]["version"], 1);
    assert_eq!(ready["d"]["user"]["id"], "mock-bot");
    let session_id = ready["d"]["session_id"].as_str().unwrap();
    assert!(!session_id.is_empty() && session_id.chars().all(|c| c.is_ascii_hexdigit()));

    let stats = mock.stats();
    assert_eq!(
        (stats.connections, stats.live_connections, stats.identifies),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn heartbeat_gets_ack() {
    let mock = platform().await;
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    send(&mut ws, json!({"op": 1, "d": 7})).await;
    assert_eq!(next_json(&mut ws).await, json!({"op": 11}));
    wait_for_stats(&mock, "heartbeat and ack counted", |s| {
        s.heartbeats == 1 && s.acks == 1
    })
    .await;
}

#[tokio::test]
async fn dispatches_carry_consecutive_seqs_and_unique_event_ids() {
    let mock = platform().await;
    let (mut ws, _) = identified(&mock).await;
    mock.emit(3);
    for (seq, n) in [(2, 1), (3, 2), (4, 3)] {
        let dispatch = next_json(&mut ws).await;
        assert_eq!(dispatch["op"], 0);
        assert_eq!(dispatch["t"], "MESSAGE_CREATE");
        assert_eq!(dispatch["s"], seq);
        assert_eq!(dispatch["id"], format!("ev-{n}"));
        assert_eq!(dispatch["d"]["content"], format!("mock message {n}"));
    }
    assert_eq!(mock.generated_event_ids(), ["ev-1", "ev-2", "ev-3"]);
    wait_for_stats(&mock, "dispatches counted", |s| {
        s.dispatches_sent == 3 && s.events_generated == 3
    })
    .await;
}

#[tokio::test]
async fn resume_replays_exactly_the_missed_dispatches_then_resumed() {
    let mock = platform().await;
    let (mut ws, session_id) = identified(&mock).await;
    mock.emit(2);
    assert_eq!(next_json(&mut ws).await["s"], 2);
    assert_eq!(next_json(&mut ws).await["s"], 3);
    ws.close(None).await.unwrap();
    drop(ws);
    wait_for_stats(&mock, "the connection to go", |s| s.live_connections == 0).await;

    // Generated while the session has no connection: buffered, delivered only by resume.
    mock.emit(3);
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    send(&mut ws, resume(&session_id, 3)).await;
    let ids = mock.generated_event_ids();
    for (seq, id) in [(4, &ids[2]), (5, &ids[3]), (6, &ids[4])] {
        let replayed = next_json(&mut ws).await;
        assert_eq!(replayed["t"], "MESSAGE_CREATE");
        assert_eq!(
            (replayed["s"].as_u64(), replayed["id"].as_str()),
            (Some(seq), Some(id.as_str()))
        );
    }
    let resumed = next_json(&mut ws).await;
    assert_eq!(
        (
            resumed["op"].as_u64(),
            resumed["t"].as_str(),
            resumed["s"].as_u64()
        ),
        (Some(0), Some("RESUMED"), Some(7))
    );

    mock.emit(1);
    assert_eq!(next_json(&mut ws).await["s"], 8);
    let stats = mock.stats();
    assert_eq!((stats.resumes, stats.last_resume_seq), (1, Some(3)));
    assert_eq!(stats.events_generated, 6);
}

#[tokio::test]
async fn resume_of_unknown_session_is_invalid_session_false() {
    let mock = platform().await;
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    send(&mut ws, resume("no-such-session", 5)).await;
    assert_eq!(next_json(&mut ws).await, json!({"op": 9, "d": false}));
}

#[tokio::test]
async fn no_ack_leaves_heartbeats_unanswered_until_cleared() {
    let mock = platform().await;
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    mock.set_fault(Fault::NoAck);
    send(&mut ws, heartbeat()).await;
    assert_quiet(&mut ws).await;
    wait_for_stats(&mock, "the heartbeat to be seen", |s| s.heartbeats == 1).await;
    assert_eq!(mock.stats().acks, 0);

    mock.clear_fault();
    send(&mut ws, heartbeat()).await;
    assert_eq!(next_json(&mut ws).await, json!({"op": 11}));
}

#[tokio::test]
async fn slow_ack_delays_the_ack_only() {
    let mock = platform().await;
    let (mut ws, _) = identified(&mock).await;
    let delay = Duration::from_millis(300);
    mock.set_fault(Fault::SlowAck(delay));
    let sent = Instant::now();
    send(&mut ws, heartbeat()).await;
    mock.emit(1);
    // The dispatch overtakes the held-back ack: only the ack is delayed.
    assert_eq!(next_json(&mut ws).await["t"], "MESSAGE_CREATE");
    assert_eq!(next_json(&mut ws).await, json!({"op": 11}));
    assert!(sent.elapsed() >= delay, "ack came early");
}

#[tokio::test]
async fn slow_delays_every_server_frame() {
    let mock = platform().await;
    let delay = Duration::from_millis(300);
    mock.set_fault(Fault::Slow(delay));
    let started = Instant::now();
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    assert!(started.elapsed() >= delay, "hello came early");
}

#[tokio::test]
async fn close_fault_reaches_every_client_as_its_close_code_once() {
    let mock = platform().await;
    let mut first = connect(&mock.ws_url()).await;
    let mut second = connect(&mock.ws_url()).await;
    hello(&mut first).await;
    hello(&mut second).await;
    mock.set_fault(Fault::Close(4009));
    assert_eq!(close_code(&mut first).await, 4009);
    assert_eq!(close_code(&mut second).await, 4009);
    wait_for_stats(&mock, "both connections to go", |s| s.live_connections == 0).await;

    // One-shot: a later connection is left alone.
    let mut third = connect(&mock.ws_url()).await;
    hello(&mut third).await;
    send(&mut third, heartbeat()).await;
    assert_eq!(next_json(&mut third).await, json!({"op": 11}));
}

#[tokio::test]
async fn reconnect_and_invalid_session_are_sent_once() {
    let mock = platform().await;
    let (mut ws, session_id) = identified(&mock).await;
    mock.set_fault(Fault::Reconnect);
    assert_eq!(next_json(&mut ws).await["op"], 7);
    mock.set_fault(Fault::InvalidSession(false));
    assert_eq!(next_json(&mut ws).await, json!({"op": 9, "d": false}));

    // The invalidated session is gone: no more dispatches, and it cannot be resumed.
    mock.emit(1);
    assert_eq!(mock.stats().events_generated, 0);
    let mut again = connect(&mock.ws_url()).await;
    hello(&mut again).await;
    send(&mut again, resume(&session_id, 1)).await;
    assert_eq!(next_json(&mut again).await, json!({"op": 9, "d": false}));
}

#[tokio::test]
async fn refuse_drops_websocket_and_http_connections() {
    let mock = platform().await;
    mock.set_fault(Fault::Refuse);
    assert!(within("refused connect", connect_async(mock.ws_url()))
        .await
        .is_err());
    let mut stream = TcpStream::connect(mock.addr()).await.unwrap();
    let _ = stream
        .write_all(get("/gateway", "QQBot x").as_bytes())
        .await;
    let mut buf = Vec::new();
    let read = within("refused http", stream.read_to_end(&mut buf)).await;
    assert!(
        read.is_err() || buf.is_empty(),
        "refused socket answered: {buf:?}"
    );
    assert_eq!(mock.stats().connections, 0);

    mock.clear_fault();
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
}

#[tokio::test]
async fn no_upgrade_fails_the_client_handshake() {
    let mock = platform().await;
    mock.set_fault(Fault::NoUpgrade);
    match within("handshake", connect_async(mock.ws_url())).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 200),
        other => panic!("expected an http error, got {:?}", other.map(|_| ())),
    }
    assert_eq!(mock.stats().connections, 0);
}

#[tokio::test]
async fn no_hello_upgrades_but_never_says_hello() {
    let interval = Duration::from_millis(100);
    let mock = MockPlatform::start(MockConfig {
        heartbeat_interval: interval,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    mock.set_fault(Fault::NoHello);
    let mut ws = connect(&mock.ws_url()).await;
    assert!(
        timeout(interval * 2, ws.next()).await.is_err(),
        "a frame arrived"
    );
    assert_eq!(mock.stats().connections, 1);
}

#[tokio::test]
async fn drop_client_frames_stops_pongs_and_acks_but_not_dispatches() {
    let mock = platform().await;
    let (mut ws, _) = identified(&mock).await;
    ws.send(Message::Ping("before".into())).await.unwrap();
    let pong = within("pong", ws.next()).await;
    assert!(matches!(pong, Some(Ok(Message::Pong(_)))), "{pong:?}");

    mock.set_fault(Fault::DropClientFrames);
    ws.send(Message::Ping("after".into())).await.unwrap();
    send(&mut ws, heartbeat()).await;
    mock.emit(3);
    let mut seqs = Vec::new();
    let until = Instant::now() + QUIET;
    while let Ok(message) = tokio::time::timeout_at(until, ws.next()).await {
        match message {
            Some(Ok(Message::Text(text))) => {
                let frame: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(frame["t"], "MESSAGE_CREATE", "{frame}");
                seqs.push(frame["s"].as_u64().unwrap());
            }
            other => panic!("expected only dispatches, got {other:?}"),
        }
    }
    assert_eq!(seqs, [2, 3, 4]);
    assert_eq!(mock.stats().live_connections, 1);
}

#[tokio::test]
async fn silent_keeps_the_socket_open_and_buffers_for_resume() {
    let mock = platform().await;
    let (mut ws, session_id) = identified(&mock).await;
    mock.set_fault(Fault::Silent);
    send(&mut ws, heartbeat()).await;
    mock.emit(2);
    assert_quiet(&mut ws).await;

    // A new connection behaves normally and gets what the silent one never delivered.
    let mut fresh = connect(&mock.ws_url()).await;
    hello(&mut fresh).await;
    send(&mut fresh, resume(&session_id, 1)).await;
    assert_eq!(next_json(&mut fresh).await["s"], 2);
    assert_eq!(next_json(&mut fresh).await["s"], 3);
    assert_eq!(next_json(&mut fresh).await["t"], "RESUMED");
    assert_eq!(mock.stats().acks, 0);
}

#[tokio::test]
async fn bad_json_closes_with_4002_and_wrong_token_with_4004() {
    let mock = MockPlatform::start(MockConfig {
        expected_token: Some("right".into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    ws.send(Message::text("{not json")).await.unwrap();
    assert_eq!(close_code(&mut ws).await, 4002);

    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    send(&mut ws, identify("wrong")).await;
    assert_eq!(close_code(&mut ws).await, 4004);

    let mut ws = connect(&mock.ws_url()).await;
    hello(&mut ws).await;
    send(&mut ws, identify("right")).await;
    assert_eq!(next_json(&mut ws).await["t"], "READY");
}

#[tokio::test]
async fn dispatch_every_generates_for_connected_and_disconnected_sessions() {
    let mock = MockPlatform::start(MockConfig {
        dispatch_every: Some(Duration::from_millis(20)),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let (mut ws, _) = identified(&mock).await;
    let (idle, _) = identified(&mock).await;
    drop(idle);
    for seq in 2..6 {
        assert_eq!(next_json(&mut ws).await["s"], seq);
    }
    wait_for_stats(&mock, "generation for both sessions", |s| {
        s.events_generated >= 10
    })
    .await;
}

#[tokio::test]
async fn token_endpoint_checks_the_secret() {
    let mock = MockPlatform::start(MockConfig {
        expected_secret: Some("s3cret".into()),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let path = "/app/getAppAccessToken";
    let (status, body) = http(
        mock.addr(),
        post_json(path, &json!({"appId": "1", "clientSecret": "s3cret"})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"access_token": "mock-access-1", "expires_in": "7200"})
    );

    // QQ answers a wrong secret with HTTP 200 and the error in the body.
    let (status, body) = http(
        mock.addr(),
        post_json(path, &json!({"appId": "1", "clientSecret": "nope"})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"code": 100016, "message": "invalid appid or secret"})
    );
    assert_eq!(mock.stats().http_requests, 2);
}

#[tokio::test]
async fn gateway_endpoints_advertise_the_ws_url() {
    let mock = platform().await;
    assert_eq!(mock.http_base(), format!("http://{}", mock.addr()));
    let path = "/app/getAppAccessToken";
    let (_, token) = http(
        mock.addr(),
        post_json(path, &json!({"appId": "1", "clientSecret": "s"})),
    )
    .await;
    let auth = format!("QQBot {}", token["access_token"].as_str().unwrap());
    let (status, body) = http(mock.addr(), get("/gateway", &auth)).await;
    assert_eq!((status, body), (200, json!({"url": mock.ws_url()})));
    // A token the platform no longer honours is refused.
    mock.expire_access_tokens();
    let (status, _) = http(mock.addr(), get("/gateway/bot", &auth)).await;
    assert_eq!(status, 401);

    mock.set_advertised_ws_url("ws://127.0.0.1:1/ws".into());
    let (status, body) = http(mock.addr(), get("/gateway/bot", "Bot t")).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "url": "ws://127.0.0.1:1/ws",
            "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 86_400_000, "max_concurrency": 1},
        })
    );

    let (status, _) = http(mock.addr(), get("/nope", "Bot t")).await;
    assert_eq!(status, 404);
}

/// An upstream that echoes and lets the test write to and read from its side directly.
async fn echo_upstream() -> (SocketAddr, tokio::sync::mpsc::Receiver<TcpStream>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            if tx.send(stream).await.is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

async fn read_exactly(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    within("bytes through the proxy", stream.read_exact(&mut buf))
        .await
        .unwrap();
    buf
}

/// Neither data nor EOF within QUIET.
async fn assert_open_and_quiet(stream: &mut TcpStream) {
    let mut buf = [0u8; 16];
    if let Ok(read) = timeout(QUIET, stream.read(&mut buf)).await {
        panic!("expected a read timeout, got {read:?}");
    }
}

#[tokio::test]
async fn blackhole_proxy_forwards_then_goes_dark_without_closing() {
    let (upstream, mut accepted) = echo_upstream().await;
    let proxy = BlackholeProxy::start(upstream).await.unwrap();

    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut server = within("upstream accept", accepted.recv()).await.unwrap();
    client.write_all(b"ping").await.unwrap();
    assert_eq!(read_exactly(&mut server, 4).await, b"ping");
    server.write_all(b"pong").await.unwrap();
    assert_eq!(read_exactly(&mut client, 4).await, b"pong");
    assert_eq!(proxy.connections(), 1);

    proxy.blackhole_existing();
    client.write_all(b"lost").await.unwrap();
    server.write_all(b"lost").await.unwrap();
    assert_open_and_quiet(&mut server).await;
    assert_open_and_quiet(&mut client).await;
    assert_eq!(proxy.connections(), 1);

    let mut later = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut later_server = within("upstream accept", accepted.recv()).await.unwrap();
    later.write_all(b"again").await.unwrap();
    assert_eq!(read_exactly(&mut later_server, 5).await, b"again");
    later_server.write_all(b"back").await.unwrap();
    assert_eq!(read_exactly(&mut later, 4).await, b"back");
    assert_eq!(proxy.connections(), 2);

    // The dark connection is released once its client closes.
    drop(client);
    let deadline = Instant::now() + DEADLINE;
    while proxy.connections() != 1 {
        assert!(Instant::now() < deadline, "dark connection never released");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn blackhole_proxy_in_front_of_the_mock_hides_heartbeats_and_dispatches() {
    let mock = platform().await;
    let proxy = BlackholeProxy::start(mock.addr()).await.unwrap();
    mock.set_advertised_ws_url(format!("ws://{}/ws", proxy.addr()));
    let (_, advertised) = http(mock.addr(), get("/gateway/bot", "Bot t")).await;
    let url = advertised["url"].as_str().unwrap().to_owned();

    let mut ws = connect(&url).await;
    hello(&mut ws).await;
    send(&mut ws, identify("t")).await;
    let session_id = next_json(&mut ws).await["d"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    proxy.blackhole_existing();
    send(&mut ws, heartbeat()).await;
    mock.emit(1);
    assert_quiet(&mut ws).await;
    assert_eq!(
        mock.stats().live_connections,
        1,
        "the mock never saw a close"
    );

    let mut fresh = connect(&url).await;
    hello(&mut fresh).await;
    send(&mut fresh, resume(&session_id, 1)).await;
    assert_eq!(next_json(&mut fresh).await["id"], "ev-1");
    assert_eq!(next_json(&mut fresh).await["t"], "RESUMED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_connections_identify_and_receive() {
    const CONNECTIONS: usize = 1000;
    let mock = platform().await;
    let url = mock.ws_url();
    let mut clients = Vec::with_capacity(CONNECTIONS);
    for chunk in 0..CONNECTIONS / 100 {
        let batch = (0..100).map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut ws = connect(&url).await;
                hello(&mut ws).await;
                send(&mut ws, identify("t")).await;
                assert_eq!(next_json(&mut ws).await["t"], "READY");
                ws
            })
        });
        for handle in batch.collect::<Vec<_>>() {
            clients.push(handle.await.unwrap());
        }
        assert_eq!(clients.len(), (chunk + 1) * 100);
    }
    wait_for_stats(&mock, "every connection live", |s| {
        s.live_connections == CONNECTIONS as u64
    })
    .await;

    mock.emit(1);
    let receivers = clients
        .into_iter()
        .map(|mut ws| tokio::spawn(async move { next_json(&mut ws).await["s"].as_u64() }));
    for handle in receivers.collect::<Vec<_>>() {
        assert_eq!(handle.await.unwrap(), Some(2));
    }
    let ids = mock.generated_event_ids();
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (CONNECTIONS, CONNECTIONS));
}

/// The client side sees its connection end (EOF, error or close), within the deadline.
async fn assert_ends(ws: &mut Client) {
    within("the connection to end", async {
        while let Some(Ok(message)) = ws.next().await {
            assert!(
                matches!(
                    message,
                    Message::Close(_) | Message::Ping(_) | Message::Pong(_)
                ),
                "unexpected frame while waiting for the end: {message:?}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn shutdown_and_drop_stop_the_platform_and_the_proxy() {
    let stopped = platform().await;
    let mut ws = connect(&stopped.ws_url()).await;
    hello(&mut ws).await;
    stopped.shutdown().await;
    assert_ends(&mut ws).await;

    let dropped = platform().await;
    let addr = dropped.addr();
    let proxy = BlackholeProxy::start(addr).await.unwrap();
    let mut direct = connect(&dropped.ws_url()).await;
    let mut via = connect(&format!("ws://{}/ws", proxy.addr())).await;
    hello(&mut direct).await;
    hello(&mut via).await;

    drop(proxy);
    assert_ends(&mut via).await;
    drop(dropped);
    assert_ends(&mut direct).await;
    let deadline = Instant::now() + DEADLINE;
    while TcpStream::connect(addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "listener still accepting after drop"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
