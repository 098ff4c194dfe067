//! Each fault switch, seen from a client: what it breaks, for which connections, and for how
//! long.

use super::*;

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
