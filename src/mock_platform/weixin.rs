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
//! - `POST /ilink/bot/sendmessage`: sends, recorded with the other platforms' posts ([`send`]).
//! - `GET|POST /ilink/bot/get_bot_qrcode`, `GET /ilink/bot/get_qrcode_status`: the QR login
//!   ([`qr`]).
//! - `POST /ilink/bot/getconfig`, `sendtyping`, `msg/notifystart`, `msg/notifystop`: checked
//!   like every POST and answered with success (a typing ticket for `getconfig`), so a client
//!   that calls them around its messages meets no 404.
//!
//! Faults: [`WeixinFault`] for the long poll, [`SendFault`](super::SendFault) with
//! [`Platform::Weixin`](super::Platform::Weixin) for the sends.

mod checks;
pub(super) mod codec;
mod faults;
mod poll;
mod qr;
mod send;
pub(super) mod state;
mod stats;

use serde_json::json;
use tokio::sync::watch;

pub use faults::{WeixinFault, REPLAY};
pub use qr::QrStep;
pub use state::WeixinConfig;
pub use stats::WeixinStats;

use super::http::RequestHead;
use super::reply::Answer;
use super::reply::Reply;
use super::state::Shared;
use super::MockPlatform;
use faults::Armed;

/// The peer [`MockPlatform::weixin_emit`] sends from.
pub const MOCK_PEER: &str = "mockuser@im.wechat";

/// Serves a request for one of Weixin's endpoints; `None` for any other request.
pub(super) async fn serve(
    head: &RequestHead,
    body: &[u8],
    shared: &Shared,
    shutdown: watch::Receiver<bool>,
) -> Option<Reply> {
    let endpoint = head.path.strip_prefix("/ilink/bot/")?;
    let state = &shared.weixin;
    let reply = match (head.method.as_str(), endpoint) {
        ("POST", "getupdates") => poll::get_updates(head, body, state, shutdown).await,
        ("POST", "sendmessage") => send::send_message(head, body, shared),
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
    };
    Some(reply)
}

/// The Weixin side of the handle.
impl MockPlatform {
    /// `n` text messages from [`MOCK_PEER`]; returns their message ids, in decimal.
    pub fn weixin_emit(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let k = self.shared.weixin.lock().log.len() + 1;
                self.weixin_emit_text(MOCK_PEER, &format!("weixin message {k}"))
            })
            .collect()
    }

    /// One text message from `from` (a `…@im.wechat` id) with a fresh `context_token`, which
    /// becomes the one a send to `from` must echo; returns its message id, in decimal.
    pub fn weixin_emit_text(&self, from: &str, text: &str) -> String {
        self.shared.weixin.emit(from, text).to_string()
    }

    /// Every message id emitted, in order.
    pub fn weixin_message_ids(&self) -> Vec<String> {
        self.shared.weixin.message_ids()
    }

    /// Arms a long-poll fault until cleared (`CursorReset` and `Duplicate`: for one poll),
    /// replacing any armed before.
    pub fn weixin_set_fault(&self, fault: WeixinFault) {
        self.shared.weixin.set_fault(Some(Armed::lasting(fault)));
    }

    /// Arms a long-poll fault for the next `polls` authorised polls.
    pub fn weixin_set_fault_for(&self, fault: WeixinFault, polls: u32) {
        self.shared
            .weixin
            .set_fault(Some(Armed::counted(fault, polls)));
    }

    pub fn weixin_clear_fault(&self) {
        self.shared.weixin.set_fault(None);
    }

    /// Stops honouring every bot token issued so far (the configured one included): every
    /// call answers -14 until the client uses a token issued after this.
    pub fn weixin_expire_session(&self) {
        self.shared.weixin.expire_session();
    }

    /// A new bot token the mock honours, as a QR login would give.
    pub fn weixin_issue_token(&self) -> String {
        self.shared.weixin.issue_token()
    }

    /// The statuses QR logins report from now on, one per status request, the last one
    /// repeating (empty: the default `[Wait, Scanned, Confirmed]`).
    pub fn weixin_set_qr_script(&self, steps: Vec<QrStep>) {
        self.shared.weixin.lock().qr.set_script(steps);
    }

    /// The newest `context_token` issued for `peer`: the only one a send to it may carry.
    pub fn weixin_context_token(&self, peer: &str) -> Option<String> {
        self.shared.weixin.context_token(peer)
    }

    pub fn weixin_stats(&self) -> WeixinStats {
        self.shared.weixin.stats()
    }
}
