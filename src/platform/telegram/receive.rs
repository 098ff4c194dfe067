//! Telegram's Bot API, receiving: `getUpdates` long polling.
//!
//! Each poll sends `offset` (one past the last update stored, which confirms everything
//! below it: Telegram forgets confirmed updates), `timeout` (how long the server may hold
//! the poll) and `allowed_updates` (always: Telegram remembers the last list any client
//! sent). The offset moves only after the spool append, so an update is confirmed only once
//! it is stored; a restart polls without an offset and gets every unconfirmed update again,
//! which the spool drops if it has it.
//!
//! Answers, from the Bot API docs ("Making requests", "getUpdates", "ResponseParameters"):
//! `{"ok": true, "result": [Update]}`; or `ok: false` with `error_code`, `description` and
//! `parameters.retry_after` on a 429. A 409 is either another `getUpdates` that terminated
//! ours ("terminated by other getUpdates request") or a webhook set on the token ("can't use
//! getUpdates method while webhook is active"). 401 (and 404, which is what a malformed
//! token gets) means the token itself is wrong.
//!
//! The token is part of every URL (`/bot<token>/METHOD`), so no URL is ever logged or put in
//! an error: only the method's name is.
//!
//! Before the first poll the bot asks who it is (`getMe`: its `id` and `username`), for the
//! access rules to tell a mention of it; within [`GET_ME_DEADLINE`], and asked again before a
//! later poll if that failed ([`BotLookup`]). Meanwhile its id is the token's own: "the part
//! before `:`" of a bot token is the bot's user id.

use std::time::Duration;

use serde_json::{json, Value};

use crate::config::{PollTiming, Secret};
use crate::gateway::adapter::batch::{self, Item};
use crate::gateway::adapter::long_poll::{exchange, Exchange, Poll, Polled};
use crate::gateway::adapter::whoami::Whoami;
use crate::gateway::platform_number;
use crate::gateway::spool::Event;
use crate::platform::bot_lookup::BotLookup;
use crate::platform::BotId;
use crate::safe_text::clip;

/// The longest `getMe` may take: it goes before a poll, and within the 5 s the poll loop
/// leaves beyond a poll's deadline and the backoff before the adapter is called stuck.
const GET_ME_DEADLINE: Duration = Duration::from_secs(4);

/// Without a usable `retry_after`, a 429 waits this long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

pub(crate) struct Telegram {
    adapter: String,
    http: reqwest::Client,
    api_base: String,
    token: Secret,
    token_env: String,
    poll: PollTiming,
    allowed_updates: Vec<String>,
    delete_webhook: bool,
    /// The next poll's `offset`: one past the last update stored.
    offset: Option<i64>,
    /// The last update of the batch being stored; becomes the offset at commit.
    pending: Option<i64>,
    /// Set by a batch holding updates that cannot be confirmed ([`Telegram::stalled`]).
    stalled: Option<String>,
    /// Whether the last poll was answered. Until one is (at start, and after any failure),
    /// polls are short (`timeout` 0): Telegram answers at once, so the adapter reports in
    /// without waiting out a quiet bot's long poll (which would hold `READY=1`, and `start`,
    /// for 30 s), and a path that works again is known to at once.
    answered: bool,
    /// `getMe`, until it is answered.
    me: BotLookup,
}

/// What the adapter's `[[adapter]]` section says, with its token.
pub(crate) struct TelegramConfig<'a> {
    pub(crate) adapter: &'a str,
    pub(crate) api_base: &'a str,
    pub(crate) token: Secret,
    pub(crate) token_env: &'a str,
    pub(crate) poll: PollTiming,
    pub(crate) allowed_updates: &'a [String],
    pub(crate) delete_webhook: bool,
    /// Where `getMe`'s answer goes.
    pub(crate) whoami: Whoami,
}

impl Telegram {
    pub(crate) fn new(config: TelegramConfig, http: reqwest::Client) -> Self {
        let from_token = BotId {
            id: token_bot_id(config.token.expose()),
            handle: None,
        };
        let me = BotLookup::new(config.adapter, config.whoami, Some(from_token));
        Self {
            adapter: config.adapter.to_owned(),
            http,
            api_base: config.api_base.trim_end_matches('/').to_owned(),
            token: config.token,
            token_env: config.token_env.to_owned(),
            poll: config.poll,
            allowed_updates: config.allowed_updates.to_vec(),
            delete_webhook: config.delete_webhook,
            offset: None,
            pending: None,
            stalled: None,
            answered: false,
            me,
        }
    }

    /// How long the server may hold the next poll.
    fn timeout(&self) -> Duration {
        if self.answered {
            self.poll.timeout
        } else {
            Duration::ZERO
        }
    }

