//! `auth.test` with the bot token: who the bot is ("checks authentication and tells \"you\"
//! who you are, even if you might be a bot"). Its `user_id` is the bot user's id, which a
//! mention of it is written with (`<@U…>`); `user` is the bot user's name.

use serde_json::Value;

use crate::config::Secret;
use crate::gateway::adapter::Shared;
use crate::platform::BotId;

const AUTH_TEST_PATH: &str = "/api/auth.test";

/// The bot's user, or why Slack did not say.
pub(super) async fn auth_test(
    shared: &Shared,
    api_base: &str,
    bot_token: &Secret,
) -> Result<BotId, String> {
    let request = shared
        .http
        .post(format!("{api_base}{AUTH_TEST_PATH}"))
        .bearer_auth(bot_token.expose());
    let (status, v) = shared
        .call("auth.test", request)
        .await
        .map_err(|e| e.to_string())?;
    read_answer(status.as_u16(), &v)
}

fn read_answer(status: u16, v: &Value) -> Result<BotId, String> {
    let user_id = v["user_id"].as_str().filter(|id| !id.is_empty());
    match (status, v["ok"].as_bool(), user_id) {
        (200, Some(true), Some(id)) => Ok(BotId {
            id: Some(id.to_owned()),
            handle: v["user"].as_str().filter(|u| !u.is_empty()).map(str::to_owned),
        }),
        _ => Err(format!(
            "auth.test answered HTTP {status}: {}",
            v["error"].as_str().unwrap_or("no user_id")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bot_is_auth_tests_user() {
        // A bot token's answer, as the docs and the Node SDK's AuthTestResponse show it.
        let v = json!({"ok": true, "url": "https://subarachnoid.slack.com/",
            "team": "Subarachnoid Workspace", "user": "hermes", "team_id": "T12345678",
            "user_id": "U0LAN0Z89", "bot_id": "B12345678", "is_enterprise_install": false});
        assert_eq!(
            read_answer(200, &v),
            Ok(BotId {
                id: Some("U0LAN0Z89".into()),
                handle: Some("hermes".into())
            })
        );
        let refused = json!({"ok": false, "error": "invalid_auth"});
        assert_eq!(
            read_answer(200, &refused),
            Err("auth.test answered HTTP 200: invalid_auth".into())
        );
        assert!(read_answer(429, &json!({"ok": false, "error": "ratelimited"})).is_err());
    }
}
