//! The Slack side of the handle: what a test drives (events, faults, refusals) and reads
//! (events and their deliveries, counters). Posts show in the shared `posts()` and
//! `send_attempts()` under [`Platform::Slack`](super::super::post::Platform::Slack).

use super::super::handle::MockPlatform;
use super::faults::{OpenRefusal, SlackFault};
use super::record::{SlackEventRecord, SlackStats};
use super::state::SlackState;
use super::user_files::SlackFile;
use super::{Slack, WS_PATH};

impl MockPlatform {
    fn slack(&self) -> &SlackState {
        &self.side::<Slack>().state
    }

    /// What `apps.connections.open` puts before the Socket Mode path in the URLs it hands out;
    /// by default this mock's own `ws://` address. Lets a test send clients through a proxy or
    /// a TLS front.
    pub fn set_slack_ws_base(&self, base: String) {
        self.slack().set_ws_url(format!("{base}{WS_PATH}"));
    }

    /// `n` messages from the mock's user in the first configured channel; their event ids.
    pub fn slack_emit(&self, n: usize) -> Vec<String> {
        let channel = self.slack().config.channels[0].clone();
        (0..n)
            .map(|_| {
                let k = self.slack().events().len() + 1;
                self.slack_emit_text(&channel, &format!("slack message {k}"), None)
            })
            .collect()
    }

    /// One message from the mock's user, in a thread when `thread_ts` is given; its event id.
    pub fn slack_emit_text(&self, channel: &str, text: &str, thread_ts: Option<&str>) -> String {
        self.slack().emit(channel, text, thread_ts, false)
    }

    /// A `file_share` message from the mock's user in `channel`, with `text` and `files`
    /// (served at `/files-pri/…` and by `files.info`); its event id.
    pub fn slack_emit_files(&self, channel: &str, text: &str, files: Vec<SlackFile>) -> String {
        let slack = self.side::<Slack>();
        let user = &slack.state.config.user_id;
        let objects = files
            .into_iter()
            .map(|f| slack.user_files.add(f, user))
            .collect();
        slack.state.emit_files(channel, text, objects)
    }

    /// Whether the bot token has the `files:read` scope (it has unless this takes it away):
    /// without it a file's URL answers Slack's sign-in page and `files.info` `missing_scope`.
    pub fn slack_set_files_read(&self, granted: bool) {
        self.side::<Slack>().user_files.set_files_read(granted);
    }

    /// Applies `fault` to every open connection.
    pub fn slack_set_fault(&self, fault: SlackFault) {
        self.slack().set_fault(fault);
    }

    /// Socket Mode on again, the tokens valid again, `apps.connections.open` answering.
    pub fn slack_clear_faults(&self) {
        self.slack().clear_faults();
    }

    /// What `apps.connections.open` answers from now on instead of a URL; `None` for URLs.
    pub fn slack_refuse_open(&self, refusal: Option<OpenRefusal>) {
        self.slack().refuse_open(refusal);
    }

    /// Both tokens answered `token_revoked` from now on.
    pub fn slack_revoke_tokens(&self) {
        self.slack().revoke();
    }

    /// Every event, with its deliveries and ack, in the order emitted.
    pub fn slack_events(&self) -> Vec<SlackEventRecord> {
        self.slack().events()
    }

    pub fn slack_stats(&self) -> SlackStats {
        self.slack().stats()
    }
}
