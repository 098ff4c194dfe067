//! The mock platform's Matrix side: a homeserver's client-server API as a bot uses it,
//! written from the spec (matrix-org/matrix-spec,
//! <https://spec.matrix.org/latest/client-server-api/>) and Synapse's observed behaviour as
//! docs/research/matrix-client-server.md records them, not from any adapter.
//!
//! On the same port as the rest of the mock, every path under `/_matrix/`; JSON answers,
//! errors as `{"errcode", "error"}` (`errors.rs`), the token as `Authorization: Bearer …` or
//! `?access_token=` (`auth.rs`). Endpoints:
//! - `GET /_matrix/client/versions` (no token) and `GET …/v3/account/whoami`.
//! - `GET …/v3/sync`: the long poll (`sync.rs`), over one event stream whose positions are
//!   the tokens (`state.rs`, `tokens.rs`), filtered (`filter.rs`), with [`MatrixFault`]s.
//! - `GET …/v3/rooms/{roomId}/messages` (`messages.rs`): paging back into a limited
//!   timeline's gap.
//! - `PUT …/v3/rooms/{roomId}/send/{eventType}/{txnId}` (`send.rs`), idempotent per
//!   transaction id, recorded with the other platforms' posts
//!   ([`Platform::Matrix`](super::Platform::Matrix)) and failed by their
//!   [`SendFault`](super::SendFault)s; the sent event comes back in `/sync` as the bot's own
//!   echo.
//! - `GET …/v3/rooms/{roomId}/state/{eventType}/{stateKey}`, `GET …/v3/joined_rooms`, and
//!   `POST`/`GET …/v3/user/{userId}/filter[/{filterId}]` (`endpoint.rs`).
//! - `POST /_matrix/media/v3/upload`, `GET /_matrix/client/v1/media/config` and `GET
//!   /_matrix/client/v1/media/download/{serverName}/{mediaId}` (`media.rs`): the content
//!   repository. An upload's body may be up to
//!   [`MAX_UPLOAD_BODY`](super::http::MAX_UPLOAD_BODY); every other request's stays under the
//!   mock's 1 MiB. A sent `m.image`, `m.file`, `m.audio` or `m.video` whose `url` names
//!   uploaded content is recorded with that content as the post's file.
//!
//! Any other path under `/_matrix/` is 404 `M_UNRECOGNIZED` (405 for a wrong method).

mod auth;
pub(super) mod config;
mod endpoint;
mod errors;
mod events;
mod faults;
mod filter;
mod handle;
mod media;
mod messages;
mod send;
mod state;
mod stats;
mod sync;
mod tokens;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

pub use config::MatrixConfig;
pub use faults::MatrixFault;
pub use stats::MatrixStats;

use super::http::RequestHead;
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{BodyLimit, Side};
use endpoint::Route;
use state::MatrixState;

/// Matrix's side of the mock: the homeserver's state, and the send record `send` writes.
pub(super) struct Matrix {
    state: MatrixState,
    posts: Arc<PostRecord>,
}

impl Matrix {
    pub(super) fn new(config: MatrixConfig, posts: Arc<PostRecord>) -> Self {
        Matrix {
            state: MatrixState::new(config),
            posts,
        }
    }

    /// One request under `/_matrix/`.
    async fn answer(
        &self,
        head: &RequestHead,
        body: &[u8],
        shutdown: watch::Receiver<bool>,
    ) -> Reply {
        let state = &self.state;
        let route = match endpoint::route(head) {
            Ok(route) => route,
            Err(answer) => return Reply::Answer(answer),
        };
        tracing::debug!(method = %head.method, path = %head.path, "mock matrix request");
        let answer = match route {
            Route::Sync => return sync::sync(head, state, shutdown).await,
            Route::Send(path) => return send::send(head, body, path, state, &self.posts),
            Route::Versions => endpoint::versions(),
            Route::Whoami => endpoint::whoami(head, state),
            Route::JoinedRooms => endpoint::joined_rooms(head, state),
            Route::Messages(room) => messages::messages(head, &room, state),
            Route::State {
                room,
                event_type,
                state_key,
            } => endpoint::room_state(head, &room, &event_type, &state_key, state),
            Route::UploadFilter(user) => endpoint::upload_filter(head, body, &user, state),
            Route::Filter { user, id } => endpoint::get_filter(head, &user, &id, state),
            Route::Media { server, id } => media::download(head, &server, &id, state),
            Route::Upload => media::upload(head, body, state),
            Route::MediaConfig => media::config(head, state),
        };
        Reply::Answer(answer)
    }
}

impl Side for Matrix {
    /// An upload's body is a whole file: read up to the mock's upload cap, and refused past
    /// it as the homeserver refuses a file over its limit.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        (head.method == "POST" && head.path == endpoint::MEDIA_UPLOAD).then_some(BodyLimit {
            max: super::http::MAX_UPLOAD_BODY,
            too_large: media::too_large,
        })
    }

    /// Every path under `/_matrix/`; `/sync` answers in its own time.
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        shutdown: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        if !head.path.starts_with(endpoint::PREFIX) {
            return None;
        }
        Some(Box::pin(self.answer(head, body, shutdown.clone())))
    }
}
