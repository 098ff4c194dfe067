//! The mock platform's Mattermost side: REST v4 and the WebSocket a bot uses, written from
//! Mattermost's public API reference (api.mattermost.com: "WebSocket", "Create a post",
//! "Get posts for a channel", "Get the channels of a user"), the server's sources as the
//! `search` tool holds them (`server/channels/app/platform/web_conn.go`, `app/post.go`'s
//! `deduplicateCreatePost` and `PendingPostIDsCacheTTL`, `model/websocket_message.go`), and
//! the official clients' sources (mattermostdriver's `websocket.py`, which waits for a
//! `hello` whose `seq` is 0; `@mattermost/client`'s `websocket.ts`), not from any adapter.
//!
//! On the same port as the rest of the mock:
//! - `GET /api/v4/websocket` (upgrade): `hello` at once with a valid `Authorization: Bearer`,
//!   else after an `authentication_challenge`; then `posted` events, numbered by `seq`. An
//!   upgrade with `?connection_id=ID&sequence_number=N` (and the token) resumes connection
//!   ID as the server does (`hub.rs`, with its sources): the events from N replayed from the
//!   dead queue (its last 128) and what was broadcast while it was away (up to 256), with no
//!   `hello`; or, past what it holds, a `hello` with a new connection id. Each connection's
//!   outcome is in [`MattermostStats::websockets`].
//! - `GET /api/v4/users/me`, `GET /api/v4/users/me/channels`,
//!   `GET /api/v4/channels/{id}/posts?since=MS` and `POST /api/v4/posts` (`endpoint.rs`). An
//!   accepted post comes back as a `posted` event, as the server broadcasts the bot's own
//!   posts; a `pending_post_id` seen within 30 s answers with the first post.
//! - `GET /api/v4/files/{id}` and `GET /api/v4/files/{id}/info` for a post's attached files
//!   (`files.rs`).
//!
//! Faults: [`MattermostFault`] for the connections (half-open, deaf, dropped, closed), a
//! refused upgrade, a revoked token, redelivery (`mattermost_redeliver`: events broadcast
//! again), forgotten connections (`mattermost_forget_connections`: a restart), and [`SendFault`](super::SendFault) with
//! [`Platform::Mattermost`](super::post::Platform::Mattermost) for the posts.

pub(super) mod config;
mod connection;
mod endpoint;
mod faults;
mod files;
mod handle;
mod hub;
mod record;
mod state;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::timeout;

pub use config::{MattermostChannel, MattermostConfig, MattermostFile};
pub use faults::MattermostFault;
pub use record::{MattermostConnRecord, MattermostPostRecord, MattermostStats};

use super::http;
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{at_once, Side, Upgrade};
use state::MattermostState;

const WS_PATH: &str = "/api/v4/websocket";

/// A client that opens a socket and never finishes its handshake must not pin a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct Mattermost {
    state: Arc<MattermostState>,
    posts: Arc<PostRecord>,
}

impl Mattermost {
    pub(super) fn new(config: MattermostConfig, posts: Arc<PostRecord>) -> Self {
        Mattermost {
            state: Arc::new(MattermostState::new(config)),
            posts,
        }
    }
}

impl Side for Mattermost {
    fn serve<'a>(
        &'a self,
        head: &'a http::RequestHead,
        body: &'a [u8],
        _: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        endpoint::route(head, body, &self.state, &self.posts).map(at_once)
    }

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
            let connection_id = head.query_param("connection_id");
            if connection_id.as_deref().is_some_and(|c| !c.is_empty()) {
                state.count(|s| s.resume_asks += 1);
            }
            let token = endpoint::bearer(&head);
            let refused = match state.refused_upgrade() {
                Some(status) => Some(endpoint::app_error(
                    status,
                    "api.web_socket.connect.upgrade.app_error",
                    "Failed to upgrade websocket connection.",
                )),
                // A token in the header that the server refuses: no upgrade.
                None if token.is_some() && !state.authorised(token) => Some(endpoint::app_error(
                    401,
                    "api.context.session_expired.app_error",
                    "Invalid or expired session, please login again.",
                )),
                None => None,
            };
            if let Some(answer) = refused {
                state.count(|s| s.upgrades_refused += 1);
                return http::answer_consumed(stream, &head, &answer).await;
            }
            let ask = hub::Ask {
                connection_id,
                sequence_number: head.query_param("sequence_number"),
                authenticated: token.is_some(),
            };
            match timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::accept_async(stream)).await {
                Ok(Ok(ws)) => connection::run(ws, state, shutdown, ask).await,
                Ok(Err(error)) => tracing::debug!(%error, "mock mattermost handshake failed"),
                Err(_) => tracing::debug!("mock mattermost handshake timed out"),
            }
        }))
    }
}
