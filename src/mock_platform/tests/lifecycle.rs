//! The platform as a whole: a thousand connections at once, and nothing left running once it
//! is shut down or dropped.

use super::*;

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
