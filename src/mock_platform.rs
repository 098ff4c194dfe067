//! A loopback chat platform that speaks the QQ Bot / Discord gateway protocol (and Feishu's
//! long connection), with fault
//! switches. Used by the tests, the benchmarks and `hermes-svc demo`.
//!
//! One listener on 127.0.0.1 serves both the HTTP endpoints (token, gateway discovery) and the
//! WebSocket gateway, because that is how the real platforms look from a client: discover a URL
//! over HTTP, then hold a WebSocket. Sessions live apart from connections so that a client that
//! loses its connection can resume and get exactly the dispatches it missed; the event id log
//! lets a test account for every generated event (lost or duplicated).
//!
//! Feishu/Lark (`feishu`) shares the port: endpoint discovery, its protobuf long connection,
//! the tenant token and the message endpoints.
//!
//! The same port serves the platforms' message-send endpoints, which record what they accept
//! (`posts`) and every answer they give (`send_attempts`), so a test can count deliveries and
//! check a client's retries against the platform's dedupe rules and rate-limit waits.

mod config;
mod fault;
pub mod feishu;
mod http;
mod message_body;
mod messages;
mod opcode_gateway;
mod post;
mod post_record;
pub(crate) mod proxy;
mod reply;
mod send_attempt;
mod server;
mod shutdown;
mod state;
mod stats;
pub mod telegram;
#[cfg(test)]
mod tests;
mod websocket;
pub mod weixin;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{MockConfig, SessionStartLimit};
pub use fault::{Fault, SendFault};
pub use feishu::{
    ClientConfig, FeishuAck, FeishuConfig, FeishuEventRecord, FeishuFault, FeishuMessage,
    FeishuStats, Refusal,
};
pub use opcode_gateway::frames;
pub use post::{Platform, Post, SendAttempt, Target};
pub use proxy::BlackholeProxy;
pub(crate) use stats::MockStats;

use opcode_gateway::generator;
use state::Shared;

/// A running mock platform. Dropping it stops every task it started.
pub struct MockPlatform {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl MockPlatform {
    pub async fn start(config: MockConfig) -> std::io::Result<MockPlatform> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let dispatch_every = config.dispatch_every;
        let shared = Arc::new(Shared::new(config, format!("ws://{addr}/ws")));
        shared.feishu.set_ws_base(format!("ws://{addr}"));
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut tasks = vec![
            tokio::spawn(server::accept_loop(
                listener,
                shared.clone(),
                shutdown_rx.clone(),
            )),
            tokio::spawn(feishu::redelivery::run(shared.clone(), shutdown_rx.clone())),
        ];
        if let Some(every) = dispatch_every {
            tasks.push(tokio::spawn(generator::run(
                shared.gateway.clone(),
                every,
                shutdown_rx,
            )));
        }
        tracing::info!(%addr, "mock platform listening");
        Ok(MockPlatform {
            shared,
            addr,
            shutdown,
            tasks,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn http_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// Lets a test send clients through a proxy (or anywhere else) by changing only what
    /// discovery returns.
    pub fn set_advertised_ws_url(&self, url: String) {
        self.shared.gateway.set_advertised_ws_url(url);
    }

    pub fn set_fault(&self, fault: Fault) {
        self.shared.gateway.set_fault(fault);
    }

    pub fn clear_fault(&self) {
        self.shared.gateway.set_fault(Fault::None);
    }

    /// Arms a failure of one platform's send endpoints, replacing any armed before.
    pub fn set_send_fault(&self, platform: Platform, fault: SendFault) {
        self.shared.posts.set_fault(platform, Some(fault));
    }

    pub fn clear_send_fault(&self, platform: Platform) {
        self.shared.posts.set_fault(platform, None);
    }

    /// Every post the send endpoints accepted, in order of acceptance. Also served as JSON
    /// at `GET /_posts`, with the attempts.
    pub fn posts(&self) -> Vec<Post> {
        self.shared.posts.posts()
    }

    /// Every request to a send endpoint and its answer, accepted or not, in order of
    /// answer.
    pub fn send_attempts(&self) -> Vec<SendAttempt> {
        self.shared.posts.attempts()
    }

    /// Buffered in every session, so a session without a working connection gets these on its
    /// next resume.
    pub fn emit(&self, n: usize) {
        self.shared.gateway.generate(n);
    }

    /// One dispatch with exactly this type (`t`), event id and `d`, however hostile, in every
    /// session: for tests of what reaches a reader's terminal from a platform.
    pub fn emit_dispatch(&self, kind: &str, id: &str, d: serde_json::Value) {
        self.shared.gateway.generate_dispatch(kind, id, &d);
    }

    pub fn stats(&self) -> MockStats {
        self.shared.gateway.stats()
    }

    pub fn generated_event_ids(&self) -> Vec<String> {
        self.shared.gateway.event_ids()
    }

    /// Stop honouring every access token issued so far, as the platform does once their
    /// lifetime has passed (while a client slept, say). New ones are issued as usual.
    pub fn expire_access_tokens(&self) {
        self.shared.gateway.expire_access_tokens();
    }

    /// Unlike a plain drop, waits (briefly) for connection tasks to finish so a test that
    /// shuts down and then inspects its client sees the sockets closed.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        tracing::info!(addr = %self.addr, "mock platform stopped");
    }
}

impl Drop for MockPlatform {
    fn drop(&mut self) {
        // Dropping the shutdown sender already tells every task to stop; aborting as well
        // makes the stop immediate even if a task is parked on a slow peer.
        for task in &self.tasks {
            task.abort();
        }
    }
}
