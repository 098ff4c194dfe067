//! The mock platform's Weixin side: Tencent's iLink bot HTTP API, through which WeChat
//! personal accounts run bots.
//!
//! Written from Tencent's protocol doc for its OpenClaw channel plugin (`docs/protocol.md` in
//! github.com/Tencent/openclaw-weixin: headers, `base_info`, the endpoints, `WeixinMessage`,
//! the QR statuses), hermes-agent's client (`gateway/platforms/weixin.py` in
//! github.com/NousResearch/hermes-agent: what it sends, which codes it acts on: -14 session
//! expired, -2 frequency limit) and the protocol write-up at
//! chihao.li/blog/en/wechat-clawbot-ilink-protocol. Each submodule says what the mock assumes
//! where they are silent.
//!
//! On the same port as the rest of the mock:
//! - `POST /ilink/bot/getupdates`: the long poll over the mock's message log ([`poll`]).
//! - `POST /ilink/bot/sendmessage`: sends, recorded with the other platforms' posts ([`send`]);
//!   a media item's file is read back from the CDN and recorded as the post's file.
//! - `POST /ilink/bot/getuploadurl`, `POST /c2c/upload`, `GET /c2c/download`: the CDN, its
//!   files AES-128-ECB encrypted ([`cdn`]).
//! - `GET|POST /ilink/bot/get_bot_qrcode`, `GET /ilink/bot/get_qrcode_status`: the QR login
//!   ([`qr`]).
//! - `POST /ilink/bot/getconfig`, `sendtyping`, `msg/notifystart`, `msg/notifystop`: checked
//!   like every POST and answered with success (a typing ticket for `getconfig`), so a client
//!   that calls them around its messages meets no 404.
//!
//! Faults: [`WeixinFault`] for the long poll, [`SendFault`](super::SendFault) with
//! [`Platform::Weixin`](super::Platform::Weixin) for the sends.

pub(super) mod cdn;
mod checks;
pub(super) mod codec;
pub(super) mod config;
mod faults;
mod handle;
mod poll;
mod qr;
mod qr_logins;
mod send;
mod state;
mod stats;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::watch;

pub use config::WeixinConfig;
pub use faults::{WeixinFault, REPLAY};
pub use handle::{WeixinItem, WeixinKeyForm};
pub use qr_logins::QrStep;
pub use stats::WeixinStats;

use super::http::RequestHead;
use super::http::MAX_UPLOAD_BODY;
use super::post_record::PostRecord;
use super::reply::{Answer, Reply};
use super::side::{BodyLimit, Side};
use state::WeixinState;

/// The peer [`MockPlatform::weixin_emit`](super::MockPlatform::weixin_emit) sends from.
pub const MOCK_PEER: &str = "mockuser@im.wechat";

/// Weixin's side of the mock: iLink's state, and the send record `sendmessage` writes.
pub(super) struct Weixin {
    state: WeixinState,
    posts: Arc<PostRecord>,
    /// The mock's own `http://` address, which an `upload_full_url` is on.
    http_base: String,
}

impl Weixin {
    pub(super) fn new(config: WeixinConfig, http_base: String, posts: Arc<PostRecord>) -> Self {
        Weixin {
            state: WeixinState::new(config),
            posts,
            http_base,
        }
    }
}

impl Side for Weixin {
    /// A CDN upload is a whole file: read up to the mock's upload cap.
    fn body_limit(&self, head: &RequestHead) -> Option<BodyLimit> {
        (head.path == "/c2c/upload").then_some(BodyLimit {
            max: MAX_UPLOAD_BODY,
            too_large: || Answer::raw(413, None, String::new()),
        })
    }

    /// `/ilink/bot/…`, every path under it (an unknown one gets iLink's 404), and the CDN's
    /// `/c2c/…`; the long poll answers in its own time.
    fn serve<'a>(
        &'a self,
        head: &'a RequestHead,
        body: &'a [u8],
        shutdown: &watch::Receiver<bool>,
    ) -> Option<BoxFuture<'a, Reply>> {
        if let Some(action) = head.path.strip_prefix(cdn::PREFIX) {
            let answer = match (head.method.as_str(), action) {
                ("POST", "upload") => cdn::upload(head, body, &self.state),
                ("GET", "download") => cdn::download(head, &self.state),
                _ => Answer::raw(404, None, String::new()),
            };
            return Some(Box::pin(std::future::ready(Reply::Answer(answer))));
        }
        let endpoint = head.path.strip_prefix("/ilink/bot/")?;
        let shutdown = shutdown.clone();
        Some(Box::pin(serve(self, endpoint, head, body, shutdown)))
    }
}

/// One iLink request, to `endpoint` (the path after `/ilink/bot/`).
async fn serve(
    weixin: &Weixin,
    endpoint: &str,
    head: &RequestHead,
    body: &[u8],
    shutdown: watch::Receiver<bool>,
) -> Reply {
    let state = &weixin.state;
    match (head.method.as_str(), endpoint) {
        ("POST", "getupdates") => poll::get_updates(head, body, state, shutdown).await,
        ("POST", "sendmessage") => send::send_message(head, body, state, &weixin.posts),
        ("POST", "getuploadurl") => {
            Reply::Answer(cdn::get_upload_url(head, body, state, &weixin.http_base))
        }
        ("GET" | "POST", "get_bot_qrcode") => Reply::Answer(qr::get_bot_qrcode(state)),
        ("GET", "get_qrcode_status") => Reply::Answer(qr::get_qrcode_status(head, state)),
        ("POST", "getconfig" | "sendtyping" | "msg/notifystart" | "msg/notifystop") => {
            Reply::Answer(match checks::check_post(head, body, state) {
                Err(expired) => expired,
                Ok(_) if endpoint == "getconfig" => {
                    let ticket = codec::base64_encode(codec::hex(32).as_bytes());
                    Answer::new(200, json!({"ret": 0, "typing_ticket": ticket}))
                }
                Ok(_) => Answer::new(200, checks::ok()),
            })
        }
        _ => Reply::Answer(Answer::new(
            404,
            json!({"ret": -1, "errmsg": "no such iLink endpoint in the mock"}),
        )),
    }
}