    fn request(&self, method: &str, body: &Value) -> reqwest::RequestBuilder {
        let url = format!("{}/bot{}/{method}", self.api_base, self.token.expose());
        self.http.post(url).json(body)
    }

    /// `getMe`: the bot's user id and username.
    async fn get_me(&self) -> Result<BotId, String> {
        let request = self.request("getMe", &json!({}));
        let (status, body) = match exchange(request, GET_ME_DEADLINE).await {
            Exchange::Answer { status, body, .. } => (status, body),
            Exchange::Dead(_) => return Err(format!("getMe: no answer within {GET_ME_DEADLINE:?}")),
            Exchange::Failed(e) => return Err(format!("getMe: {e}")),
        };
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        read_me(status, &v)
    }

    async fn ask(&mut self) -> Polled {
        let mut body = json!({
            "timeout": self.timeout().as_secs(),
            "allowed_updates": self.allowed_updates,
        });
        if let Some(offset) = self.offset {
            body["offset"] = json!(offset);
        }
        let (status, answer) =
            match exchange(self.request("getUpdates", &body), self.deadline()).await {
                Exchange::Answer { status, body, .. } => (status, body),
                Exchange::Dead(e) => return Polled::Dead(e),
                Exchange::Failed(e) => return Polled::Failed(format!("getUpdates: {e}")),
            };
        // Not JSON at all (a proxy's error page) reads as an answer that says nothing.
        let (v, items) =
            batch::read(&answer, "result").map_or((Value::Null, None), |b| (b.envelope, b.items));
        if status == 200 && v["ok"] == json!(true) {
            return match items {
                Some(updates) => Polled::Batch(self.events(updates)),
                None => Polled::Failed("getUpdates answered ok without a result list".into()),
            };
        }
        let description = clip(v["description"].as_str().unwrap_or("no description"), 200);
        let said = format!("getUpdates: HTTP {status}: {description}");
        match status {
            409 if description.contains("webhook") => self.webhook_set(said).await,
            409 => Polled::Conflict(said),
            429 => Polled::Wait(
                super::send::retry_after(&v).unwrap_or(DEFAULT_RETRY_AFTER),
                said,
            ),
            401 | 404 => Polled::Fatal(format!(
                "{said}: Telegram does not know this bot token; check {} in the profile's .env \
                 (the token @BotFather gave, like 123456:ABC...)",
                self.token_env
            )),
            _ => Polled::Failed(said),
        }
    }

    /// Updates as spool events, each named by its `update_id` and typed by the field it
    /// carries (`message`, `callback_query`, ...). One that does not read as JSON is stored
    /// as a quarantined `unreadable` event under its id, so the offset moves past it. One
    /// whose `update_id` cannot be confirmed (none, negative, or with no `i64` after it)
    /// cannot be stored or confirmed at all: it is skipped, and the poll is marked as
    /// stalled, since Telegram will send it again.
    fn events(&mut self, updates: Vec<Item>) -> Vec<Event> {
        let mut events = Vec::with_capacity(updates.len());
        let mut unconfirmable = vec![];
        for update in updates {
            let id_value = match &update {
                Item::Readable(v) => v["update_id"].clone(),
                Item::Unreadable { raw, .. } => {
                    batch::field(raw, "update_id").unwrap_or(Value::Null)
                }
            };
            let confirmable = id_value
                .as_i64()
                .filter(|id| *id >= 0 && platform_number::offset_after(*id).is_some());
            let Some(id) = confirmable else {
                unconfirmable.push(clip(&id_value.to_string(), 40));
                continue;
            };
            self.pending = Some(self.pending.map_or(id, |p| p.max(id)));
            let seq = u64::try_from(id).ok();
            events.push(match update {
                Item::Readable(v) => {
                    let kind = v
                        .as_object()
                        .and_then(|o| o.keys().find(|k| *k != "update_id"))
                        .map_or("update", String::as_str)
                        .to_owned();
                    Event::new(id.to_string(), &self.adapter, kind, seq, v)
                }
                Item::Unreadable { raw, error } => {
                    tracing::warn!(adapter = %self.adapter, update_id = id, %error, "an update that is not valid JSON; stored as an unreadable event");
                    batch::quarantined(id.to_string(), &self.adapter, seq, &raw, &error)
                }
            });
        }
        if !unconfirmable.is_empty() {
            self.stalled = Some(format!(
                "getUpdates: {} update(s) with an update_id that cannot be confirmed ({}), \
                 so Telegram sends them again; skipped",
                unconfirmable.len(),
                unconfirmable.join(", ")
            ));
        }
        events
    }

