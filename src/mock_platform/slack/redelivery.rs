//! Slack's envelopes that wait for an ack, for the mock's ack timer.

use std::time::Instant;

use tokio::sync::Notify;

use super::super::ack_timer::Redelivers;
use super::state::SlackState;

impl Redelivers for SlackState {
    fn redeliver_due(&self, now: Instant) -> Option<Instant> {
        SlackState::redeliver_due(self, now)
    }

    fn deadline_set(&self) -> &Notify {
        &self.wake
    }
}
