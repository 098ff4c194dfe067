//! Feishu's pushes that wait for an ack, for the mock's ack timer.

use std::time::Instant;

use tokio::sync::Notify;

use super::super::ack_timer::Redelivers;
use super::state::FeishuState;

impl Redelivers for FeishuState {
    fn redeliver_due(&self, now: Instant) -> Option<Instant> {
        FeishuState::redeliver_due(self, now)
    }

    fn deadline_set(&self) -> &Notify {
        &self.wake
    }
}
