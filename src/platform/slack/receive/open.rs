//! `apps.connections.open`: before every connection, a fresh Socket Mode URL (each is good
//! for one connection, and is a credential: never logged), asked for with the app-level
//! token (docs/research/slack-socket-mode.md §1).

use serde_json::Value;

use crate::config::Secret;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;

const OPEN_PATH: &str = "/api/apps.connections.open";

/// The app-level token's refusals that no retry helps, each with its fix.
pub(crate) fn fatal(error: &str) -> Option<&'static str> {
    Some(match error {
        "not_authed" | "invalid_auth" | "token_revoked" | "token_expired" | "account_inactive" => {
            "the app-level token (app-token-env) is not valid any more: make a new one under \
             the app's Basic Information › App-Level Tokens, with the connections:write scope"
        }
        "not_allowed_token_type" => {
            "app-token-env holds a token of the wrong kind: Socket Mode needs the app-level \
             token (xapp-…), not the bot token (xoxb-…)"
        }
        "missing_scope" => "the app-level token lacks the connections:write scope: add it",
        "socket_mode_not_enabled" => {
            "Socket Mode is off for this app: turn it on under the app's Settings › Socket Mode"
        }
        _ => return None,
    })
}

/// A Socket Mode URL, or why there is none.
pub(crate) async fn open(
    shared: &Shared,
    api_base: &str,
    app_token: &Secret,
) -> Result<String, PlatformError> {
    let request = shared
        .http
        .post(format!("{api_base}{OPEN_PATH}"))
        .bearer_auth(app_token.expose());
    let (status, v) = shared.call("apps.connections.open", request).await?;
    read_answer(status.as_u16(), &v)
}

fn read_answer(status: u16, v: &Value) -> Result<String, PlatformError> {
    let error = v["error"].as_str().unwrap_or("");
    if let Some(fix) = fatal(error) {
        return Err(PlatformError::Fatal(format!(
            "apps.connections.open answered {error}: {fix}"
        )));
    }
    if status == 200 && v["ok"] == true {
        return v["url"]
            .as_str()
            .filter(|u| u.starts_with("wss://") || u.starts_with("ws://"))
            .map(str::to_owned)
            .ok_or_else(|| PlatformError::Retry("apps.connections.open gave no WebSocket URL".into()));
    }
    let said = if error.is_empty() { format!("HTTP {status}") } else { error.to_owned() };
    Err(PlatformError::Retry(format!("apps.connections.open answered {said}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_url_or_a_refusal_with_its_fix() {
        let url = read_answer(200, &json!({"ok": true, "url": "wss://x/link/?ticket=t"}));
        assert_eq!(url.unwrap(), "wss://x/link/?ticket=t");
        match read_answer(200, &json!({"ok": false, "error": "not_allowed_token_type"})) {
            Err(PlatformError::Fatal(m)) => assert!(m.contains("xapp-"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_answer(429, &json!({"ok": false, "error": "ratelimited"})),
            Err(PlatformError::Retry(_))
        ));
        assert!(matches!(
            read_answer(200, &json!({"ok": true, "url": "https://no"})),
            Err(PlatformError::Retry(_))
        ));
    }
}
