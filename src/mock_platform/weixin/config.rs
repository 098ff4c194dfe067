//! What the mock's Weixin (iLink) bot is, and how its long poll and dedupe behave.

use std::time::Duration;

/// How the mock's Weixin side behaves when nothing is broken.
#[derive(Clone, Debug)]
pub struct WeixinConfig {
    /// The bot token honoured from the start, as a login saved earlier would hold it.
    pub token: String,
    /// `ilink_bot_id`: the bot's account, the `to_user_id` of inbound messages.
    pub bot_id: String,
    /// `ilink_user_id` a confirmed QR login reports: the WeChat user who scanned.
    pub user_id: String,
    /// How long `getupdates` holds a request with nothing new, and what it suggests in
    /// `longpolling_timeout_ms` (35 s, the client default in the sources).
    pub longpolling_timeout_ms: u64,
    /// How long a `client_id` is remembered: a repeat within it posts nothing new. The sources
    /// are silent on any window; an hour is the mock's assumption.
    pub client_id_window: Duration,
    /// Whether `getuploadurl` answers an `upload_full_url` (on the mock) besides the
    /// `upload_param` the client builds the CDN URL from: the doc allows either.
    pub upload_full_url: bool,
}

impl Default for WeixinConfig {
    fn default() -> Self {
        WeixinConfig {
            token: "mock-weixin-bot-token".to_owned(),
            bot_id: "mockbot@im.bot".to_owned(),
            user_id: "mockuser@im.wechat".to_owned(),
            longpolling_timeout_ms: 35_000,
            client_id_window: Duration::from_secs(60 * 60),
            upload_full_url: false,
        }
    }
}
