//! The keys only a Feishu/Lark adapter has: which of the two platforms (`domain`), the
//! app's id and the variable holding its secret. Feishu (open.feishu.cn) and Lark
//! (open.larksuite.com) speak the same protocol from different hosts, and an app belongs to
//! one of them, so the domain is only a base URL.

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError};

/// A Feishu or Lark adapter's settings: events over the long connection
/// (`/callback/ws/endpoint`), messages through the Open API with a `tenant_access_token`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub domain: FeishuDomain,
    pub app_id: String,
    pub secret_env: String,
    /// The domain's base URL, or `api-base`, without a trailing slash.
    pub api_base: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    domain: Option<Spanned<String>>,
    app_id: Option<String>,
    secret_env: Option<String>,
    api_base: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("secret-env", &raw.secret_env)?;
    let domain = domain(keys, &raw.domain)?;
    Ok(Config {
        domain,
        app_id: app_id(keys, &raw.app_id)?,
        secret_env: keys.required(
            &raw.secret_env,
            "secret-env",
            "\"FEISHU_APP_SECRET\" (a variable in the profile's .env holding the App Secret)",
        )?,
        api_base: keys.api_base(&raw.api_base, domain.base())?,
    })
}

/// Which platform a Feishu adapter talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeishuDomain {
    /// 飞书, mainland China: `https://open.feishu.cn`.
    Feishu,
    /// Lark, everywhere else: `https://open.larksuite.com`.
    Lark,
}

impl FeishuDomain {
    /// The platform's base URL, as the official SDKs have it (`lark.FeishuBaseUrl`,
    /// `lark.LarkBaseUrl`): the endpoint discovery and the Open API both hang off it.
    pub fn base(self) -> &'static str {
        match self {
            FeishuDomain::Feishu => "https://open.feishu.cn",
            FeishuDomain::Lark => "https://open.larksuite.com",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FeishuDomain::Feishu => "feishu",
            FeishuDomain::Lark => "lark",
        }
    }
}

/// `domain = "feishu" | "lark"`, Feishu when absent.
fn domain(keys: &AdapterKeys, raw: &Option<Spanned<String>>) -> Result<FeishuDomain, ConfigError> {
    let name = keys.name();
    let Some(raw) = raw else {
        return Ok(FeishuDomain::Feishu);
    };
    match raw.get_ref().as_str() {
        "feishu" => Ok(FeishuDomain::Feishu),
        "lark" => Ok(FeishuDomain::Lark),
        other => keys.err(
            raw.span(),
            format!(
                "adapter {name:?}: domain = {other:?} is not a platform; use \"feishu\" \
                 (open.feishu.cn) or \"lark\" (open.larksuite.com)"
            ),
        ),
    }
}

/// The longest app id taken: real ones are `cli_` and 16 hex digits, so this is room to
/// spare, and short enough that a pasted secret or paragraph is refused.
const MAX_APP_ID: usize = 64;

