//! What was posted while the adapter was away, read by REST after every connection is up:
//! `GET /api/v4/channels/{id}/posts?since=MARK` for every channel the bot is in, each post
//! stored as its `posted` event would have been (by post id, so one the socket also brought
//! is stored once), the mark moved on after each. It reads from a little before the mark
//! ([`OVERLAP_MS`]).
//!
//! A first start, with no mark on disk, reads nothing: what was said before the adapter ever
//! ran is history, not messages to answer. It marks the present instead (this host's clock),
//! so a crash before the first post is stored still catches it up.

use serde_json::{json, Value};

use super::session::{stored, End};
use super::Mark;
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::setup::PlatformError;
use crate::gateway::adapter::Shared;
use crate::gateway::spool::Event;
use crate::platform::mattermost::api::{Api, Channel};
use crate::platform::BotId;

/// How far before the mark the catch-up reads. The server stamps `create_at` when it saves a
/// post and broadcasts it after: two posts saved at once (in two channels) may arrive in the
/// other order, and the mark may already be past the one still on its way when the socket
/// dies. Reading a little earlier costs repeats, which the spool drops (it remembers the last
/// 200,000 ids).
const OVERLAP_MS: i64 = 10_000;

pub(super) async fn run(
    adapter: &str,
    api: &Api,
    shared: &Shared,
    me: &BotId,
    mark: &mut Mark,
    inbox: &mut Inbox<'_>,
) -> Result<(), End> {
    let Some(since) = mark.since() else {
        let now = chrono::Utc::now().timestamp_millis();
        return mark.advance(now).map_err(End::Failed);
    };
    let since = since.saturating_sub(OVERLAP_MS);
    let channels = api.channels(shared).await.map_err(failed)?;
    let mut caught = 0usize;
    for channel in &channels {
        let posts = api.posts_since(shared, &channel.id, since).await.map_err(failed)?;
        for post in posts {
            let at = post["create_at"].as_i64().unwrap_or(0);
            let data = of_channel(post, channel, me);
            let id = data["post"]["id"].as_str().unwrap_or("").to_owned();
            let event = Event::new(id, adapter, "posted", None, data);
            inbox.append(&event).await.map_err(End::Spool)?;
            caught += 1;
            mark.advance(at).map_err(End::Failed)?;
        }
    }
    if caught > 0 {
        tracing::info!(adapter, posts = caught, channels = channels.len(), "caught up by REST");
    }
    Ok(())
}

fn failed(e: PlatformError) -> End {
    End::Failed(format!("catching up: {e}"))
}

/// A post read by REST, stored as its `posted` event would be. The event's `mentions` is the
/// server's list of the users the text mentions; a REST post has none, so the bot's own
/// mention (`@username`, a whole word, as the server's `PossibleAtMentions` reads one) is
/// looked for in the text.
fn of_channel(post: Value, channel: &Channel, me: &BotId) -> Value {
    let mentioned = me.handle.as_deref().is_some_and(|h| mentions(post["message"].as_str().unwrap_or(""), h));
    let mentions = match (&me.id, mentioned) {
        (Some(id), true) => json!([id]),
        _ => json!([]),
    };
    stored(
        post,
        &json!(channel.kind),
        &json!(channel.name),
        &json!(channel.display_name),
        &json!(channel.team_id),
        mentions,
        Value::Null,
        me,
    )
}

/// Whether `text` holds `@handle` as a word (case-insensitive; a trailing `.`, `-` or `_` is
/// punctuation, as the server trims it).
fn mentions(text: &str, handle: &str) -> bool {
    let want = handle.to_lowercase();
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '@' | '.' | '-' | '_')))
        .filter_map(|w| w.strip_prefix('@'))
        .any(|w| w.trim_end_matches(['.', '-', '_']).to_lowercase() == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mention_is_the_handle_as_a_word() {
        assert!(mentions("hey @Hermes, look", "hermes"));
        assert!(mentions("@hermes.", "hermes"));
        assert!(!mentions("@hermesbot hi", "hermes"));
        assert!(!mentions("mail hermes@x.org", "hermes"));
    }
}
