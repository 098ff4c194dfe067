//! A hostile platform on loopback: an HTTP server that answers each path from a script the
//! test writes (status and raw body, the last answer repeated), and records every request.
//!
//! The mock platform is written from the platforms' docs and behaves as they do; this one
//! says whatever a test wants, byte for byte: JSON with a lone surrogate, a `retry_after` of
//! `1e308`, an `update_id` past `i64::MAX`, an error that quotes the bot token back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One answer: its status, its body and any headers beyond the content type, sent as they
/// are.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    /// How long the answer is held before it is sent, as a long poll holds a quiet one.
    pub(crate) held: Duration,
}

pub(crate) fn answer(status: u16, body: impl Into<String>) -> Answer {
    Answer {
        status,
        body: body.into(),
        headers: Vec::new(),
        held: Duration::ZERO,
    }
}

impl Answer {
    /// The same answer with the header `name: value` too (`Retry-After: 0`).
    pub(crate) fn header(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }

    /// The same answer, held `d` before it is sent.
    pub(crate) fn held(mut self, d: Duration) -> Answer {
        self.held = d;
        self
    }

    async fn into_response(self) -> Response {
        tokio::time::sleep(self.held).await;
        let mut response = (
            StatusCode::from_u16(self.status).unwrap(),
            [("content-type", "application/json")],
            self.body,
        )
            .into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value.parse().unwrap());
        }
        response
    }
}

/// A request as the server received it, and when.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) path: String,
    /// The query string, undecoded; empty when there is none.
    pub(crate) query: String,
    pub(crate) body: String,
    pub(crate) at: Instant,
}

/// Makes the answer to a request, the n-th (from 0) to its path.
type Generator = Box<dyn Fn(&Request, usize) -> Answer + Send>;

#[derive(Default)]
struct Script {
    /// Path suffix → the answers still to give; the last one is repeated.
    answers: HashMap<String, Vec<Answer>>,
    /// Path suffix → the answer to each request, made when it comes.
    generated: HashMap<String, Generator>,
    requests: Vec<Request>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Script>>);

pub(crate) struct HostileServer {
    addr: SocketAddr,
    shared: Shared,
    _rt: tokio::runtime::Runtime,
}

impl HostileServer {
    pub(crate) fn start() -> HostileServer {
        let rt = crate::mock_runtime::mock_runtime();
        let shared = Shared::default();
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(shared.clone());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        HostileServer {
            addr,
            shared,
            _rt: rt,
        }
    }

    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answer requests whose path ends with `suffix` with `answers`, in order, then the last
    /// one again and again.
    pub(crate) fn script(&self, suffix: &str, answers: Vec<Answer>) {
        self.lock().answers.insert(suffix.to_owned(), answers);
    }

    /// Answer the n-th request whose path ends with `suffix` (from 0) with `make(n)`.
    pub(crate) fn generate(&self, suffix: &str, make: impl Fn(usize) -> Answer + Send + 'static) {
        self.answer_each(suffix, move |_, n| make(n));
    }

    /// Answer each request whose path ends with `suffix` with `make(request, n)`, `n` its
    /// place among them (from 0).
    pub(crate) fn answer_each(
        &self,
        suffix: &str,
        make: impl Fn(&Request, usize) -> Answer + Send + 'static,
    ) {
        self.lock()
            .generated
            .insert(suffix.to_owned(), Box::new(make));
    }

    /// The requests whose path ends with `suffix`, in order.
    pub(crate) fn requests(&self, suffix: &str) -> Vec<Request> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.path.ends_with(suffix))
            .cloned()
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        self.shared.0.lock().unwrap()
    }
}

async fn serve(State(shared): State<Shared>, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let answer = {
        let mut script = shared.0.lock().unwrap();
        script.requests.push(Request {
            path: path.clone(),
            query: uri.query().unwrap_or_default().to_owned(),
            body: String::from_utf8_lossy(&body).into_owned(),
            at: Instant::now(),
        });
        let generated = script
            .generated
            .iter()
            .find(|(suffix, _)| path.ends_with(suffix.as_str()))
            .map(|(suffix, make)| (suffix.clone(), make));
        if let Some((suffix, make)) = generated {
            let mut matching = script
                .requests
                .iter()
                .filter(|r| r.path.ends_with(suffix.as_str()));
            let n = matching.clone().count();
            let request = matching.next_back().expect("the request just recorded");
            Some(make(request, n - 1))
        } else {
            script
                .answers
                .iter_mut()
                .find(|(suffix, _)| path.ends_with(suffix.as_str()))
                .and_then(|(_, answers)| {
                    if answers.len() > 1 {
                        Some(answers.remove(0))
                    } else {
                        answers.first().cloned()
                    }
                })
        }
    };
    match answer {
        Some(a) => a.into_response().await,
        None => {
            // Nothing scripted: a quiet long poll, held a little as a real one would be.
            tokio::time::sleep(Duration::from_millis(200)).await;
            (StatusCode::NOT_FOUND, "no answer scripted").into_response()
        }
    }
}
