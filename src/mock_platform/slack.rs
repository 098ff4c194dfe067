//! The mock platform's Slack side, Socket Mode and the Web API a Socket Mode bot calls,
//! written from Slack's public docs and the official SDKs' sources as
//! docs/research/slack-socket-mode.md records them (python-slack-sdk `socket_mode/`,
//! node-slack-sdk `socket-mode`, java-slack-sdk), not from any adapter.
//!
//! On the same port as the rest of the mock:
//! - `POST /api/apps.connections.open` (app-level token): a URL good for one connection.
//! - `GET /link/?ticket=…&app_id=…` (upgrade): the connection. `hello` first, then
//!   `events_api` envelopes, spread over the app's connections in turn; an envelope not acked
//!   within `ack_timeout` is delivered again (`retry_attempt` + 1, `retry_reason: timeout`,
//!   a new `envelope_id` by default, the same `event_id`), up to `max_retries` times, each
//!   retry waiting twice as long as the one before.
//! - `POST /api/auth.test` and `POST /api/chat.postMessage` (bot token). An accepted post is
//!   recorded with the other platforms' posts and comes back as an event with the bot's
//!   `bot_id`, as Slack echoes a bot's own messages.
//! - `POST /api/files.getUploadURLExternal`, the upload URL it hands out (on this port, its
//!   body up to [`MAX_UPLOAD_BODY`](super::http::MAX_UPLOAD_BODY)), and `POST
//!   /api/files.completeUploadExternal` (`files.rs`): a file shared into a channel is a post
//!   with its files, recorded and failed as `chat.postMessage`'s are.
//! - Files a user shares (`user_files.rs`): a `file_share` message's `files` (a Slack Connect
//!   file as its `check_file_info` stub), `GET /files-pri/{team}-{id}/[download/]{name}` for
//!   the bytes (the bot token with `files:read`, else Slack's HTML sign-in page with a 200),
//!   and `files.info`.
//!
//! Faults: [`SlackFault`] for the connections, [`OpenRefusal`] for `apps.connections.open`,
//! [`SendFault`](super::SendFault) with [`Platform::Slack`](super::post::Platform::Slack) for
//! the posts.

pub(super) mod config;
mod connection;
mod endpoint;
mod faults;
mod files;
mod handle;
mod record;
mod redelivery;
mod state;
mod user_files;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::timeout;

pub use config::SlackConfig;
pub use faults::{OpenRefusal, SlackFault};
pub use record::{SlackEventRecord, SlackStats};
pub use user_files::SlackFile;

use super::ack_timer;
use super::http::{self, RequestHead};
use super::post_record::PostRecord;
use super::reply::{Answer, Reply};
use super::side::{at_once, BodyLimit, Side, Upgrade};
use state::SlackState;

/// Where Socket Mode connections upgrade; `apps.connections.open` puts it in the URLs.
const WS_PATH: &str = "/link/";

/// A client that opens a socket and never finishes its handshake must not pin a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Slack's side of the mock: its state, and the send record `chat.postMessage` writes.
pub(super) struct Slack {
    state: Arc<SlackState>,
    files: files::Files,
    user_files: user_files::UserFiles,
    posts: Arc<PostRecord>,
}

impl Slack {
    /// `ws_base` is what `apps.connections.open` puts before [`WS_PATH`]: the mock's own
    /// `ws://` address; `http_base` its `http://` address, where the upload URLs point.
    pub(super) fn new(
        config: SlackConfig,
        ws_base: String,
        http_base: String,
        posts: Arc<PostRecord>,
    ) -> Self {
        let user_files = user_files::UserFiles::new(http_base.clone(), config.team_id.clone());
        Slack {
            state: Arc::new(SlackState::new(config, format!("{ws_base}{WS_PATH}"))),
            files: files::Files::new(http_base),
            user_files,
            posts,
        }
    }
}

impl Side for Slack {
    /// An upload URL takes a whole file: read up to the mock's upload cap.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        head.path
            .starts_with(files::UPLOAD_PREFIX)
            .then_some(BodyLimit {
                max: http::MAX_UPLOAD_BODY,
                too_large: files::too_large,
            })
    }

    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        let (state, posts) = (&self.state, &self.posts);
        user_files::route(head, body, state, &self.user_files)
            .or_else(|| files::route(head, body, state, &self.files, posts))
            .or_else(|| endpoint::route(head, body, state, posts))
            .map(at_once)
    }

    /// A connection, at [`WS_PATH`], with a ticket not used before.
    fn upgrade(
        self: Arc<Self>,
        upgrade: Box<Upgrade>,
    ) -> Result<BoxFuture<'static, ()>, Box<Upgrade>> {
        if upgrade.head.path != WS_PATH {
            return Err(upgrade);
        }
        let Upgrade {
            stream,
            head,
            shutdown,
            ..
        } = *upgrade;
        let state = self.state.clone();
        Ok(Box::pin(async move {
            let ticket = head.query_param("ticket").unwrap_or_default();
            if !state.take_ticket(&ticket) {
                // A used or unknown ticket: no upgrade (python-slack-sdk#1379).
                let refused = Answer::new(
                    401,
                    serde_json::json!({"ok": false, "error": "invalid_ticket"}),
                );
                return http::answer_consumed(stream, &head, &refused).await;
            }
            let debug_reconnects = head.query_param("debug_reconnects").as_deref() == Some("true");
            match timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::accept_async(stream)).await {
                Ok(Ok(ws)) => connection::run(ws, state, shutdown, debug_reconnects).await,
                Ok(Err(error)) => tracing::debug!(%error, "mock slack handshake failed"),
                Err(_) => tracing::debug!("mock slack handshake timed out"),
            }
        }))
    }

    /// The ack timer, which delivers again what was not acked in time.
    fn background(
        self: Arc<Self>,
        shutdown: watch::Receiver<bool>,
    ) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(ack_timer::run(self.state.clone(), shutdown)))
    }
}
