//! The failures `getUpdates` can meet, set with
//! [`MockPlatform::telegram_set_fault`](crate::mock_platform::MockPlatform::telegram_set_fault).
//! `sendMessage` meets the shared [`SendFault`](crate::mock_platform::SendFault) with
//! [`Platform::Telegram`](crate::mock_platform::Platform::Telegram) instead.

use std::time::Duration;

/// One failure of the long poll. Each acts on every `getUpdates` while armed, or on the next
/// `n` with `telegram_set_fault_for`; `Duplicate` armed without a count acts once. A fault
/// strikes before the poll is processed, so a struck poll confirms nothing, except under
/// `OtherPoller` and `Slow`, which act on a poll the server did process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TelegramFault {
    /// Every poll is read and never answered: the connection stays open and silent, as when a
    /// middlebox swallowed it. Nothing is confirmed.
    HangPolls,
    /// Another bot instance polls with the same token: each of our polls is processed (its
    /// offset confirms) and then, `TelegramConfig::other_poller_after` later, terminated with
    /// 409 "Conflict: terminated by other getUpdates request; …".
    OtherPoller,
    /// 429 "Too Many Requests: retry after N" with `parameters.retry_after` (seconds).
    RateLimited { retry_after: u64 },
    /// 502 "Bad Gateway", as the front end answers while the server is away.
    ServerError,
    /// Answers leave this much later than they would (on top of any long-poll wait).
    Slow(Duration),
    /// The next answer is the last non-empty batch answered, again, and its offset is not
    /// applied: as if the server lost the client's confirmation. Then clears itself. Before
    /// any batch was answered there is nothing to repeat: the poll is served as usual and the
    /// fault is still used up.
    Duplicate,
    /// 401 "Unauthorized": the token was revoked.
    Unauthorized,
}

/// A fault and how many more polls it acts on (`None`: until cleared).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Armed {
    pub(crate) fault: TelegramFault,
    pub(crate) polls: Option<u32>,
}

impl Armed {
    /// One strike: the fault if it still acts, and whether it stays armed after.
    pub(crate) fn strike(&mut self) -> (Option<TelegramFault>, bool) {
        let polls = match (self.fault, self.polls) {
            (TelegramFault::Duplicate, None) => Some(1),
            (_, polls) => polls,
        };
        match polls {
            None => (Some(self.fault), true),
            Some(0) => (None, false),
            Some(n) => {
                self.polls = Some(n - 1);
                (Some(self.fault), n > 1)
            }
        }
    }
}
