//! The keys of the HTTP long-poll kinds, Telegram (Bot API `getUpdates`) and Weixin (iLink
//! `getupdates`): how long a poll may wait on the server, the grace on top of that before a
//! poll with no answer is called a dead connection, which updates Telegram sends, and
//! whether the adapter may delete a Telegram webhook that blocks polling.
//!
//! A Weixin bot's token is not in `.env`: `hermes-svc login weixin` fetches it by QR code
//! and stores it, with the base URL the platform assigned, in the profile's login file
//! (`weixin/ADAPTER.json`, mode 0600), which the adapter reads again when the platform says
//! the session has expired.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::value::Ctx;
use super::ConfigError;

/// Telegram's own long-poll ceiling is 50 s in practice; its docs ask for a positive
/// timeout and leave the rest to the client. 30 s is what the SDKs use.
pub(super) const TELEGRAM_POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// iLink's default (`LONG_POLL_TIMEOUT_MS` in the gateway this replaces); the server's
/// `longpolling_timeout_ms` sets each next poll's.
pub(super) const WEIXIN_POLL_TIMEOUT: Duration = Duration::from_secs(35);
/// Time for the answer to cross the network once the server stops waiting.
const POLL_GRACE: Duration = Duration::from_secs(10);
/// Past this a poll is not "long" but a connection nobody watches.
const MAX_POLL_TIMEOUT: Duration = Duration::from_secs(120);

pub(super) const TELEGRAM_API_BASE: &str = "https://api.telegram.org";
pub(super) const WEIXIN_API_BASE: &str = "https://ilinkai.weixin.qq.com";

/// The update types a Telegram adapter asks for when `allowed-updates` is not given: the
/// messages and button presses a bot answers. Telegram remembers the list between calls, so
/// it is always sent, never left to whatever a previous client set.
pub(super) const TELEGRAM_DEFAULT_UPDATES: &[&str] = &[
    "message",
    "edited_message",
    "channel_post",
    "callback_query",
];

/// Every update type the Bot API documents (the `Update` object's optional fields).
const TELEGRAM_UPDATES: &[&str] = &[
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "business_connection",
    "business_message",
    "edited_business_message",
    "deleted_business_messages",
    "message_reaction",
    "message_reaction_count",
    "inline_query",
    "chosen_inline_result",
    "callback_query",
    "shipping_query",
    "pre_checkout_query",
    "purchased_paid_media",
    "poll",
    "poll_answer",
    "my_chat_member",
    "chat_member",
    "chat_join_request",
    "chat_boost",
    "removed_chat_boost",
];

/// How one long poll is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollTiming {
    /// How long the server may hold a poll with nothing to say (Telegram's `timeout`; for
    /// Weixin the first poll's, after which the server's `longpolling_timeout_ms` rules).
    pub timeout: Duration,
    /// On top of `timeout`: a poll unanswered by then is a dead connection.
    pub grace: Duration,
}

impl PollTiming {
    /// The client's deadline for a poll that may wait `timeout` on the server.
    pub fn deadline(&self, timeout: Duration) -> Duration {
        timeout + self.grace
    }
}

/// The raw keys, as [`super::adapter`] read them.
pub(super) struct RawPoll<'a> {
    pub(super) poll_timeout: &'a Option<Spanned<String>>,
    pub(super) poll_grace: &'a Option<Spanned<String>>,
}

pub(super) fn timing(
    ctx: &Ctx,
    name: &str,
    raw: RawPoll,
    default_timeout: Duration,
) -> Result<PollTiming, ConfigError> {
    let timeout = ctx.opt_duration("poll-timeout", raw.poll_timeout, default_timeout)?;
    if timeout > MAX_POLL_TIMEOUT {
        let span = raw.poll_timeout.as_ref().map_or(0..0, |r| r.span());
        return ctx.err(
            span,
            format!(
                "adapter {name:?}: poll-timeout is longer than {}s; a poll held that long is a \
                 connection nobody watches (Telegram's own ceiling is 50s)",
                MAX_POLL_TIMEOUT.as_secs()
            ),
        );
    }
    // Telegram takes whole seconds, so "500ms" would be sent as 0: a short poll, answered
    // at once, over and over. A long poll of under a second is not one anywhere.
    if timeout < Duration::from_secs(1) || timeout.subsec_nanos() != 0 {
        let span = raw.poll_timeout.as_ref().map_or(0..0, |r| r.span());
        return ctx.err(
            span,
            format!(
                "adapter {name:?}: poll-timeout must be a whole number of seconds, at least 1s                  (e.g. \"30s\"); the platforms count a poll's wait in seconds"
            ),
        );
    }
    let grace = ctx.opt_duration("poll-grace", raw.poll_grace, POLL_GRACE)?;
    Ok(PollTiming { timeout, grace })
}

