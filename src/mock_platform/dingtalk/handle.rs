//! The DingTalk side of the handle: what a test drives (robot messages, faults, refusals) and
//! reads (messages and their pushes, counters). Posts show in the shared `posts()` and
//! `send_attempts()` under [`Platform::DingTalk`](super::super::post::Platform::DingTalk).

use super::super::handle::MockPlatform;
use super::record::{
    DingTalkConnRecord, DingTalkEventRecord, DingTalkFault, DingTalkStats, OpenRefusal,
};
use super::state::DingTalkState;
use super::DingTalk;

impl MockPlatform {
    fn dingtalk(&self) -> &DingTalkState {
        &self.side::<DingTalk>().state
    }

    /// Send Stream clients to `base` (`ws://HOST:PORT`, a proxy in front of this mock) from
    /// the next `connections/open` on.
    pub fn set_dingtalk_ws_base(&self, base: String) {
        self.dingtalk()
            .set_ws_url(format!("{base}{}", super::WS_PATH));
    }

    /// `n` messages from the first staff member in the first group; their `msgId`s.
    pub fn dingtalk_emit(&self, n: usize) -> Vec<String> {
        let c = &self.dingtalk().config;
        let (group, staff) = (c.groups[0].clone(), c.staff[0].clone());
        (0..n)
            .map(|_| {
                let k = self.dingtalk().events().len() + 1;
                self.dingtalk()
                    .emit(&group, &staff, &format!("dingtalk message {k}"))
            })
            .collect()
    }

    /// One message from `sender` in `conversation` (a configured group, or a 1:1 chat).
    pub fn dingtalk_emit_text(&self, conversation: &str, sender: &str, text: &str) -> String {
        self.dingtalk().emit(conversation, sender, text)
    }

    /// A picture message of `bytes` (a PNG) from `sender` in `conversation`; its `msgId`.
    pub fn dingtalk_emit_picture(
        &self,
        conversation: &str,
        sender: &str,
        bytes: Vec<u8>,
    ) -> String {
        self.dingtalk().emit_picture(conversation, sender, bytes)
    }

    /// File links point to `host` (`scheme://host[:port]`) instead of this mock; `None`: here.
    pub fn dingtalk_set_file_host(&self, host: Option<String>) {
        self.dingtalk().files.set_host(host);
    }

    pub fn dingtalk_set_fault(&self, fault: DingTalkFault) {
        self.dingtalk().set_fault(fault);
    }

    /// SYSTEM `disconnect` on every open connection, each followed on the same socket by `n`
    /// new robot messages, pushed before the server stopped pushing there; their `msgId`s.
    pub fn dingtalk_disconnect_delivering(&self, n: usize) -> Vec<String> {
        self.dingtalk().disconnect_delivering(n)
    }

    /// Every Stream connection so far, in the order they opened.
    pub fn dingtalk_connections(&self) -> Vec<DingTalkConnRecord> {
        self.dingtalk().connections()
    }

    /// What `connections/open` answers instead of an endpoint; `None` for endpoints.
    pub fn dingtalk_refuse_open(&self, refusal: Option<OpenRefusal>) {
        self.dingtalk().refuse_open(refusal);
    }

    /// The app's credentials refused everywhere (`true`), or good again.
    pub fn dingtalk_revoke(&self, revoked: bool) {
        self.dingtalk().revoke(revoked);
    }

    pub fn dingtalk_events(&self) -> Vec<DingTalkEventRecord> {
        self.dingtalk().events()
    }

    pub fn dingtalk_stats(&self) -> DingTalkStats {
        self.dingtalk().stats()
    }
}
