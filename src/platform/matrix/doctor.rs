//! What doctor asks the homeserver about an adapter (HSV020): whether it takes the access
//! token (`whoami`), whether the token is the configured `user-id`'s, and which of the bot's
//! rooms are end-to-end encrypted (`GET /rooms/{roomId}/state/m.room.encryption/`: 200 means
//! encrypted, 404 `M_NOT_FOUND` not), whose messages the gateway cannot read.

use std::path::Path;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::Value;

use super::api::{Api, Refusal};
use super::Config;
use crate::config::Secret;
use crate::platform::standing::{Blocked, Question};
use crate::safe_text::clip;

/// Rooms asked about, at most: doctor answers in seconds.
const MAX_ROOMS: usize = 20;

pub(super) fn question(
    adapter: &str,
    config: &Config,
    token: Secret,
    config_path: &Path,
) -> Question {
    let config = config.clone();
    let name = adapter.to_owned();
    let path = config_path.display().to_string();
    let base = config.homeserver.clone();
    Question::new(
        adapter,
        format!("the Matrix homeserver whether it takes adapter {adapter}'s access token, and which of its rooms are encrypted"),
        format!(
            "curl -s -H 'Authorization: Bearer <ACCESS_TOKEN>' \
             {base}/_matrix/client/v3/account/whoami"
        ),
        move |http| async move {
            let api = Api::new(http, &config.homeserver, &token);
            let who = get(&api, &["account", "whoami"]).await?;
            let who = match who {
                Ok(v) => v,
                Err(r) if r.token_refused() => {
                    return Ok(Some(Blocked {
                        problem: format!(
                            "the homeserver refuses adapter {name}'s access token ({r}), so \
                             the bot hears nothing and sends nothing."
                        ),
                        fix: format!("{} ({path})", r.token_fix(&config.token_env)),
                    }))
                }
                Err(r) => return Err(format!("whoami: {r}")),
            };
            let user = who["user_id"].as_str().unwrap_or("");
            if user != config.user_id {
                return Ok(Some(Blocked {
                    problem: format!(
                        "adapter {name}'s access token is {}'s, not {}'s, so the bot's own \
                         messages would not be known as its own.",
                        clip(user, 80),
                        config.user_id
                    ),
                    fix: format!("set user-id = \"{}\" in {path}, or use the bot's own token", clip(user, 80)),
                }));
            }
            let encrypted = encrypted_rooms(&api, &config.rooms).await?;
            Ok((!encrypted.is_empty()).then(|| Blocked {
                problem: format!(
                    "adapter {name}'s room(s) {} are end-to-end encrypted; the gateway holds no \
                     keys, so their messages are counted and skipped.",
                    encrypted.join(", ")
                ),
                fix: "talk to the bot in a room without encryption (a room's encryption cannot \
                      be turned off), or list only such rooms in rooms"
                    .into(),
            }))
        },
    )
}

/// The rooms (the configured ones, or every joined one) whose encryption state is set.
async fn encrypted_rooms(api: &Api, configured: &[String]) -> Result<Vec<String>, String> {
    let rooms: Vec<String> = if configured.is_empty() {
        let joined = get(api, &["joined_rooms"])
            .await?
            .map_err(|r| format!("joined_rooms: {r}"))?;
        joined["joined_rooms"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect()
    } else {
        configured.to_vec()
    };
    let asks = rooms.iter().take(MAX_ROOMS).map(|room| async move {
        let state = ["rooms", room.as_str(), "state", "m.room.encryption", ""];
        match get(api, &state).await {
            Ok(Ok(_)) => Ok(Some(clip(room, 80))),
            Ok(Err(r)) if r.status == 404 => Ok(None),
            Ok(Err(r)) => Err(format!("the encryption state of {}: {r}", clip(room, 80))),
            Err(e) => Err(e),
        }
    });
    join_all(asks).await.into_iter().filter_map(Result::transpose).collect()
}

/// A GET's JSON answer, or the homeserver's refusal; `Err` when it could not be asked.
async fn get(api: &Api, segments: &[&str]) -> Result<Result<Value, Refusal>, String> {
    let what = segments.first().copied().unwrap_or("");
    let request = api
        .request(Method::GET, segments, &[])
        .ok_or("the access token holds a character an HTTP header cannot carry")?;
    let response = request
        .send()
        .await
        .map_err(|e| format!("{what}: {}", crate::error_chain::one_line(&e.without_url())))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap_or_default();
    if status == 200 {
        Ok(Ok(serde_json::from_slice(&body).unwrap_or(Value::Null)))
    } else {
        Ok(Err(Refusal::read(status, &headers, &body)))
    }
}
