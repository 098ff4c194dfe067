//! The mock platform's Telegram side (to be written from the platform's public docs).

pub(super) mod state;

use tokio::sync::watch;

pub use state::TelegramConfig;

use super::http::RequestHead;
use super::messages::Reply;
use super::state::Shared;

/// Serves a request for one of Telegram's endpoints; `None` for any other request.
pub(super) async fn serve(
    head: &RequestHead,
    body: &[u8],
    shared: &Shared,
    shutdown: watch::Receiver<bool>,
) -> Option<Reply> {
    let _ = (head, body, shared, shutdown);
    None
}
