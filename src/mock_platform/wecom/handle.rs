//! The WeCom side of the handle: what a test drives (callbacks, redeliveries, faults) and
//! reads (callbacks and their deliveries, the bot's posts, counters).

use super::super::handle::MockPlatform;
use super::faults::WeComFault;
use super::files::{WeComFileFault, WeComMedia};
use super::record::{WeComEventRecord, WeComPost, WeComStats};
use super::state::WeComState;
use super::{WeCom, WS_PATH};

impl MockPlatform {
    fn wecom(&self) -> &WeComState {
        &self.side::<WeCom>().state
    }

    /// Where the bot's long connection is: the `url` of a `wecom` adapter.
    pub fn wecom_url(&self) -> String {
        format!("ws://{}{WS_PATH}", self.addr())
    }

    /// `n` one-to-one messages from the mock's user; their msgids.
    pub fn wecom_emit(&self, n: usize) -> Vec<String> {
        let user = self.wecom().config.user_id.clone();
        (0..n)
            .map(|_| {
                let k = self.wecom().events().len() + 1;
                self.wecom()
                    .emit(&user, None, &format!("wecom message {k}"))
            })
            .collect()
    }

    /// One message from `from`, in group `chat` when given; its msgid.
    pub fn wecom_emit_text(&self, from: &str, chat: Option<&str>, text: &str) -> String {
        self.wecom().emit(from, chat, text)
    }

    /// A one-to-one message from `from` carrying `plain` behind an encrypted link on this mock
    /// (as `media` says, named `name` in the download's `Content-Disposition` when given),
    /// served damaged under `fault`; its msgid.
    pub fn wecom_emit_media(
        &self,
        from: &str,
        media: WeComMedia,
        plain: &[u8],
        name: Option<&str>,
        fault: Option<WeComFileFault>,
    ) -> String {
        let link = self.wecom().files.add(plain, name, fault);
        let url = format!("http://{}{}", self.addr(), link.path);
        let content = media.content(&url, &link.aeskey);
        self.wecom()
            .emit_content(from, None, &format!("{media:?}"), content)
    }

    /// Delivers callback `msgid` again, under a new `req_id`, as the docs' "for
    /// deduplication" `msgid` implies WeCom does; false for an unknown msgid.
    pub fn wecom_redeliver(&self, msgid: &str) -> bool {
        self.wecom().redeliver(msgid)
    }

    /// Applies `fault` to the bot's live connection (`NoPong` until cleared).
    pub fn wecom_set_fault(&self, fault: WeComFault) {
        self.wecom().set_fault(fault);
    }

    /// Pings answered again, the secret valid again, answers no longer lost.
    pub fn wecom_clear_faults(&self) {
        self.wecom().clear_faults();
    }

    /// The bot's secret refused from now on (a secret reset in the admin console).
    pub fn wecom_revoke_secret(&self) {
        self.wecom().revoke();
    }

    /// The next `n` replies and sends are recorded, and their answers never sent.
    pub fn wecom_lose_answers(&self, n: u32) {
        self.wecom().lose_answers(n);
    }

    /// Whether a connection holds the bot's subscription now.
    pub fn wecom_subscribed(&self) -> bool {
        self.wecom().subscribed()
    }

    pub fn wecom_events(&self) -> Vec<WeComEventRecord> {
        self.wecom().events()
    }

    pub fn wecom_posts(&self) -> Vec<WeComPost> {
        self.wecom().posts()
    }

    pub fn wecom_stats(&self) -> WeComStats {
        self.wecom().stats()
    }
}
