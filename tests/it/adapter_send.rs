//! A plain WebSocket adapter sending: its sender's frames go out over the adapter's own live
//! connection to a loopback server written here with tokio-tungstenite, exactly as the
//! adapter's `send-frame` says; with no live connection a send is retried, and the frame it
//! left behind never goes out later.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hermes_svc::config;
use hermes_svc::gateway::adapter::proxy::ProxyEnv;
use hermes_svc::gateway::adapter::Shared;
use hermes_svc::gateway::health::{Registry, State};
use hermes_svc::gateway::send::{Answer, Outgoing, Post};
use hermes_svc::gateway::spool::Spool;
use hermes_svc::platform::{websocket, AdapterSpec, Sender};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::adapter_rig::start_adapter;
use crate::harness::scratch_dir;

const FRAME: &str =
    r#"{"op":"say","to":"{target}","body":{"text":"{text}","re":"{reply_to}"},"nonce":"{id}"}"#;

fn toml(port: u16) -> String {
    format!(
        "[[adapter]]\nname = \"ws\"\nkind = \"websocket\"\nurl = \"ws://127.0.0.1:{port}/chat\"\n\
         send-frame = '{FRAME}'\nbackoff-min = \"100ms\"\nbackoff-max = \"500ms\"\n\
         connect-timeout = \"1s\"\nhello-timeout = \"1s\"\n"
    )
}

/// Accept WebSocket connections on `listener` for ever, sending every text frame any of them
/// receives to the returned channel. A connection that fails its upgrade is skipped.
fn serve(listener: TcpListener) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if let Message::Text(t) = m {
                        let _ = tx.send(t.to_string());
                    }
                }
            });
        }
    });
    rx
}

fn msg(id: &str, target: &str, text: &str, reply_to: Option<&str>) -> Outgoing<websocket::Target> {
    Outgoing {
        id: id.into(),
        target: target.parse::<websocket::Target>().unwrap(),
        text: text.into(),
        reply_to: reply_to.map(Into::into),
        seq: None,
        files: vec![],
    }
}

struct Adapter {
    registry: Registry,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<hermes_svc::gateway::adapter::AdapterExit>,
    sender: websocket::Sender,
    _dir: crate::harness::TempDir,
}

/// The adapter running against `port`, with a sender built for it as the gateway builds one:
/// from the same spec and the same `Shared`.
fn start(port: u16) -> Adapter {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let text = toml(port);
    let spec: AdapterSpec = config::parse(std::path::Path::new("t.toml"), &text)
        .unwrap()
        .adapters
        .remove(0);
    let shared = Shared::new(ProxyEnv::default()).unwrap();
    let Some(Sender::WebSocket(sender)) = Sender::new(&spec, &[], &shared) else {
        panic!("send-frame makes a WebSocket sender");
    };
    let dir = scratch_dir("adapter-send");
    let spool = Arc::new(Spool::open(&dir.path().join("inbox")).unwrap());
    let registry = Registry::new();
    let (_hb, stop, task) = start_adapter(&text, spool, &registry, &shared);
    Adapter {
        registry,
        stop,
        task,
        sender,
        _dir: dir,
    }
}

impl Adapter {
    async fn connected(&self) {
        let end = Instant::now() + Duration::from_secs(10);
        while self.registry.snapshot().components[0].state != State::Connected {
            assert!(Instant::now() < end, "{:?}", self.registry.snapshot());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn shutdown(self) {
        let _ = self.stop.send(true);
        let exit = tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("adapter did not exit")
            .unwrap();
        assert_eq!(exit, hermes_svc::gateway::adapter::AdapterExit::Shutdown);
    }
}

async fn next_frame(frames: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(5), frames.recv())
        .await
        .expect("no frame reached the server")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_frame_goes_out_over_the_live_socket() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut frames = serve(listener);
    let adapter = start(port);
    adapter.connected().await;

    let text = "say \"hi\",\n\t\\ then 🦀 汉字 \u{202e}rtl {target}\"}";
    let answer = adapter
        .sender
        .send(&msg("m1", "room 42", text, Some("in-7")))
        .await;
    assert_eq!(answer, (Answer::Sent { platform_id: None }, None));
    let want = json!({"op":"say","to":"room 42","body":{"text":text,"re":"in-7"},"nonce":"m1"});
    let got = next_frame(&mut frames).await;
    // One compact JSON text, the template's shape with each value inside its own string.
    assert_eq!(got, want.to_string());
    assert_eq!(serde_json::from_str::<Value>(&got).unwrap(), want);

    let answer = adapter.sender.send(&msg("m2", "r", "plain", None)).await;
    assert_eq!(answer.0, Answer::Sent { platform_id: None });
    let got: Value = serde_json::from_str(&next_frame(&mut frames).await).unwrap();
    assert_eq!(
        got,
        json!({"op":"say","to":"r","body":{"text":"plain","re":""},"nonce":"m2"})
    );
    assert!(frames.try_recv().is_err(), "one frame per send");
    adapter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_live_socket_a_send_is_retried_and_its_frame_never_goes_out() {
    // Bound but not accepting: the adapter's upgrade hangs and times out, again and again.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let adapter = start(port);
    let started = Instant::now();
    let (answer, _) = adapter.sender.send(&msg("m1", "r", "stale", None)).await;
    assert!(
        matches!(&answer, Answer::Retry { reply, .. } if reply.message.contains("no live connection")),
        "{answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_ne!(
        adapter.registry.snapshot().components[0].state,
        State::Connected
    );

    // The server comes up; the adapter connects, and only the next message goes out.
    let mut frames = serve(listener);
    adapter.connected().await;
    let (answer, _) = adapter.sender.send(&msg("m2", "r", "fresh", None)).await;
    assert_eq!(answer, Answer::Sent { platform_id: None });
    let got: Value = serde_json::from_str(&next_frame(&mut frames).await).unwrap();
    assert_eq!(got["body"]["text"], "fresh");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        frames.try_recv().is_err(),
        "the retried frame was not sent too"
    );
    adapter.shutdown().await;
}
