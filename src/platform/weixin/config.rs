//! A Weixin adapter's keys: the API base (for tests) and the long poll's timing. A Weixin
//! bot's token is not in `.env`: `hermes-svc login weixin` fetches it by QR code and stores
//! it, with the base URL the platform assigned, in the profile's login file
//! (`weixin/ADAPTER.json`, mode 0600), which the adapter reads again when the platform says
//! the session has expired.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError, PollTiming};

const API_BASE: &str = "https://ilinkai.weixin.qq.com";
/// Where files are up- and downloaded, encrypted (Tencent's protocol doc: "The default CDN base
/// URL").
pub(super) const CDN_BASE: &str = "https://novac2c.cdn.weixin.qq.com/c2c";

/// iLink's default (`LONG_POLL_TIMEOUT_MS` in the gateway this replaces); the server's
/// `longpolling_timeout_ms` sets each next poll's.
const POLL_TIMEOUT: Duration = Duration::from_secs(35);

/// A Weixin adapter's settings: `ilink/bot/getupdates` long polling and `sendmessage`
/// through Tencent's iLink bot API, with the token `hermes-svc login weixin` stored in
/// `login_file`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub api_base: String,
    /// The CDN's base (`cdn-base`, for tests): files come from and go to it only.
    pub cdn_base: String,
    pub poll: PollTiming,
    pub login_file: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    api_base: Option<Spanned<String>>,
    cdn_base: Option<Spanned<String>>,
    poll_timeout: Option<Spanned<String>>,
    poll_grace: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    Ok(Config {
        api_base: keys.api_base(&raw.api_base, API_BASE)?,
        cdn_base: keys
            .url("cdn-base", &raw.cdn_base, "https://", "http://")?
            .map_or_else(|| CDN_BASE.to_owned(), |u| u.trim_end_matches('/').to_owned()),
        poll: keys.poll_timing(&raw.poll_timeout, &raw.poll_grace, POLL_TIMEOUT)?,
        login_file: login_file(keys.config_path(), keys.name()),
    })
}

/// Where `hermes-svc login weixin` keeps adapter `adapter`'s token, in the profile whose
/// config is `config_path` (the profile's home holds both).
pub fn login_file(config_path: &Path, adapter: &str) -> PathBuf {
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

    use super::Config;
    use crate::config::parse;
    use crate::platform::{GatewayConfig, Protocol};

    fn parse_str(text: &str) -> Result<GatewayConfig, crate::config::ConfigError> {
        parse(Path::new("/p/gateway.toml"), text)
    }

    const WX: &str = "[[adapter]]\nname = \"wx\"\nkind = \"weixin\"\n";

    #[test]
    fn weixin_defaults_and_its_login_file() {
        let spec = parse_str(WX).unwrap().adapters[0].clone();
        let Protocol::Weixin(Config {
            api_base,
            cdn_base,
            poll,
            login_file,
        }) = &spec.protocol
        else {
            panic!("{:?}", spec.protocol)
        };
        assert_eq!(api_base, "https://ilinkai.weixin.qq.com");
        assert_eq!(cdn_base, "https://novac2c.cdn.weixin.qq.com/c2c");
        assert_eq!(poll.timeout, Duration::from_secs(35));
        assert_eq!(login_file, Path::new("/p/weixin/wx.json"));
        assert!(spec.credential_envs().is_empty());
    }
}
