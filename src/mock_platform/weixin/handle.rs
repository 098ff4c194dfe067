//! The Weixin side of the handle: what a test drives (messages, faults, tokens, the QR login)
//! and reads (ids, context tokens, counters). Sends show in the shared `posts()` and
//! `send_attempts()`.

use serde_json::json;

use super::super::handle::MockPlatform;
use super::cdn::{self, hex_of};
use super::codec;
use super::faults::{Armed, WeixinFault};
use super::qr_logins::QrStep;
use super::state::WeixinState;
use super::stats::WeixinStats;
use super::{Weixin, MOCK_PEER};

/// The Weixin side of the handle.
impl MockPlatform {
    fn weixin(&self) -> &WeixinState {
        &self.side::<Weixin>().state
    }

    /// `n` text messages from [`MOCK_PEER`]; returns their message ids, in decimal.
    pub fn weixin_emit(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let k = self.weixin().lock().log.len() + 1;
                self.weixin_emit_text(MOCK_PEER, &format!("weixin message {k}"))
            })
            .collect()
    }

    /// One text message from `from` (a `…@im.wechat` id) with a fresh `context_token`, which
    /// becomes the one a send to `from` must echo; returns its message id, in decimal.
    pub fn weixin_emit_text(&self, from: &str, text: &str) -> String {
        self.weixin().emit(from, text).to_string()
    }

    /// One message from `from` with one media `item` whose `bytes` are put on the mock's CDN,
    /// encrypted under a new key spelt as `key` says; with a `full_url` on `full_url_base`
    /// (`{base}/download?encrypted_query_param=…`) when given. Returns its message id.
    pub fn weixin_emit_media(
        &self,
        from: &str,
        item: WeixinItem,
        bytes: &[u8],
        key: WeixinKeyForm,
        full_url_base: Option<&str>,
    ) -> String {
        let raw = cdn::random_key();
        let param = self.weixin().lock().cdn.put(bytes, &raw);
        let mut media = json!({"encrypt_query_param": param, "encrypt_type": 1});
        match key {
            WeixinKeyForm::ImageHex => {}
            WeixinKeyForm::Base64Raw => media["aes_key"] = json!(codec::base64_encode(&raw)),
            WeixinKeyForm::Base64Hex => {
                media["aes_key"] = json!(codec::base64_encode(hex_of(&raw).as_bytes()))
            }
        }
        if let Some(base) = full_url_base {
            let escaped: String = param
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect();
            media["full_url"] = json!(format!("{base}/download?encrypted_query_param={escaped}"));
        }
        let value = match item {
            WeixinItem::Image => {
                let mut image = json!({"media": media, "mid_size": bytes.len() / 16 * 16 + 16});
                if matches!(key, WeixinKeyForm::ImageHex) {
                    image["aeskey"] = json!(hex_of(&raw));
                }
                json!({"type": 2, "image_item": image})
            }
            WeixinItem::File(name) => json!({"type": 4, "file_item": {
                "media": media, "file_name": name, "len": bytes.len().to_string()}}),
            WeixinItem::Voice(transcript) => {
                let mut voice = json!({"media": media, "encode_type": 6});
                if let Some(t) = transcript {
                    voice["text"] = json!(t);
                }
                json!({"type": 3, "voice_item": voice})
            }
            WeixinItem::Video => json!({"type": 5, "video_item": {
                "media": media, "video_size": bytes.len() / 16 * 16 + 16}}),
        };
        self.weixin().emit_items(from, json!([value])).to_string()
    }

    /// Every message id emitted, in order.
    pub fn weixin_message_ids(&self) -> Vec<String> {
        self.weixin().message_ids()
    }

    /// Arms a long-poll fault until cleared (`CursorReset` and `Duplicate`: for one poll),
    /// replacing any armed before.
    pub fn weixin_set_fault(&self, fault: WeixinFault) {
        self.weixin().set_fault(Some(Armed::lasting(fault)));
    }

    /// Arms a long-poll fault for the next `polls` authorised polls.
    pub fn weixin_set_fault_for(&self, fault: WeixinFault, polls: u32) {
        self.weixin().set_fault(Some(Armed::counted(fault, polls)));
    }

    pub fn weixin_clear_fault(&self) {
        self.weixin().set_fault(None);
    }

    /// Stops honouring every bot token issued so far (the configured one included): every
    /// call answers -14 until the client uses a token issued after this.
    pub fn weixin_expire_session(&self) {
        self.weixin().expire_session();
    }

    /// A new bot token the mock honours, as a QR login would give.
    pub fn weixin_issue_token(&self) -> String {
        self.weixin().issue_token()
    }

    /// The statuses QR logins report from now on, one per status request, the last one
    /// repeating (empty: the default `[Wait, Scanned, Confirmed]`).
    pub fn weixin_set_qr_script(&self, steps: Vec<QrStep>) {
        self.weixin().lock().qr.set_script(steps);
    }

    /// The newest `context_token` issued for `peer`: the only one a send to it may carry.
    pub fn weixin_context_token(&self, peer: &str) -> Option<String> {
        self.weixin().context_token(peer)
    }

    pub fn weixin_stats(&self) -> WeixinStats {
        self.weixin().stats()
    }
}

/// The media item of [`MockPlatform::weixin_emit_media`].
#[derive(Clone, Debug)]
pub enum WeixinItem {
    Image,
    /// A file, by its name.
    File(String),
    /// A voice note (SILK on the real platform), with iLink's transcript if any.
    Voice(Option<String>),
    Video,
}

/// How a message spells its file's key: Tencent's `parseAesKey` takes both base64 forms, and
/// an image may carry its own hex `aeskey` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeixinKeyForm {
    /// `image_item.aeskey`, 32 hex digits, and no `media.aes_key` (images only).
    ImageHex,
    /// `media.aes_key`, base64 of the 16 raw bytes.
    Base64Raw,
    /// `media.aes_key`, base64 of the key's 32 hex digits.
    Base64Hex,
}
