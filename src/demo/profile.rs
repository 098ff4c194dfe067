//! The demo's profile: an adapter of every kind against the mock (QQ Bot, Discord, Feishu and
//! Slack on their long connections, Mattermost's, WeCom's and DingTalk's through the fault proxy,
//! Telegram, Weixin and Matrix long polling through it),
//! a cron job,
//! the credentials in `.env` and the Weixin login that `login weixin` would have stored.

use std::path::{Path, PathBuf};

use crate::config::Secret;
use crate::mock_platform::dingtalk::DingTalkConfig;
use crate::mock_platform::mattermost::MattermostConfig;
use crate::mock_platform::weixin::WeixinConfig;
use crate::mock_platform::{telegram::TelegramConfig, FeishuConfig, MatrixConfig, SlackConfig};
use crate::mock_platform::{wecom, WeComConfig};
use crate::platform::weixin::WeixinLogin;

use super::CHAT;

/// The long polls are short in the demo (a real profile keeps the defaults, 30 s and 35 s),
/// so a dead one is found in seconds.
pub(super) const POLL_TIMEOUT_S: u64 = 2;
pub(super) const POLL_GRACE_S: u64 = 1;

/// Write the profile under `home`; `base` is the mock's HTTP base, `proxied` the same through
/// the fault proxy, `agent` the echo agent's base URL.
pub(super) fn write(
    home: &Path,
    base: &str,
    proxied: &str,
    agent: &str,
) -> anyhow::Result<PathBuf> {
    let profile_home = home.join("profiles/demo");
    std::fs::create_dir_all(&profile_home)?;
    let toml = format!(
        "# Written by `hermes-svc demo`: an adapter of every kind against the built-in mock \
         platform.\n[gateway]\nmax-outage = \"5m\"\n\n{}{}{}\
         [agent]\nkind = \"openai\"\nurl = \"{agent}\"\n\n\
         [[cron]]\nname = \"tick\"\nschedule = \"*/2 * * * * *\"\n\
         command = [\"/bin/sh\", \"-c\", \"echo tick\"]\ntimeout = \"10s\"\n",
        direct(base),
        polled(proxied),
        proxied_sockets(proxied),
    );
    std::fs::write(profile_home.join("gateway.toml"), toml)?;
    crate::atomic_file::write(&profile_home.join(".env"), env_file().as_bytes(), 0o600)?;
    let login = WeixinLogin::new(
        Secret::new(WeixinConfig::default().token),
        proxied.to_owned(),
        "demo-bot@im.bot".into(),
        "demo-owner@im.wechat".into(),
    );
    let login_file = crate::platform::weixin::login_file(&profile_home.join("gateway.toml"), "wx");
    login.write(&login_file)?;
    Ok(profile_home)
}

/// The long connections that reach the mock directly: the fault reaches them through the
/// WebSocket URLs the mock advertises (the proxy's).
fn direct(base: &str) -> String {
    let app_id = FeishuConfig::default().app_id;
    format!(
        r#"[[adapter]]
name = "qq"
kind = "qqbot"
app-id = "102000000"
secret-env = "DEMO_QQ_SECRET"
api-base = "{base}"
token-url = "{base}/app/getAppAccessToken"
backoff-min = "200ms"

[[adapter]]
name = "dc"
kind = "discord"
token-env = "DEMO_DISCORD_TOKEN"
api-base = "{base}"
backoff-min = "200ms"

[[adapter]]
name = "fs"
kind = "feishu"
app-id = "{app_id}"
secret-env = "DEMO_FEISHU_SECRET"
api-base = "{base}"
backoff-min = "200ms"

[[adapter]]
name = "sl"
kind = "slack"
app-token-env = "DEMO_SLACK_APP_TOKEN"
bot-token-env = "DEMO_SLACK_BOT_TOKEN"
api-base = "{base}"
ping-interval = "1s"
backoff-min = "200ms"

"#
    )
}

