//! The REST v4 calls the adapter makes besides posting (api.mattermost.com): who the bot is
//! (`GET /api/v4/users/me`), the channels it is in (`GET /api/v4/users/me/channels`), and
//! what was posted in one since a time (`GET /api/v4/channels/{id}/posts?since=MS`), which
//! is how a client catches up: the WebSocket replays nothing a closed connection missed
//! (unless the server can resume it, 7.x+).
//!
//! Every call carries the token as `Authorization: Bearer`; a 401 is the token refused (a
//! revoked or mistyped one), which no retry helps.

use serde_json::Value;

use crate::config::Secret;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;
use crate::platform::BotId;

/// The most channels the catch-up reads: an answer is hostile input, and a bot is in a few.
pub(super) const MAX_CHANNELS: usize = 500;
/// The most posts one channel's catch-up takes (the server's own page cap is 200 when
/// `since` is given, `GetPostsSinceForChannel`'s limit of 1000 on 7.x and later).
const MAX_POSTS: usize = 1000;

/// A channel the bot is in: its id, its type (`O` open, `P` private, `D` direct, `G` group)
/// and names, as a `posted` event names them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Channel {
    pub(super) id: String,
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) display_name: String,
    pub(super) team_id: String,
}

/// The REST base and the token, for one adapter.
#[derive(Clone)]
pub(super) struct Api {
    pub(super) server_url: String,
    pub(super) token: Secret,
}

impl Api {
    async fn get(
        &self,
        shared: &Shared,
        what: &str,
        path: &str,
    ) -> Result<Value, PlatformError> {
        let request = shared
            .http
            .get(format!("{}/api/v4/{path}", self.server_url))
            .bearer_auth(self.token.expose());
        let (status, v) = shared.call(what, request).await?;
        read(what, status.as_u16(), v)
    }

    /// The bot's user: its id (what `mentions` and its own posts carry) and username.
    pub(super) async fn me(&self, shared: &Shared) -> Result<BotId, PlatformError> {
        let v = self.get(shared, "users/me", "users/me").await?;
        let id = text(&v["id"])
            .ok_or_else(|| PlatformError::Retry("users/me gave no id".into()))?;
        Ok(BotId {
            id: Some(id),
            handle: text(&v["username"]),
        })
    }

    /// Every channel the bot is in, across its teams.
    pub(super) async fn channels(&self, shared: &Shared) -> Result<Vec<Channel>, PlatformError> {
        let v = self.get(shared, "users/me/channels", "users/me/channels").await?;
        Ok(channels(&v))
    }

    /// Posts in `channel` created or changed at or after `since` (ms since the epoch), oldest
    /// first; deleted ones and edits of older posts are left out.
    pub(super) async fn posts_since(
        &self,
        shared: &Shared,
        channel: &str,
        since: i64,
    ) -> Result<Vec<Value>, PlatformError> {
        if !is_id(channel) {
            return Ok(Vec::new());
        }
        let path = format!("channels/{channel}/posts?since={since}");
        let v = self.get(shared, "channels/posts", &path).await?;
        Ok(posts_since(&v, since))
    }
}

/// A Mattermost id: 26 characters of lowercase base32 (`model.NewId`). Anything else from an
/// answer goes into no path.
pub(super) fn is_id(id: &str) -> bool {
    id.len() == 26 && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn text(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// A call's answer: the body on 200, else the server's `AppError` (`id`, `message`) as the
/// error, fatal for a token it refused.
fn read(what: &str, status: u16, v: Value) -> Result<Value, PlatformError> {
    if status == 200 {
        return Ok(v);
    }
    let said = v["message"].as_str().or(v["id"].as_str()).unwrap_or("");
    let said = crate::safe_text::clip(said, 200);
    match status {
        401 => Err(PlatformError::Fatal(format!(
            "{what} answered HTTP 401 ({said}): the token (token-env) was refused; make a new \
             one (System Console › Integrations › Bot Accounts, or Profile › Security › \
             Personal Access Tokens) and put it in the profile's .env"
        ))),
        _ => Err(PlatformError::Retry(format!("{what} answered HTTP {status}: {said}"))),
    }
}

fn channels(v: &Value) -> Vec<Channel> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let id = text(&c["id"]).filter(|id| is_id(id))?;
            Some(Channel {
                id,
                kind: text(&c["type"]).unwrap_or_else(|| "O".into()),
                name: text(&c["name"]).unwrap_or_default(),
                display_name: text(&c["display_name"]).unwrap_or_default(),
                team_id: text(&c["team_id"]).unwrap_or_default(),
            })
        })
        .take(MAX_CHANNELS)
        .collect()
}

/// A `PostList` (`order`, newest first, and `posts` by id) as the posts created at or after
/// `since` and not deleted, oldest first.
fn posts_since(v: &Value, since: i64) -> Vec<Value> {
    let mut posts: Vec<Value> = v["posts"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter(|p| p["id"].as_str().is_some_and(is_id))
        .filter(|p| p["create_at"].as_i64().is_some_and(|t| t >= since))
        .filter(|p| p["delete_at"].as_i64().unwrap_or(0) == 0)
        .take(MAX_POSTS)
        .cloned()
        .collect();
    posts.sort_by_key(|p| p["create_at"].as_i64().unwrap_or(0));
    posts
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn a_catch_up_keeps_new_posts_oldest_first() {
        let list = json!({"order": [B, A], "posts": {
            A: {"id": A, "create_at": 20, "delete_at": 0},
            B: {"id": B, "create_at": 10, "delete_at": 0},
            "x": {"id": "../x", "create_at": 30},
        }});
        let ids: Vec<_> = posts_since(&list, 5).iter().map(|p| p["id"].clone()).collect();
        assert_eq!(ids, vec![json!(B), json!(A)]);
        assert_eq!(posts_since(&list, 15).len(), 1);
        let deleted = json!({"posts": {A: {"id": A, "create_at": 20, "delete_at": 21}}});
        assert!(posts_since(&deleted, 0).is_empty());
    }

    #[test]
    fn a_refused_token_is_fatal_and_the_rest_retried() {
        let refused = read("users/me", 401, json!({"id": "api.context.session_expired.app_error"}));
        assert!(matches!(refused, Err(PlatformError::Fatal(_))));
        assert!(matches!(read("users/me", 503, Value::Null), Err(PlatformError::Retry(_))));
        let chans = channels(&json!([{"id": A, "type": "D"}, {"id": "bad"}]));
        assert_eq!(chans.len(), 1);
        assert_eq!(chans[0].kind, "D");
    }
}
