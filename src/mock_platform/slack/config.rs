//! What a test asks of the mock Slack when nothing is broken: the one app and workspace it
//! hosts, and the platform's timers (docs/research/slack-socket-mode.md, with its sources).

use std::time::Duration;

/// The Slack part of [`MockConfig`](crate::mock_platform::MockConfig).
#[derive(Clone, Debug)]
pub struct SlackConfig {
    /// The app-level token (`xapp-…`), the only one `apps.connections.open` takes.
    pub app_token: String,
    /// The bot token (`xoxb-…`), the only one the Web API methods take.
    pub bot_token: String,
    pub app_id: String,
    pub team_id: String,
    /// The bot's user and bot ids, as `auth.test` names them and its own posts carry them.
    pub bot_user_id: String,
    pub bot_id: String,
    /// Where `emit` puts its messages, and the channels the bot is a member of; a post to any
    /// other channel is refused with `channel_not_found`.
    pub channels: Vec<String>,
    /// The user `emit`'s messages come from.
    pub user_id: String,
    /// How long an envelope waits for its ack before it is delivered again: "within 3
    /// seconds", a Slack platform specialist (python-slack-sdk#1280). Each retry waits twice as
    /// long as the one before ("we'll retry three times, backing off exponentially").
    pub ack_timeout: Duration,
    /// Redeliveries after the first delivery ("we'll retry three times").
    pub max_retries: u32,
    /// Whether a redelivered envelope gets a new `envelope_id` (the reports conflict; the new
    /// id is the harder case for a client, so it is the default). `payload.event_id` never
    /// changes.
    pub new_envelope_id_on_retry: bool,
    /// Open connections per app: "up to 10".
    pub max_connections: usize,
    /// `hello`'s `debug_info.approximate_connection_time`, in seconds (18060 seen in the field;
    /// 360 with `debug_reconnects=true`).
    pub approximate_connection_time: u64,
    /// WebSocket pings the server sends on every connection, if any (Slack's period is not
    /// documented); a connection that answers none of its last two is dropped.
    pub server_ping: Option<Duration>,
}

impl SlackConfig {
    /// How long delivery `attempt` (0 for the first) waits for its ack.
    pub(crate) fn ack_wait(&self, attempt: u32) -> Duration {
        self.ack_timeout.saturating_mul(1 << attempt.min(16))
    }
}

impl Default for SlackConfig {
    fn default() -> Self {
        SlackConfig {
            app_token: "xapp-1-A0MOCKAPP-1-mockapptoken".to_owned(),
            bot_token: "xoxb-1-mockbottoken".to_owned(),
            app_id: "A0MOCKAPP".to_owned(),
            team_id: "T0MOCKTEAM".to_owned(),
            bot_user_id: "U0MOCKBOT".to_owned(),
            bot_id: "B0MOCKBOT".to_owned(),
            channels: vec!["C0MOCKCHAN".to_owned()],
            user_id: "U0MOCKUSER".to_owned(),
            ack_timeout: Duration::from_secs(3),
            max_retries: 3,
            new_envelope_id_on_retry: true,
            max_connections: 10,
            approximate_connection_time: 18060,
            server_ping: None,
        }
    }
}
