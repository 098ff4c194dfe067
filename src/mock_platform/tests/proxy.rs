//! The blackhole proxy: forwards until told to go dark, then keeps the sockets open and silent.

use super::*;

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
