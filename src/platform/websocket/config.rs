//! A plain WebSocket adapter's keys: the URL, the variable of an optional bearer token, the
//! probe interval, an application-level ping and the frame a message becomes.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::send_frame::SendFrame;
use crate::config::{AdapterKeys, ConfigError};

/// A plain WebSocket adapter's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token_env: Option<String>,
    pub ping_interval: Duration,
    /// An application-level ping frame (JSON text) sent every `ping_interval`; any inbound
    /// frame counts as its answer.
    pub app_ping: Option<String>,
    /// The frame an outgoing message becomes; without it the adapter cannot send.
    pub send_frame: Option<SendFrame>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    url: Option<Spanned<String>>,
    token_env: Option<String>,
    ping_interval: Option<Spanned<String>>,
    app_ping: Option<String>,
    send_frame: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    keys.env_name("token-env", &raw.token_env)?;
    let name = keys.name();
    let url = keys.required(&raw.url, "url", "\"wss://example.com/ws\"")?;
    let config =
        Config {
            url: keys
                .url("url", &Some(url), "wss://", "ws://")?
                .unwrap_or_default(),
            token_env: raw.token_env,
            ping_interval: keys.opt_duration(
                "ping-interval",
                &raw.ping_interval,
                Duration::from_secs(15),
            )?,
            app_ping: raw.app_ping,
            send_frame: match &raw.send_frame {
                Some(raw) => Some(SendFrame::parse(raw.get_ref()).or_else(|e| {
                    keys.err(raw.span(), format!("adapter {name:?}: send-frame {e}"))
                })?),
                None => None,
            },
        };
    if let Some(p) = &config.app_ping {
        if serde_json::from_str::<serde_json::Value>(p).is_err() {
            return keys.err(
                keys.span(),
                format!(
                    "adapter {name:?}: app-ping must be a JSON text, like '{{\"op\":\"ping\"}}'"
                ),
            );
        }
    }
    Ok(config)
}