/// The long polls, through the fault proxy.
fn polled(proxied: &str) -> String {
    let matrix_user = MatrixConfig::default().user_id;
    format!(
        r#"[[adapter]]
name = "tg"
kind = "telegram"
token-env = "DEMO_TELEGRAM_TOKEN"
api-base = "{proxied}"
poll-timeout = "{POLL_TIMEOUT_S}s"
poll-grace = "{POLL_GRACE_S}s"
backoff-min = "200ms"
# Who may reach the agent through tg: the demo's one person (a Telegram user id). Nobody
# else is admitted anywhere: the gateway refuses by default. The same person also sends the
# flood that shows nothing is lost, ten messages a second, so they have no budget.
[adapter.access]
allow-users = ["{CHAT}"]
budget = "off"

[[adapter]]
name = "wx"
kind = "weixin"
api-base = "{proxied}"
poll-timeout = "{POLL_TIMEOUT_S}s"
poll-grace = "{POLL_GRACE_S}s"
backoff-min = "200ms"

[[adapter]]
name = "mx"
kind = "matrix"
homeserver = "{proxied}"
user-id = "{matrix_user}"
token-env = "DEMO_MATRIX_TOKEN"
poll-timeout = "{POLL_TIMEOUT_S}s"
poll-grace = "{POLL_GRACE_S}s"
backoff-min = "200ms"

"#
    )
}

/// The long connections whose every request goes through the fault proxy.
fn proxied_sockets(proxied: &str) -> String {
    let dingtalk_id = DingTalkConfig::default().client_id;
    // The WeCom bot's long connection, through the fault proxy like the polls.
    let wecom_url = format!(
        "{}{}",
        proxied.replacen("http://", "ws://", 1),
        wecom::WS_PATH
    );
    format!(
        r#"# Mattermost: its WebSocket and REST through the fault proxy; what a cut socket missed is
# read back by REST (posts?since=) after the reconnect.
[[adapter]]
name = "mm"
kind = "mattermost"
server-url = "{proxied}"
token-env = "DEMO_MATTERMOST_TOKEN"
ping-interval = "1s"
backoff-min = "200ms"

[[adapter]]
name = "wc"
kind = "wecom"
bot-id-env = "DEMO_WECOM_BOT_ID"
secret-env = "DEMO_WECOM_SECRET"
url = "{wecom_url}"
ping-interval = "1s"
backoff-min = "200ms"

# DingTalk Stream: connections/open and the robot API through the fault proxy, and the
# endpoint it answers is the proxy too; a message the cut socket swallowed is pushed again.
[[adapter]]
name = "dt"
kind = "dingtalk"
client-id = "{dingtalk_id}"
secret-env = "DEMO_DINGTALK_SECRET"
api-base = "{proxied}"
ping-interval = "1s"
backoff-min = "200ms"

"#
    )
}

/// Every adapter's credentials, as `.env` holds them.
fn env_file() -> String {
    let (feishu, slack) = (FeishuConfig::default(), SlackConfig::default());
    let (wecom, dingtalk) = (WeComConfig::default(), DingTalkConfig::default());
    format!(
        "DEMO_QQ_SECRET=demo-secret\nDEMO_DISCORD_TOKEN=demo-token\nDEMO_FEISHU_SECRET={}\n\
         DEMO_TELEGRAM_TOKEN={}\nDEMO_SLACK_APP_TOKEN={}\nDEMO_SLACK_BOT_TOKEN={}\n\
         DEMO_MATRIX_TOKEN={}\nDEMO_MATTERMOST_TOKEN={}\nDEMO_WECOM_BOT_ID={}\n\
         DEMO_WECOM_SECRET={}\nDEMO_DINGTALK_SECRET={}\n",
        feishu.app_secret,
        TelegramConfig::default().token,
        slack.app_token,
        slack.bot_token,
        MatrixConfig::default().access_token,
        MattermostConfig::default().token,
        wecom.bot_id,
        wecom.secret,
        dingtalk.client_secret,
    )
}
