//! The Mattermost side of the handle: what a test drives (posts, faults, a revoked token) and
//! reads (posts, counters). The bot's posts also show in the shared `posts()` and
//! `send_attempts()` under [`Platform::Mattermost`](super::super::post::Platform::Mattermost).

use super::super::handle::MockPlatform;
use super::config::MattermostFile;
use super::faults::MattermostFault;
use super::record::{MattermostPostRecord, MattermostStats};
use super::state::MattermostState;
use super::Mattermost;

impl MockPlatform {
    fn mattermost(&self) -> &MattermostState {
        &self.side::<Mattermost>().state
    }

    /// `n` posts from the mock's user in the first channel; their post ids.
    pub fn mattermost_emit(&self, n: usize) -> Vec<String> {
        let channel = self.mattermost().config.channels[0].id.clone();
        (0..n)
            .map(|_| {
                let k = self.mattermost().posts().len() + 1;
                self.mattermost_emit_text(&channel, &format!("mattermost message {k}"), "")
            })
            .collect()
    }

    /// One post from the mock's user in `channel`, in the thread `root_id` when not empty;
    /// its post id. `@hermes` (the bot's username) in the text makes it a mention.
    pub fn mattermost_emit_text(&self, channel: &str, text: &str, root_id: &str) -> String {
        let state = self.mattermost();
        let post = state.new_post(channel, &state.config.user_id, text, root_id, "");
        state.publish(&post);
        post["id"].as_str().unwrap_or("").to_owned()
    }

    /// One post from the mock's user in `channel` with `files` attached (served at
    /// `/api/v4/files/{id}`); its post id.
    pub fn mattermost_emit_files(
        &self,
        channel: &str,
        text: &str,
        files: Vec<MattermostFile>,
    ) -> String {
        let state = self.mattermost();
        let mut post = state.new_post(channel, &state.config.user_id, text, "", "");
        state.attach(&mut post, files);
        state.publish(&post);
        post["id"].as_str().unwrap_or("").to_owned()
    }

    /// Applies `fault` to every open connection.
    pub fn mattermost_set_fault(&self, fault: MattermostFault) {
        self.mattermost().set_fault(fault);
    }

    /// The last `n` `posted` events again, on every open connection.
    pub fn mattermost_redeliver(&self, n: usize) {
        self.mattermost().redeliver(n);
    }

    /// Every connection no socket serves forgotten, as a server restart (or its reaper)
    /// does: a resume asked for one gets a new connection id and its `hello`.
    pub fn mattermost_forget_connections(&self) {
        self.mattermost().forget_inactive();
    }

    /// Upgrades answered with `status` (e.g. 503) instead of a WebSocket; `None` to accept.
    pub fn mattermost_refuse_upgrade(&self, status: Option<u16>) {
        self.mattermost().refuse_upgrade(status);
    }

    /// The token refused (401) everywhere from now on, or valid again.
    pub fn mattermost_revoke_token(&self, revoked: bool) {
        self.mattermost().revoke(revoked);
    }

    /// Every post the server holds, in the order made.
    pub fn mattermost_posts(&self) -> Vec<MattermostPostRecord> {
        self.mattermost().posts()
    }

    pub fn mattermost_stats(&self) -> MattermostStats {
        self.mattermost().stats()
    }
}
