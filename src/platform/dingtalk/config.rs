//! The keys only a DingTalk adapter has: the app's client id (AppKey), the variable holding
//! its client secret (AppSecret), the robot code its messages are sent as, and how often the
//! adapter pings.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError};

/// The OpenAPI host the SDKs use (`DINGTALK_OPENAPI_ENDPOINT`).
const API_BASE: &str = "https://api.dingtalk.com";

/// The server pings a Stream connection at its own cadence, which the docs do not give; the
/// client's own WebSocket ping, answered by the server's WebSocket stack at once, is the
/// probe. Ten seconds bounds a half-open socket to ten seconds plus the answer deadline
/// (Python's `websockets` default, which the SDK keeps, is 20 s plus 20 s).
const PING_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The app's Client ID (AppKey, `ding…`), as `connections/open` and the token take it.
    pub client_id: String,
    /// The variable holding the app's Client Secret.
    pub secret_env: String,
    /// The robot's code, which the robot API sends as (`robotCode`); for an app's own robot
    /// it is the client id, Hermes's default too.
    pub robot_code: String,
    /// `https://api.dingtalk.com`, or `api-base`, without a trailing slash.
    pub api_base: String,
    /// How often a WebSocket ping goes out; a pong missing past `ack-timeout` ends the
    /// connection.
    pub ping_interval: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    client_id: Option<String>,
    secret_env: Option<String>,
    robot_code: Option<String>,
    api_base: Option<Spanned<String>>,
    ping_interval: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("secret-env", &raw.secret_env)?;
    let client_id = keys.required(
        &raw.client_id,
        "client-id",
        "\"dingxxxxxxxx\" (the app's Client ID, also called AppKey)",
    )?;
    if !id_like(&client_id) {
        return keys.err(
            keys.span(),
            format!(
                "adapter {:?}: client-id must be the app's Client ID (letters, digits, `_` \
                 and `-`, at most 64)",
                keys.name()
            ),
        );
    }
    let robot_code = raw.robot_code.unwrap_or_else(|| client_id.clone());
    if !id_like(&robot_code) {
        return keys.err(
            keys.span(),
            format!("adapter {:?}: robot-code must be the robot's code (letters, digits, `_` and `-`)", keys.name()),
        );
    }
    Ok(Config {
        client_id,
        secret_env: keys.required(
            &raw.secret_env,
            "secret-env",
            "\"DINGTALK_CLIENT_SECRET\" (a variable in the profile's .env holding the Client \
             Secret)",
        )?,
        robot_code,
        api_base: keys.api_base(&raw.api_base, API_BASE)?,
        ping_interval: keys.opt_duration("ping-interval", &raw.ping_interval, PING_INTERVAL)?,
    })
}

fn id_like(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
