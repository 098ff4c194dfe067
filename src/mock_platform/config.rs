//! What a test asks of the mock when nothing is broken: the protocol parameters it advertises
//! and the checks it enforces. Kept apart from the running platform so that every part of the
//! mock can read it without depending on the handle that starts them.

use std::time::Duration;

use super::dingtalk::config::DingTalkConfig;
use super::feishu::config::FeishuConfig;
use super::matrix::config::MatrixConfig;
use super::mattermost::config::MattermostConfig;
use super::slack::config::SlackConfig;
use super::telegram::config::TelegramConfig;
use super::wecom::config::WeComConfig;
use super::weixin::config::WeixinConfig;

/// How the mock behaves when nothing is broken. Checks are off by default so that a test only
/// pays for the strictness it asks for.
#[derive(Clone, Debug)]
pub struct MockConfig {
    /// Advertised in Hello; the mock does not enforce it, clients are expected to honour it.
    pub heartbeat_interval: Duration,
    /// Generates one dispatch per session (connected or not) at this period, for soak-style
    /// runs that need a steady event stream without a driver.
    pub dispatch_every: Option<Duration>,
    /// When set, the token endpoint answers 401 to any other `clientSecret`.
    pub expected_secret: Option<String>,
    /// When set, Identify or Resume with any other token is closed with 4004.
    pub expected_token: Option<String>,
    /// What the token endpoint says in `expires_in`. An Identify or Resume that carries a QQ
    /// access token (`QQBot <token>`) the platform no longer honours is closed with 4004.
    pub token_lifetime: Duration,
    /// `session_start_limit` in `/gateway/bot`.
    pub session_start_limit: SessionStartLimit,
    /// When set, an Identify asking for any other intent is closed with 4014 ("intent not
    /// permitted"), as the platform does for an intent the bot was not granted.
    pub granted_intents: Option<u64>,
    /// Sent as READY's `resume_gateway_url` (Discord's: where a resume must connect).
    pub resume_gateway_url: Option<String>,
    /// How long Discord remembers an enforced nonce ("the past few minutes" in its docs).
    pub nonce_window: Duration,
    /// The Feishu app, its ClientConfig and the platform's timers.
    pub feishu: FeishuConfig,
    /// The Telegram bot and its Bot API's limits.
    pub telegram: TelegramConfig,
    /// The Weixin (iLink) bot and its long poll.
    pub weixin: WeixinConfig,
    /// The Slack app, its tokens and the platform's timers.
    pub slack: SlackConfig,
    /// The Matrix homeserver's bot account, its rooms and the `/sync` cap.
    pub matrix: MatrixConfig,
    /// The Mattermost server's bot account, its channels and its dedupe window.
    pub mattermost: MattermostConfig,
    /// The WeCom AI bot and its people.
    pub wecom: WeComConfig,
    /// The DingTalk app, its robot and the platform's timers.
    pub dingtalk: DingTalkConfig,
}

/// The `session_start_limit` object of `GET /gateway/bot` (Discord's, which QQ copies).
#[derive(Clone, Copy, Debug)]
pub struct SessionStartLimit {
    pub total: u32,
    pub remaining: u32,
    pub reset_after: Duration,
    pub max_concurrency: u32,
}

impl Default for SessionStartLimit {
    fn default() -> Self {
        SessionStartLimit {
            total: 1000,
            remaining: 1000,
            reset_after: Duration::from_secs(24 * 60 * 60),
            max_concurrency: 1,
        }
    }
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            heartbeat_interval: Duration::from_secs(1),
            dispatch_every: None,
            expected_secret: None,
            expected_token: None,
            token_lifetime: Duration::from_secs(7200),
            session_start_limit: SessionStartLimit::default(),
            granted_intents: None,
            resume_gateway_url: None,
            nonce_window: Duration::from_secs(5 * 60),
            feishu: FeishuConfig::default(),
            slack: SlackConfig::default(),
            telegram: TelegramConfig::default(),
            weixin: WeixinConfig::default(),
            matrix: MatrixConfig::default(),
            mattermost: MattermostConfig::default(),
            wecom: WeComConfig::default(),
            dingtalk: DingTalkConfig::default(),
        }
    }
}