/// `allowed-updates`, checked against the Bot API's list so a typo is not a bot that never
/// hears of a message.
pub(super) fn allowed_updates(
    ctx: &Ctx,
    name: &str,
    raw: &Option<Spanned<Vec<String>>>,
) -> Result<Vec<String>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(TELEGRAM_DEFAULT_UPDATES
            .iter()
            .map(|s| s.to_string())
            .collect());
    };
    for kind in raw.get_ref() {
        if !TELEGRAM_UPDATES.contains(&kind.as_str()) {
            return ctx.err(
                raw.span(),
                format!(
                    "adapter {name:?}: allowed-updates has {kind:?}, which is not a Telegram \
                     update type; use some of: {}",
                    TELEGRAM_UPDATES.join(", ")
                ),
            );
        }
    }
    Ok(raw.get_ref().clone())
}

/// Where `hermes-svc login weixin` keeps adapter `adapter`'s token, in the profile whose
/// config is `config_path` (the profile's home holds both).
pub fn weixin_login_file(config_path: &Path, adapter: &str) -> PathBuf {
    config_path
        .parent()
        .unwrap_or(Path::new("."))
        .join("weixin")
        .join(format!("{adapter}.json"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::{parse, Protocol};

    fn parse_str(text: &str) -> Result<crate::config::GatewayConfig, crate::config::ConfigError> {
        parse(Path::new("/p/gateway.toml"), text)
    }

    const TG: &str = "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\ntoken-env = \"TG_TOKEN\"\n";
    const WX: &str = "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\n";

    #[test]
    fn telegram_defaults() {
        let spec = parse_str(TG).unwrap().adapters[0].clone();
        let Protocol::Telegram {
            api_base,
            poll,
            allowed_updates,
            delete_webhook,
            ..
        } = &spec.protocol
        else {
            panic!("{:?}", spec.protocol)
        };
        assert_eq!(api_base, "https://api.telegram.org");
        assert_eq!(poll.timeout, Duration::from_secs(30));
        assert_eq!(poll.deadline(poll.timeout), Duration::from_secs(40));
        assert_eq!(allowed_updates[0], "message");
        assert!(!delete_webhook);
        assert_eq!(spec.credential_env(), Some("TG_TOKEN"));
    }

    #[test]
    fn weixin_defaults_and_its_login_file() {
        let spec = parse_str(WX).unwrap().adapters[0].clone();
        let Protocol::Weixin {
            api_base,
            poll,
            login_file,
        } = &spec.protocol
        else {
            panic!("{:?}", spec.protocol)
        };
        assert_eq!(api_base, "https://ilinkai.weixin.qq.com");
        assert_eq!(poll.timeout, Duration::from_secs(35));
        assert_eq!(login_file, Path::new("/p/weixin/wx.json"));
        assert_eq!(spec.credential_env(), None);
    }

    #[test]
    fn mistakes_name_the_line_and_the_fix() {
        let cases = [
            (
                format!("{TG}allowed-updates = [\"mesage\"]\n"),
                "gateway.toml:5",
                "not a Telegram update type",
            ),
            (
                format!("{TG}poll-timeout = \"5m\"\n"),
                "gateway.toml:5",
                "longer than 120s",
            ),
            (
                format!("{TG}poll-timeout = \"500ms\"\n"),
                "gateway.toml:5",
                "a whole number of seconds, at least 1s",
            ),
            (
                format!("{WX}poll-timeout = \"1500ms\"\n"),
                "gateway.toml:4",
                "a whole number of seconds, at least 1s",
            ),
            (
                "[[adapter]]\nname = \"tg\"\nkind = \"telegram\"\n".to_owned(),
                "gateway.toml:1",
                "add token-env",
            ),
            (
                format!("{WX}token-env = \"T\"\n"),
                "gateway.toml:1",
                "token-env does not apply to kind weixin",
            ),
            (
                format!("{WX}delete-webhook = true\n"),
                "gateway.toml:1",
                "delete-webhook does not apply to kind weixin",
            ),
            (
                format!("{TG}api-base = \"http://api.telegram.org\"\n"),
                "gateway.toml:5",
                "only to loopback",
            ),
        ];
        for (text, at, what) in cases {
            let e = parse_str(&text).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(what), "{text:?} gave: {e}");
        }
    }
}
