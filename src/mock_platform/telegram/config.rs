//! What the mock's Telegram bot is, and the Bot API's limits as the mock applies them.

use std::time::Duration;

/// The bot the mock serves and the chats it knows, with the server's limits.
#[derive(Clone, Debug)]
pub struct TelegramConfig {
    /// The only token the Bot API honours (`/bot<token>/<method>`); the part before `:` is
    /// the bot's user id, as in real tokens.
    pub token: String,
    /// `getMe`'s `first_name` and `username`.
    pub bot_name: String,
    pub bot_username: String,
    /// Chats a `sendMessage` may target before any update came from them. The first is where
    /// [`telegram_emit`](crate::mock_platform::MockPlatform::telegram_emit) writes.
    pub chats: Vec<i64>,
    /// Public chats the bot can address as `@username`. Telegram resolves usernames only for
    /// public groups and channels, so the mock's private chats have none.
    pub usernames: Vec<(String, i64)>,
    /// The longest a `getUpdates` is held, whatever `timeout` it asks for. The real server's
    /// cap is 50 s (`LONG_POLL_MAX_TIMEOUT` in tdlib/telegram-bot-api).
    pub max_timeout: Duration,
    /// The first `update_id`; `None` picks one at random, as the server does for a bot that
    /// has had no updates for a while.
    pub first_update_id: Option<i64>,
    /// How long after it arrives a poll is told that another instance took over, under
    /// [`TelegramFault::OtherPoller`](super::TelegramFault::OtherPoller).
    pub other_poller_after: Duration,
}

impl TelegramConfig {
    /// The bot's user id: the token's digits before `:` (0 if there are none).
    pub fn bot_id(&self) -> i64 {
        self.token
            .split_once(':')
            .and_then(|(id, _)| id.parse().ok())
            .unwrap_or(0)
    }
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            token: "123456:mock-telegram-token".to_owned(),
            bot_name: "Mock Hermes".to_owned(),
            bot_username: "mock_hermes_bot".to_owned(),
            chats: vec![1001],
            usernames: vec![("mockchannel".to_owned(), -1_001_000_000_001)],
            max_timeout: Duration::from_secs(50),
            first_update_id: None,
            other_poller_after: Duration::from_millis(50),
        }
    }
}