/// An app id as the developer console shows it (`cli_a1b2c3d4e5f6a7b8`). It goes into a JSON
/// body and the token lock's identity, never a URL, but an id with spaces or quotes is a
/// paste gone wrong, and the value is not echoed: most often that is the secret itself.
fn app_id(keys: &AdapterKeys, raw: &Option<String>) -> Result<String, ConfigError> {
    let (name, span) = (keys.name(), keys.span());
    let Some(id) = raw else {
        return keys.err(
            span,
            format!(
                "adapter {name:?} (kind feishu): missing app-id; add app-id = \"cli_...\" \
                 (the App ID on the app's Credentials page of the developer console)"
            ),
        );
    };
    let ok = (1..=MAX_APP_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        return Ok(id.clone());
    }
    keys.err(
        span,
        format!(
            "adapter {name:?}: app-id ({} characters, not shown) is not an app id; use the \
             App ID from the developer console, like \"cli_a1b2c3d4e5f6a7b8\" (letters, \
             digits, '_' and '-', at most {MAX_APP_ID})",
            id.chars().count()
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Config, FeishuDomain};
    use crate::config::parse;
    use crate::platform::{GatewayConfig, Protocol};

    fn parse_str(text: &str) -> Result<GatewayConfig, crate::config::ConfigError> {
        parse(Path::new("/p/gateway.toml"), text)
    }

    const HEAD: &str = "[[adapter]]\nname = \"fs\"\nkind = \"feishu\"\n";

    #[test]
    fn a_feishu_adapter_defaults_to_open_feishu_cn() {
        let text = format!("{HEAD}app-id = \"cli_a1b2\"\nsecret-env = \"FEISHU_SECRET\"\n");
        let c = parse_str(&text).unwrap();
        let spec = &c.adapters[0];
        assert_eq!(spec.protocol.kind(), "feishu");
        assert_eq!(
            spec.protocol,
            Protocol::Feishu(Config {
                domain: FeishuDomain::Feishu,
                app_id: "cli_a1b2".into(),
                secret_env: "FEISHU_SECRET".into(),
                api_base: "https://open.feishu.cn".into(),
            })
        );
        assert_eq!(spec.credential_envs(), ["FEISHU_SECRET"]);
    }

    #[test]
    fn lark_and_an_api_base_override() {
        let text = format!("{HEAD}domain = \"lark\"\napp-id = \"cli_x\"\nsecret-env = \"S\"\n");
        let Protocol::Feishu(Config {
            domain, api_base, ..
        }) = parse_str(&text).unwrap().adapters[0].protocol.clone()
        else {
            panic!()
        };
        assert_eq!(
            (domain, api_base.as_str()),
            (FeishuDomain::Lark, "https://open.larksuite.com")
        );
        let text = format!(
            "{HEAD}domain = \"lark\"\napp-id = \"cli_x\"\nsecret-env = \"S\"\napi-base = \"http://127.0.0.1:9/\"\n"
        );
        let Protocol::Feishu(Config { api_base, .. }) =
            parse_str(&text).unwrap().adapters[0].protocol.clone()
        else {
            panic!()
        };
        // The override wins, without the trailing slash every path would double.
        assert_eq!(api_base, "http://127.0.0.1:9");
    }

    #[test]
    fn the_token_lock_covers_the_app_id_not_the_secret() {
        use crate::config::Secret;
        let text = format!("{HEAD}app-id = \"cli_x\"\nsecret-env = \"S\"\n");
        let spec = parse_str(&text).unwrap().adapters[0].clone();
        let a = spec.identity(&[Secret::new("one".into())]);
        let b = spec.identity(&[Secret::new("two".into())]);
        assert_eq!(a, b, "two secrets of one app still consume the same events");
        assert!(a.contains("cli_x") && !a.contains("one"), "{a}");
    }

    #[test]
    fn mistakes_name_the_line_and_the_fix() {
        let cases = [
            (format!("{HEAD}secret-env = \"S\"\n"), "gateway.toml:1", "add app-id = \"cli_"),
            (format!("{HEAD}app-id = \"cli_x\"\n"), "gateway.toml:1", "add secret-env"),
            (
                format!("{HEAD}app-id = \"cli_x\"\nsecret-env = \"S\"\ndomain = \"larksuite\"\n"),
                "gateway.toml:6",
                "use \"feishu\" (open.feishu.cn) or \"lark\"",
            ),
            (
                format!("{HEAD}app-id = \"my secret value\"\nsecret-env = \"S\"\n"),
                "gateway.toml:1",
                "15 characters, not shown",
            ),
            (
                format!("{HEAD}app-id = \"cli_x\"\nsecret-env = \"S\"\napi-base = \"http://open.feishu.cn\"\n"),
                "gateway.toml:6",
                "only to loopback",
            ),
            (
                format!("{HEAD}app-id = \"cli_x\"\nsecret-env = \"S\"\nintents = [\"x\"]\n"),
                "gateway.toml:1",
                "intents does not apply to kind feishu",
            ),
            (
                "[[adapter]]\nname = \"q\"\nkind = \"qqbot\"\napp-id = \"1\"\nsecret-env = \"S\"\ndomain = \"lark\"\n".to_owned(),
                "gateway.toml:1",
                "domain does not apply to kind qqbot",
            ),
        ];
        for (text, at, what) in cases {
            let e = parse_str(&text).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(what), "{text:?} gave: {e}");
            assert!(!e.contains("my secret value"), "{e}");
        }
    }
}
