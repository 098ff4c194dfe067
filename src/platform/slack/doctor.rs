//! What doctor asks Slack about an adapter (HSV020): whether Slack takes its two tokens, and
//! whether the app may open Socket Mode. The bot token goes to `auth.test`; the app-level
//! token to `apps.connections.open`, whose URL is never opened (every socket counts toward
//! the app's ten and takes events away from the running gateway).

use std::path::Path;

use serde_json::Value;

use super::receive::refusal_fix;
use super::Config;
use crate::config::Secret;
use crate::platform::standing::{Blocked, Question};

pub(super) fn question(
    adapter: &str,
    config: &Config,
    app_token: Secret,
    bot_token: Secret,
    config_path: &Path,
) -> Question {
    let base = config.api_base.clone();
    let name = adapter.to_owned();
    let path = config_path.display().to_string();
    Question::new(
        adapter,
        format!("Slack whether it takes adapter {adapter}'s tokens and lets its app open Socket Mode"),
        format!(
            "curl -s -X POST -H 'Authorization: Bearer <BOT_TOKEN>' {base}/api/auth.test, and \
             the same with the app-level token at {base}/api/apps.connections.open"
        ),
        move |http| async move {
            let auth = call(&http, &base, "auth.test", &bot_token).await?;
            if let Some(error) = refused(&auth) {
                return Ok(Some(Blocked {
                    problem: format!(
                        "Slack refuses adapter {name}'s bot token (auth.test: {error}), so \
                         nothing it sends is posted."
                    ),
                    fix: format!(
                        "put a valid bot token (xoxb-…, from the app's OAuth & Permissions \
                         page) in the variable bot-token-env names in {path}'s .env"
                    ),
                }));
            }
            let open = call(&http, &base, "apps.connections.open", &app_token).await?;
            Ok(refused(&open).map(|error| Blocked {
                problem: format!(
                    "Slack will not let adapter {name} open Socket Mode \
                     (apps.connections.open: {error}), so the bot hears nothing."
                ),
                fix: refusal_fix(&error)
                    .unwrap_or("see Slack's error in the app's settings")
                    .to_owned(),
            }))
        },
    )
}

/// The method's answer, or why Slack could not be asked.
async fn call(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    token: &Secret,
) -> Result<Value, String> {
    let response = http
        .post(format!("{base}/api/{method}"))
        .bearer_auth(token.expose())
        .send()
        .await
        .map_err(|e| format!("{method}: {}", crate::error_chain::one_line(&e)))?;
    let status = response.status();
    let v: Value = response.json().await.unwrap_or(Value::Null);
    if status.as_u16() == 429 || v["error"] == "ratelimited" {
        return Err(format!("{method}: rate limited"));
    }
    Ok(v)
}

/// Slack's error, when it answered `ok: false`.
fn refused(v: &Value) -> Option<String> {
    (v["ok"] != true).then(|| v["error"].as_str().unwrap_or("no answer").to_owned())
}
