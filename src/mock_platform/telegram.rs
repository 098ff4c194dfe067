//! The mock platform's Telegram side: the Bot API (<https://core.telegram.org/bots/api>),
//! written from its public docs and the public server (tdlib/telegram-bot-api), not from any
//! adapter.
//!
//! On the same port as the rest of the mock, `/bot<token>/<method>` with the method's name in
//! any case and its parameters in the query string, a form or a JSON body; every answer is
//! `{"ok": true, "result": …}` or `{"ok": false, "error_code", "description"}` with the same
//! HTTP status. A wrong token is 401, an unknown method 404. Methods:
//! - `getUpdates`: the long poll (`poll.rs`), with [`TelegramFault`]s.
//! - `setWebhook`, `deleteWebhook`, `getWebhookInfo` (`webhook.rs`).
//! - `getMe`.
//! - `getFile`, and the files at `/file/bot<token>/<file_path>` (`files.rs`).
//! - `sendMessage` (`send.rs`), recorded with the other platforms' posts
//!   ([`Platform::Telegram`](super::Platform::Telegram)) and failed by their
//!   [`SendFault`](super::SendFault)s.
//! - `sendPhoto`, `sendDocument`, `sendAudio`, `sendVoice`, `sendVideo`, `sendAnimation`
//!   (`upload.rs`): a `multipart/form-data` upload, recorded and failed as `sendMessage`. Their
//!   bodies may be up to [`MAX_UPLOAD_BODY`]; every other
//!   method's stay under the mock's 1 MiB.

mod answers;
pub(super) mod config;
mod faults;
pub(super) mod files;
mod handle;
mod objects;
mod params;
mod poll;
mod send;
mod state;
mod stats;
mod upload;
mod webhook;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

pub use config::TelegramConfig;
pub use faults::TelegramFault;
pub use stats::TelegramStats;

use super::http::{RequestHead, MAX_UPLOAD_BODY};
use super::multipart::{self, Form};
use super::post_record::PostRecord;
use super::reply::Reply;
use super::side::{BodyLimit, Side};
use answers::{NOT_FOUND, UNAUTHORIZED};
use params::Params;
use state::TelegramState;

/// Telegram's side of the mock: the Bot API's state, and the send record `sendMessage` writes.
pub(super) struct Telegram {
    state: TelegramState,
    posts: Arc<PostRecord>,
}

impl Telegram {
    pub(super) fn new(config: TelegramConfig, posts: Arc<PostRecord>) -> Self {
        Telegram {
            state: TelegramState::new(config),
            posts,
        }
    }

    /// One Bot API request, once its path named a bot token and a method.
    async fn answer(
        &self,
        token: &str,
        method: &str,
        head: &RequestHead,
        body: &[u8],
        shutdown: watch::Receiver<bool>,
    ) -> Reply {
        let method = method.to_ascii_lowercase();
        let token_ok = token == self.state.config.token;
        tracing::debug!(%method, token_ok, "mock telegram request");
        let form = match read_form(head, body).await {
            Ok(form) => form,
            Err(_) if !token_ok => return Reply::Answer(answers::error(401, UNAUTHORIZED)),
            Err(answer) => return Reply::Answer(answer),
        };
        let params = match &form {
            Some(form) => Ok(Params::from_form(head, form)),
            None => Params::parse(head, body),
        };
        let params = match params {
            Ok(params) => params,
            Err(_) if !token_ok => return Reply::Answer(answers::error(401, UNAUTHORIZED)),
            Err(answer) => return Reply::Answer(answer),
        };
        if method == "sendmessage" {
            return send::handle(token_ok, &params, &self.state, &self.posts);
        }
        if let Some(kind) = upload::Kind::of(&method) {
            let (state, posts) = (&self.state, &self.posts);
            return upload::handle(kind, token_ok, &params, form.as_ref(), state, posts);
        }
        if !token_ok {
            return Reply::Answer(answers::error(401, UNAUTHORIZED));
        }
        let state = &self.state;
        let answer = match method.as_str() {
            "getupdates" => return poll::get_updates(&params, state, shutdown).await,
            "getme" => answers::ok(objects::me(&state.config)),
            "getwebhookinfo" => webhook::info(state),
            "setwebhook" => webhook::set(&params, state),
            "deletewebhook" => webhook::delete(&params, state),
            "sendchataction" => send::chat_action(&params, &self.posts),
            "getfile" => state.files.get_file(params.get("file_id").as_deref()),
            _ => answers::error(404, NOT_FOUND),
        };
        Reply::Answer(answer)
    }
}

/// The body's form when it is `multipart/form-data` (any method may be called that way, and
/// the upload methods must be), or the Bot API's 400 when it is not a readable one.
async fn read_form(head: &RequestHead, body: &[u8]) -> Result<Option<Form>, super::reply::Answer> {
    if !multipart::is_multipart(head) {
        return Ok(None);
    }
    match multipart::parse(head, body).await {
        Ok(form) => Ok(Some(form)),
        Err(error) => Err(answers::bad_request(&format!(
            "can't parse multipart/form-data request: {error}"
        ))),
    }
}

impl Side for Telegram {
    /// An upload method's body may hold a file of up to 50 MB ("Sending files"), so it is
    /// read up to the mock's upload cap; a larger one is refused as the Bot API refuses it.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        let (_, method) = head.path.strip_prefix("/bot")?.split_once('/')?;
        upload::Kind::of(method)?;
        Some(BodyLimit {
            max: MAX_UPLOAD_BODY,
            too_large: upload::too_large,
        })
    }

    /// `/bot<token>/<method>`, and the files at `/file/bot<token>/<path>`; the long poll
    /// answers in its own time.
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        shutdown: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        if let Some(rest) = head.path.strip_prefix("/file/bot") {
            let (token, path) = rest.split_once('/')?;
            let answer = if token == self.state.config.token {
                self.state.files.download(path)
            } else {
                answers::error(401, UNAUTHORIZED)
            };
            return Some(Box::pin(std::future::ready(Reply::Answer(answer))));
        }
        let (token, method) = head.path.strip_prefix("/bot")?.split_once('/')?;
        if token.is_empty() {
            return None;
        }
        let shutdown = shutdown.clone();
        Some(Box::pin(self.answer(token, method, head, body, shutdown)))
    }
}
