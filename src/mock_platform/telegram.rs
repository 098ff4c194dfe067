//! The mock platform's Telegram side: the Bot API (https://core.telegram.org/bots/api),
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
//! - `sendMessage` (`send.rs`), recorded with the other platforms' posts
//!   ([`Platform::Telegram`](super::Platform::Telegram)) and failed by their
//!   [`SendFault`](super::SendFault)s.

mod answers;
mod config;
mod faults;
mod handle;
mod objects;
mod params;
mod poll;
mod send;
pub(super) mod state;
mod stats;
mod webhook;

use tokio::sync::watch;

pub use config::TelegramConfig;
pub use faults::TelegramFault;
pub use stats::TelegramStats;

use super::http::RequestHead;
use super::reply::Reply;
use super::state::Shared;
use answers::{NOT_FOUND, UNAUTHORIZED};
use params::Params;

/// Serves a request for one of Telegram's endpoints; `None` for any other request.
pub(super) async fn serve(
    head: &RequestHead,
    body: &[u8],
    shared: &Shared,
    shutdown: watch::Receiver<bool>,
) -> Option<Reply> {
    let (token, method) = head.path.strip_prefix("/bot")?.split_once('/')?;
    if token.is_empty() {
        return None;
    }
    let method = method.to_ascii_lowercase();
    let token_ok = token == shared.config.telegram.token;
    let params = Params::parse(head, body);
    tracing::debug!(%method, token_ok, "mock telegram request");
    let params = match params {
        Ok(params) => params,
        Err(_) if !token_ok => return Some(Reply::Answer(answers::error(401, UNAUTHORIZED))),
        Err(answer) => return Some(Reply::Answer(answer)),
    };
    if method == "sendmessage" {
        return Some(send::handle(token_ok, &params, shared));
    }
    if !token_ok {
        return Some(Reply::Answer(answers::error(401, UNAUTHORIZED)));
    }
    let state = &shared.telegram;
    let answer = match method.as_str() {
        "getupdates" => return Some(poll::get_updates(&params, shared, shutdown).await),
        "getme" => answers::ok(objects::me(&shared.config.telegram)),
        "getwebhookinfo" => webhook::info(state),
        "setwebhook" => webhook::set(&params, state),
        "deletewebhook" => webhook::delete(&params, state),
        _ => answers::error(404, NOT_FOUND),
    };
    Some(Reply::Answer(answer))
}
