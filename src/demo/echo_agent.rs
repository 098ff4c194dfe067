//! The demo's agent: a small OpenAI-compatible server in the demo process that answers every
//! message with `echo: TEXT`, so the demo shows a conversation with no model, no Python and no
//! network. The gateway reaches it through its OpenAI bridge (`[agent] kind = "openai"`), as it
//! would reach Hermes's API server.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// The requests it answered: the session and the text of each.
#[derive(Clone, Default)]
pub(super) struct Heard(Arc<Mutex<Vec<(String, String)>>>);

impl Heard {
    pub(super) fn count(&self) -> usize {
        self.0.lock().map_or(0, |h| h.len())
    }
}

/// Serve on a free loopback port, for as long as the demo runs; its base URL (up to `/v1`).
pub(super) async fn start() -> std::io::Result<(String, Heard)> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    let heard = Heard::default();
    let router = Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(heard.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((url, heard))
}

async fn answer(
    State(heard): State<Heard>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let text = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let session = headers
        .get("x-hermes-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if let Ok(mut h) = heard.0.lock() {
        h.push((session, text.clone()));
    }
    Json(json!({
        "id": "chatcmpl-demo",
        "object": "chat.completion",
        "model": "echo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("echo: {text}")},
                     "finish_reason": "stop"}]
    }))
}
