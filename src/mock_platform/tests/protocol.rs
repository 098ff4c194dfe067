//! The protocol as a well-behaved client sees it: Hello, READY, ACKs, consecutive seqs, and
//! a resume that replays exactly what was missed.

use super::*;

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
