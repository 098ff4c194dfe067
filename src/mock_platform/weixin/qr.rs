//! The QR-code login: `get_bot_qrcode?bot_type=3` hands out a code and the URL to show as a
//! QR image (`qrcode_img_content`, a liteapp link; WeChat scans that, not the bare code), then
//! `get_qrcode_status?qrcode=…` reports `wait`, `scaned`, `scaned_but_redirect` (poll on at
//! `redirect_host`), `expired` (fetch a new code) or `confirmed` with the credentials:
//! `bot_token`, `ilink_bot_id`, `baseurl`, `ilink_user_id` (Tencent's protocol doc;
//! hermes-agent's `qr_login`). Both requests are unauthenticated.
//!
//! Assumptions where the sources are silent: the status endpoint answers at once (the real
//! one may hold the request); `redirect_host` and `baseurl` name the host the request came to
//! (its `Host` header, i.e. the mock itself); a confirmed code keeps answering `confirmed`
//! with the same token; an unknown code is `expired`. hermes-agent prefixes `https://` to a
//! redirect host, so following the mock's redirect takes a client that lets its tests
//! choose the scheme. `get_bot_qrcode` is served for GET (hermes-agent, the 1.x plugin) and
//! POST with `local_token_list` (the 2.x plugin), and any `bot_type` is taken.

use serde_json::json;

use super::codec;
use super::qr_logins::{Code, QrStep};
use super::state::WeixinState;
use crate::mock_platform::http::RequestHead;
use crate::mock_platform::reply::Answer;

pub(crate) fn get_bot_qrcode(state: &WeixinState) -> Answer {
    let qrcode = codec::hex(32);
    let mut inner = state.lock();
    inner.stats.qr_fetches += 1;
    inner.qr.codes.insert(qrcode.clone(), Code::Live);
    drop(inner);
    let img = format!("https://liteapp.weixin.qq.com/q/7GiQu1?qrcode={qrcode}&bot_type=3");
    Answer::new(
        200,
        json!({"qrcode": qrcode, "qrcode_img_content": img, "ret": 0}),
    )
}

pub(crate) fn get_qrcode_status(head: &RequestHead, state: &WeixinState) -> Answer {
    let host = head.header("host").unwrap_or("127.0.0.1").to_owned();
    let qrcode = head.query_param("qrcode").unwrap_or_default();
    let bot_id = &state.config.bot_id;
    let mut inner = state.lock();
    inner.stats.qr_status_polls += 1;
    let code = inner.qr.codes.get(&qrcode).cloned();
    let step = match code {
        None | Some(Code::Expired) => QrStep::Expired,
        Some(Code::Confirmed(token)) => return confirmed(&token, bot_id, &host, state),
        Some(Code::Live) => inner.qr.take_step(),
    };
    let body = match step {
        QrStep::Wait => json!({"status": "wait", "ret": 0}),
        QrStep::Scanned => json!({"status": "scaned", "ret": 0}),
        QrStep::Redirect => {
            json!({"status": "scaned_but_redirect", "redirect_host": host, "ret": 0})
        }
        QrStep::Expired => {
            if let Some(code) = inner.qr.codes.get_mut(&qrcode) {
                *code = Code::Expired;
            }
            json!({"status": "expired", "ret": 0})
        }
        QrStep::Confirmed => {
            let token = inner.issue_token(bot_id);
            inner
                .qr
                .codes
                .insert(qrcode.clone(), Code::Confirmed(token.clone()));
            return confirmed(&token, bot_id, &host, state);
        }
    };
    Answer::new(200, body)
}

fn confirmed(token: &str, bot_id: &str, host: &str, state: &WeixinState) -> Answer {
    Answer::new(
        200,
        json!({
            "status": "confirmed",
            "bot_token": token,
            "ilink_bot_id": bot_id,
            "baseurl": format!("http://{host}"),
            "ilink_user_id": state.config.user_id,
            "ret": 0,
        }),
    )
}