    /// A webhook blocks polling. Deleted when the config says so (keeping its pending
    /// updates, which the next poll then gets); otherwise fatal, naming the fix.
    async fn webhook_set(&mut self, said: String) -> Polled {
        if !self.delete_webhook {
            return Polled::Fatal(format!(
                "{said}: a webhook is set for this bot token, so Telegram refuses to be \
                 polled; remove it (deleteWebhook) or set delete-webhook = true for this \
                 adapter in gateway.toml"
            ));
        }
        let body = json!({"drop_pending_updates": false});
        match exchange(
            self.request("deleteWebhook", &body),
            Duration::from_secs(15),
        )
        .await
        {
            Exchange::Answer { status: 200, .. } => {
                tracing::warn!(adapter = %self.adapter, "deleted the bot's webhook (delete-webhook = true)");
                Polled::Failed(format!(
                    "{said}; deleted the webhook (delete-webhook = true)"
                ))
            }
            Exchange::Answer { status, .. } => {
                Polled::Failed(format!("{said}; deleteWebhook answered HTTP {status}"))
            }
            Exchange::Dead(e) | Exchange::Failed(e) => {
                Polled::Failed(format!("{said}; deleteWebhook: {e}"))
            }
        }
    }
}
/// `getMe`'s answer: the bot's `id`, and its `username` (what a mention is written with).
fn read_me(status: u16, v: &Value) -> Result<BotId, String> {
    let me = &v["result"];
    match (status, v["ok"].as_bool(), crate::platform::message::id(&me["id"])) {
        (200, Some(true), Some(id)) => Ok(BotId {
            id: Some(id),
            handle: me["username"].as_str().map(str::to_owned),
        }),
        _ => {
            let description = clip(v["description"].as_str().unwrap_or("no description"), 200);
            Err(format!("getMe: HTTP {status}: {description}"))
        }
    }
}

/// The bot's user id as its token names it: the digits before the `:`.
fn token_bot_id(token: &str) -> Option<String> {
    let (id, _) = token.split_once(':')?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.to_owned())
}

impl Poll for Telegram {
    async fn poll(&mut self) -> Polled {
        if self.me.due() {
            let me = self.get_me().await;
            self.me.ask_if_due(GET_ME_DEADLINE, async { me }).await;
        }
        let polled = self.ask().await;
        self.answered = matches!(polled, Polled::Batch(_));
        polled
    }

    /// Every update of the last batch is stored: the next poll confirms them.
    fn commit(&mut self) -> Result<(), String> {
        let next = self.pending.take().and_then(platform_number::offset_after);
        if let Some(next) = next {
            self.offset = Some(self.offset.map_or(next, |o| o.max(next)));
        }
        Ok(())
    }

    /// Why the last poll made no progress: updates that cannot be confirmed come back at
    /// once, so polling again without a wait would be a hot loop.
    fn stalled(&mut self) -> Option<String> {
        self.stalled.take()
    }

    fn deadline(&self) -> Duration {
        self.poll.deadline(self.timeout())
    }

    /// The longest a poll of this adapter lasts: what a previous process's last poll may
    /// still hold the token for.
    fn longest_poll(&self) -> Duration {
        self.poll.deadline(self.poll.timeout)
    }

    /// Whether a webhook is set, for the error that ends a conflict.
    async fn conflict_hint(&mut self) -> String {
        let info = exchange(
            self.request("getWebhookInfo", &json!({})),
            Duration::from_secs(15),
        )
        .await;
        let url = match info {
            Exchange::Answer {
                status: 200, body, ..
            } => serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["result"]["url"].as_str().map(str::to_owned)),
            _ => None,
        };
        match url {
            Some(u) if !u.is_empty() => {
                "; a webhook is also set for this token: remove it (deleteWebhook) or set \
                 delete-webhook = true"
                    .into()
            }
            _ => "; stop the other program polling this token (another gateway, on this machine \
                  or another), or give this profile a token of its own"
                .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_me_names_the_bot_and_a_refusal_says_why() {
        // The Bot API docs' `User`, as getMe returns it.
        let me = json!({"ok": true, "result": {"id": 123456789, "is_bot": true,
            "first_name": "Hermes", "username": "hermes_bot", "can_join_groups": true}});
        assert_eq!(
            read_me(200, &me),
            Ok(BotId {
                id: Some("123456789".into()),
                handle: Some("hermes_bot".into())
            })
        );
        let refused = json!({"ok": false, "error_code": 401, "description": "Unauthorized"});
        assert_eq!(
            read_me(401, &refused),
            Err("getMe: HTTP 401: Unauthorized".into())
        );
        assert!(read_me(200, &json!({"ok": true, "result": {}})).is_err());
    }

    #[test]
    fn a_tokens_bot_id_is_its_digits_before_the_colon() {
        assert_eq!(token_bot_id("123456:ABC-def"), Some("123456".into()));
        for bad in ["", ":abc", "12a:abc", "no colon"] {
            assert_eq!(token_bot_id(bad), None, "{bad}");
        }
    }
}
