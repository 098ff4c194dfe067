//! The Weixin side of the handle: what a test drives (messages, faults, tokens, the QR login)
//! and reads (ids, context tokens, counters). Sends show in the shared `posts()` and
//! `send_attempts()`.

use super::super::handle::MockPlatform;
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
