//! The mock platform's Weixin side (to be written from the platform's public docs).

pub(super) mod state;

use tokio::sync::watch;

pub use state::WeixinConfig;

use super::http::RequestHead;
use super::messages::Reply;
use super::state::Shared;

/// Serves a request for one of Weixin's endpoints; `None` for any other request.
pub(super) async fn serve(
    head: &RequestHead,
    body: &[u8],
    shared: &Shared,
    shutdown: watch::Receiver<bool>,
) -> Option<Reply> {
    let _ = (head, body, shared, shutdown);
    None
}
