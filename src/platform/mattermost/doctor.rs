//! What doctor asks Mattermost about an adapter (HSV020): whether the server takes its token
//! (`GET /api/v4/users/me`), and whether the account is one that can connect (not
//! deactivated). No WebSocket is opened: every connection of the bot gets every event, and
//! doctor must not look like a second gateway.

use std::path::Path;

use serde_json::Value;

use super::Config;
use crate::config::Secret;
use crate::platform::standing::{Blocked, Question};

pub(super) fn question(adapter: &str, config: &Config, token: Secret, config_path: &Path) -> Question {
    let base = config.server_url.clone();
    let name = adapter.to_owned();
    let path = config_path.display().to_string();
    Question::new(
        adapter,
        format!("Mattermost whether it takes adapter {adapter}'s token"),
        format!("curl -s -H 'Authorization: Bearer <TOKEN>' {base}/api/v4/users/me"),
        move |http| async move {
            let response = http
                .get(format!("{base}/api/v4/users/me"))
                .bearer_auth(token.expose())
                .send()
                .await
                .map_err(|e| format!("users/me: {}", crate::error_chain::one_line(&e)))?;
            let status = response.status().as_u16();
            let v: Value = response.json().await.unwrap_or(Value::Null);
            read(status, &v, &name, &path)
        },
    )
}

fn read(status: u16, v: &Value, name: &str, path: &str) -> Result<Option<Blocked>, String> {
    match status {
        200 if v["delete_at"].as_i64().unwrap_or(0) != 0 => Ok(Some(Blocked {
            problem: format!(
                "adapter {name}'s Mattermost account is deactivated, so it can neither \
                 connect nor post."
            ),
            fix: "activate the bot account again (System Console › Integrations › Bot \
                  Accounts, or Users) or give the adapter another account's token"
                .to_owned(),
        })),
        200 => Ok(None),
        401 => Ok(Some(Blocked {
            problem: format!(
                "Mattermost refuses adapter {name}'s token (users/me: HTTP 401), so the \
                 adapter cannot connect and nothing it sends is posted."
            ),
            fix: format!(
                "make a new token (System Console › Integrations › Bot Accounts, or Profile › \
                 Security › Personal Access Tokens) and put it in the variable token-env \
                 names in {path}'s .env"
            ),
        })),
        other => Err(format!(
            "users/me answered HTTP {other}: {}",
            crate::safe_text::clip(v["message"].as_str().unwrap_or(""), 200)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refused_or_deactivated_account_is_blocked_with_its_fix() {
        assert_eq!(read(200, &json!({"id": "x", "delete_at": 0}), "mm", "p"), Ok(None));
        let refused = read(401, &json!({}), "mm", "p").unwrap().unwrap();
        assert!(refused.fix.contains("token-env"), "{refused:?}");
        let gone = read(200, &json!({"delete_at": 5}), "mm", "p").unwrap().unwrap();
        assert!(gone.problem.contains("deactivated"));
        assert!(read(502, &json!({}), "mm", "p").is_err());
    }
}
