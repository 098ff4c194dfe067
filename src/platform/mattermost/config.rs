//! The keys only a Mattermost adapter has: the server, the variable holding the bot's token,
//! and how often it pings.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError};

/// How often a WebSocket ping goes out. mattermostdriver sends none of its own (its
/// `keepalive` is off by default, and then only a 20 s `websockets` ping); the server's own
/// ping is every 52 s (`pingInterval` in `web_conn.go`). Five seconds is Slack's figure and
/// costs nothing on a socket the server answers at once.
const PING_INTERVAL: Duration = Duration::from_secs(5);

/// A Mattermost adapter's settings: events over `/api/v4/websocket`, posts through
/// `POST /api/v4/posts`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The server (`https://chat.example.com`), without a trailing slash; REST v4 is under
    /// `/api/v4/`.
    pub server_url: String,
    /// The variable holding the bot's token (a bot account's access token, or a personal
    /// access token).
    pub token_env: String,
    /// How often a WebSocket ping goes out; a pong missing past its deadline (`ack-timeout`)
    /// ends the connection.
    pub ping_interval: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    server_url: Option<Spanned<String>>,
    token_env: Option<String>,
    ping_interval: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("token-env", &raw.token_env)?;
    let server_url = keys
        .url("server-url", &raw.server_url, "https://", "http://")?
        .map(|u| u.trim_end_matches('/').to_owned());
    let server_url = keys.required(
        &server_url,
        "server-url",
        "\"https://chat.example.com\" (the Mattermost server, as its users open it)",
    )?;
    Ok(Config {
        server_url,
        token_env: keys.required(
            &raw.token_env,
            "token-env",
            "\"MATTERMOST_TOKEN\" (a variable in the profile's .env holding the bot's access \
             token or a personal access token)",
        )?,
        ping_interval: keys.opt_duration("ping-interval", &raw.ping_interval, PING_INTERVAL)?,
    })
}
