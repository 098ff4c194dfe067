//! A loopback chat platform that speaks the QQ Bot / Discord gateway protocol, with fault
//! switches. Used by the tests, the benchmarks and `hermes-svc demo`.
//!
//! One listener on 127.0.0.1 serves both the HTTP endpoints (token, gateway discovery) and the
//! WebSocket gateway, because that is how the real platforms look from a client: discover a URL
//! over HTTP, then hold a WebSocket. Sessions live apart from connections so that a client that
//! loses its connection can resume and get exactly the dispatches it missed; the event id log
//! lets a test account for every generated event (lost or duplicated).

mod connection;
// Public for the fuzz target `gateway_frame` (fuzz/), which decodes client frames with `parse`.
pub mod frames;
mod generator;
mod http;
pub mod proxy;
mod server;
mod session;
mod state;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use proxy::BlackholeProxy;

use state::Shared;

/// How the mock behaves when nothing is broken. Checks are off by default so that a test only
/// pays for the strictness it asks for.
#[derive(Clone, Debug)]
pub struct MockConfig {
    /// Advertised in Hello; the mock does not enforce it, clients are expected to honour it.
    pub heartbeat_interval: Duration,
    /// Generates one dispatch per session (connected or not) at this period, for soak-style
    /// runs that need a steady event stream without a driver.
    pub dispatch_every: Option<Duration>,
    /// When set, the token endpoint answers 401 to any other `clientSecret`.
    pub expected_secret: Option<String>,
    /// When set, Identify or Resume with any other token is closed with 4004.
    pub expected_token: Option<String>,
    /// What the token endpoint says in `expires_in`. An Identify or Resume that carries a QQ
    /// access token (`QQBot <token>`) the platform no longer honours is closed with 4004.
    pub token_lifetime: Duration,
    /// `session_start_limit` in `/gateway/bot`.
    pub session_start_limit: SessionStartLimit,
    /// When set, an Identify asking for any other intent is closed with 4014 ("intent not
    /// permitted"), as the platform does for an intent the bot was not granted.
    pub granted_intents: Option<u64>,
    /// Sent as READY's `resume_gateway_url` (Discord's: where a resume must connect).
    pub resume_gateway_url: Option<String>,
}

/// The `session_start_limit` object of `GET /gateway/bot` (Discord's, which QQ copies).
#[derive(Clone, Copy, Debug)]
pub struct SessionStartLimit {
    pub total: u32,
    pub remaining: u32,
    pub reset_after: Duration,
    pub max_concurrency: u32,
}

impl Default for SessionStartLimit {
    fn default() -> Self {
        SessionStartLimit {
            total: 1000,
            remaining: 1000,
            reset_after: Duration::from_secs(24 * 60 * 60),
            max_concurrency: 1,
        }
    }
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            heartbeat_interval: Duration::from_secs(1),
            dispatch_every: None,
            expected_secret: None,
            expected_token: None,
            token_lifetime: Duration::from_secs(7200),
            session_start_limit: SessionStartLimit::default(),
            granted_intents: None,
            resume_gateway_url: None,
        }
    }
}

/// A failure mode to inject. One-shot faults (`Close`, `Reconnect`, `InvalidSession`) act on the
/// connections open when they are set and then the fault returns to `None`; `Silent` and
/// `DropClientFrames` break the connections open when they are set and leave later connections
/// alone (so a client can recover by reconnecting); the rest persist until `clear_fault`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// Stops reading and writing on every current connection but keeps TCP open, like a peer
    /// that vanished without a FIN.
    Silent,
    /// Heartbeats go unanswered; everything else is normal.
    NoAck,
    /// Each heartbeat ACK is held back by this much.
    SlowAck(Duration),
    /// Current connections stop reading (so no ACK and no Pong) but keep writing dispatches.
    DropClientFrames,
    /// Closes every current connection with this close code.
    Close(u16),
    /// New TCP connections, HTTP included, are accepted and dropped at once.
    Refuse,
    /// A WebSocket upgrade request is answered with a plain 200 and closed.
    NoUpgrade,
    /// New WebSocket connections upgrade but never get Hello.
    NoHello,
    /// Every server frame is held back by this much.
    Slow(Duration),
    /// Sends op 7 (reconnect) on every current connection.
    Reconnect,
    /// Sends op 9 with this `d` on every current connection; `false` also drops the session.
    InvalidSession(bool),
    /// Every Identify is answered with op 9 (`d` false) and creates no session.
    RejectIdentify,
    /// Every Resume is accepted (replay and RESUMED), then the connection is closed at once
    /// with this code: a session the platform keeps taking back and dropping.
    CloseAfterResume(u16),
    /// A resume replays what was missed one frame per this long: a long replay that keeps
    /// making progress.
    SlowReplay(Duration),
}

/// Counters a test reads to assert what the client did. Connection counts are WebSocket
/// connections only (HTTP requests have their own counter); `live_connections` is a gauge.
/// Client frames are counted when received (valid or not), server frames when written, so
/// `dispatches_sent` includes replays and `events_generated` does not.
#[derive(Clone, Debug, Default)]
pub struct MockStats {
    pub connections: u64,
    pub live_connections: u64,
    pub identifies: u64,
    pub resumes: u64,
    pub heartbeats: u64,
    pub acks: u64,
    pub dispatches_sent: u64,
    pub events_generated: u64,
    pub http_requests: u64,
    /// The `seq` of the last successful resume, to check what a client claimed to have seen.
    pub last_resume_seq: Option<u64>,
    /// When each Identify arrived, in order.
    pub identify_times: Vec<std::time::Instant>,
    /// Connections closed with 4004 because their token was wrong or stale.
    pub token_rejections: u64,
    /// When each WebSocket connection was accepted, in order.
    pub connection_times: Vec<std::time::Instant>,
    /// WebSocket-level pings received from clients.
    pub ws_pings: u64,
}

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
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut tasks = vec![tokio::spawn(server::accept_loop(
            listener,
            shared.clone(),
            shutdown_rx.clone(),
        ))];
        if let Some(every) = dispatch_every {
            tasks.push(tokio::spawn(generator::run(
                shared.clone(),
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
        self.shared.set_advertised_ws_url(url);
    }

    pub fn set_fault(&self, fault: Fault) {
        self.shared.set_fault(fault);
    }

    pub fn clear_fault(&self) {
        self.shared.set_fault(Fault::None);
    }

    /// Buffered in every session, so a session without a working connection gets these on its
    /// next resume.
    pub fn emit(&self, n: usize) {
        self.shared.generate(n);
    }

    /// One dispatch with exactly this type (`t`), event id and `d`, however hostile, in every
    /// session: for tests of what reaches a reader's terminal from a platform.
    pub fn emit_dispatch(&self, kind: &str, id: &str, d: serde_json::Value) {
        self.shared.generate_dispatch(kind, id, &d);
    }

    pub fn stats(&self) -> MockStats {
        self.shared.stats()
    }

    pub fn generated_event_ids(&self) -> Vec<String> {
        self.shared.event_ids()
    }

    /// Stop honouring every access token issued so far, as the platform does once their
    /// lifetime has passed (while a client slept, say). New ones are issued as usual.
    pub fn expire_access_tokens(&self) {
        self.shared.expire_access_tokens();
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
