//! The keys only a Matrix adapter has: the homeserver, the bot's user id, the variable holding
//! its access token, the rooms it listens in, and the `/sync` long poll's timing.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{AdapterKeys, ConfigError, PollTiming};

/// What the SDKs ask the server to hold a `/sync` for (matrix-rust-sdk and mautrix: 30 s;
/// docs/research/matrix-client-server.md §8).
const POLL_TIMEOUT: Duration = Duration::from_secs(30);

/// A Matrix adapter's settings: events by `/sync` long polling, messages by
/// `PUT /rooms/{roomId}/send/m.room.message/{txnId}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The client-server API's base (`https://matrix.example.org`), without a trailing slash.
    pub homeserver: String,
    /// `@bot:example.org`: whose messages are the bot's own.
    pub user_id: String,
    /// The variable holding the access token.
    pub token_env: String,
    /// The rooms to listen in; empty, every room the bot has joined.
    pub rooms: Vec<String>,
    pub poll: PollTiming,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    homeserver: Option<Spanned<String>>,
    user_id: Option<Spanned<String>>,
    token_env: Option<String>,
    rooms: Option<Spanned<Vec<String>>>,
    poll_timeout: Option<Spanned<String>>,
    poll_grace: Option<Spanned<String>>,
}

pub(super) fn parse(keys: &AdapterKeys) -> Result<Config, ConfigError> {
    let raw: Raw = keys.read()?;
    let name = keys.name();
    keys.env_name("token-env", &raw.token_env)?;
    let homeserver = keys
        .url("homeserver", &raw.homeserver, "https://", "http://")?
        .map(|u| u.trim_end_matches('/').to_owned());
    let homeserver = keys.required(
        &homeserver,
        "homeserver",
        "\"https://matrix.example.org\" (the homeserver's client-server API)",
    )?;
    let user_id = keys.required(&raw.user_id, "user-id", "\"@bot:example.org\"")?;
    if !is_id(user_id.get_ref(), '@') {
        return keys.err(
            user_id.span(),
            format!(
                "adapter {name:?}: user-id must be a Matrix user id, \"@localpart:server\", \
                 like \"@bot:example.org\""
            ),
        );
    }
    let rooms = match raw.rooms {
        None => Vec::new(),
        Some(rooms) => {
            if let Some(bad) = rooms.get_ref().iter().find(|r| !is_id(r, '!')) {
                return keys.err(
                    rooms.span(),
                    format!(
                        "adapter {name:?}: rooms has {bad:?}, which is not a room id; a room id \
                         is \"!opaque:server\" (Element: Room settings, Advanced)"
                    ),
                );
            }
            rooms.into_inner()
        }
    };
    Ok(Config {
        homeserver,
        user_id: user_id.into_inner(),
        token_env: keys.required(
            &raw.token_env,
            "token-env",
            "\"MATRIX_ACCESS_TOKEN\" (a variable in the profile's .env holding the bot's \
             access token)",
        )?,
        rooms,
        poll: keys.poll_timing(&raw.poll_timeout, &raw.poll_grace, POLL_TIMEOUT)?,
    })
}

/// `sigil` `localpart` `:` `server`, nothing blank, no space or control: the grammar's
/// outline (spec, Appendices: Identifier Grammar), enough to catch a paste of the wrong thing.
pub(super) fn is_id(id: &str, sigil: char) -> bool {
    let Some((local, server)) = id.strip_prefix(sigil).and_then(|r| r.split_once(':')) else {
        return false;
    };
    id.len() <= 255
        && !local.is_empty()
        && !server.is_empty()
        && !id.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::parse;
    use crate::platform::{GatewayConfig, Protocol};

    fn parse_str(text: &str) -> Result<GatewayConfig, crate::config::ConfigError> {
        parse(Path::new("/p/gateway.toml"), text)
    }

    const MX: &str = "[[adapter]]\nname = \"mx\"\nkind = \"matrix\"\n\
        homeserver = \"https://matrix.example.org/\"\nuser-id = \"@bot:example.org\"\n\
        token-env = \"MX_TOKEN\"\n";

    #[test]
    fn matrix_defaults() {
        let spec = parse_str(MX).unwrap().adapters[0].clone();
        let Protocol::Matrix(c) = &spec.protocol else {
            panic!("{:?}", spec.protocol)
        };
        assert_eq!(c.homeserver, "https://matrix.example.org");
        assert_eq!(c.poll.timeout, Duration::from_secs(30));
        assert!(c.rooms.is_empty());
        assert_eq!(spec.credential_envs(), ["MX_TOKEN"]);
    }

    #[test]
    fn mistakes_name_the_line_and_the_fix() {
        let cases = [
            (
                MX.replace("@bot:example.org", "bot"),
                "gateway.toml:5",
                "must be a Matrix user id",
            ),
            (
                format!("{MX}rooms = [\"#general:example.org\"]\n"),
                "gateway.toml:7",
                "not a room id",
            ),
            (
                MX.replace("https://matrix", "http://matrix"),
                "gateway.toml:4",
                "only to loopback",
            ),
            (
                "[[adapter]]\nname = \"mx\"\nkind = \"matrix\"\nuser-id = \"@b:x\"\n\
                 token-env = \"T\"\n"
                    .into(),
                "gateway.toml:1",
                "add homeserver",
            ),
            (
                MX.replace("\"MX_TOKEN\"", "\"syt_abc def\""),
                "gateway.toml:1",
                "not a variable name",
            ),
        ];
        for (text, at, what) in cases {
            let e = parse_str(&text).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(what), "{text:?} gave: {e}");
        }
    }
}
