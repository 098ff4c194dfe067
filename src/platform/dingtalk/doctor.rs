//! What doctor asks DingTalk about an adapter (HSV020): whether it takes the app's client id
//! and secret (`oauth2/accessToken`, what every send needs) and lets the app open a Stream
//! connection (`connections/open`; the ticket it answers is never used, and expires in 90 s,
//! so the running gateway's connection is not touched).

use std::path::Path;

use serde_json::{json, Value};

use super::receive::{OPEN_PATH, ROBOT_TOPIC};
use super::token::{refuses_credentials, says, TOKEN_PATH};
use super::Config;
use crate::config::Secret;
use crate::platform::standing::{Blocked, Question};

pub(super) fn question(adapter: &str, config: &Config, secret: Secret, config_path: &Path) -> Question {
    let base = config.api_base.clone();
    let id = config.client_id.clone();
    let name = adapter.to_owned();
    let path = config_path.display().to_string();
    Question::new(
        adapter,
        format!("DingTalk whether it takes adapter {adapter}'s client id and secret and lets its app open a Stream connection"),
        format!(
            "curl -s -X POST -H 'Content-Type: application/json' -d '{{\"appKey\":\"{id}\",\"appSecret\":\"<SECRET>\"}}' \
             {base}{TOKEN_PATH}, and the same as clientId/clientSecret at {base}{OPEN_PATH}"
        ),
        move |http| async move {
            let body = json!({"appKey": id, "appSecret": secret.expose()});
            let (status, v) = call(&http, &format!("{base}{TOKEN_PATH}"), &body).await?;
            if refuses_credentials(status) {
                return Ok(Some(Blocked {
                    problem: format!(
                        "DingTalk refuses adapter {name}'s client id or secret (accessToken: HTTP \
                         {status}{}), so it can neither connect nor send.",
                        says(&v)
                    ),
                    fix: format!(
                        "check client-id in {path} and put the app's Client Secret (the developer \
                         console's Credentials page) in the variable secret-env names in its .env"
                    ),
                }));
            }
            let body = json!({"clientId": id, "clientSecret": secret.expose(),
                "subscriptions": [{"type": "CALLBACK", "topic": ROBOT_TOPIC}]});
            let (status, v) = call(&http, &format!("{base}{OPEN_PATH}"), &body).await?;
            Ok(refuses_credentials(status).then(|| Blocked {
                problem: format!(
                    "DingTalk will not let adapter {name} open a Stream connection \
                     (connections/open: HTTP {status}{}), so the bot hears nothing.",
                    says(&v)
                ),
                fix: "turn on the app's robot in Stream mode (the developer console's robot \
                      settings, message receiving mode: Stream) and publish it"
                    .to_owned(),
            }))
        },
    )
}

/// The endpoint's status and body, or why DingTalk could not be asked.
async fn call(http: &reqwest::Client, url: &str, body: &Value) -> Result<(u16, Value), String> {
    let response = http
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| crate::error_chain::one_line(&e.without_url()))?;
    let status = response.status().as_u16();
    if status == 429 || status >= 500 {
        return Err(format!("DingTalk answered HTTP {status}"));
    }
    Ok((status, response.json().await.unwrap_or(Value::Null)))
}
