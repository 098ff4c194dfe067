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

use std::time::Duration;

use serde_json::{json, Value};

use super::long_poll::{exchange, Exchange, Polled};
use crate::config::{PollTiming, Secret};
use crate::gateway::spool::Event;
use crate::safe_text::clip;

/// Without a `retry_after`, a 429 waits this long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The longest `retry_after` obeyed as given; a longer one (a server bug, or hostile) is cut
/// to this and asked again.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

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
    /// Whether the last poll was answered. Until one is (at start, and after any failure),
    /// polls are short (`timeout` 0): Telegram answers at once, so the adapter reports in
    /// without waiting out a quiet bot's long poll (which would hold `READY=1`, and `start`,
    /// for 30 s), and a path that works again is known to at once.
    answered: bool,
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
}

impl Telegram {
    pub(crate) fn new(config: TelegramConfig, http: reqwest::Client) -> Self {
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
            answered: false,
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

    pub(super) fn deadline(&self) -> Duration {
        self.poll.deadline(self.timeout())
    }

    /// The longest a poll of this adapter lasts: what a previous process's last poll may
    /// still hold the token for.
    pub(super) fn longest_poll(&self) -> Duration {
        self.poll.deadline(self.poll.timeout)
    }

    fn request(&self, method: &str, body: &Value) -> reqwest::RequestBuilder {
        let url = format!("{}/bot{}/{method}", self.api_base, self.token.expose());
        self.http.post(url).json(body)
    }

    pub(super) async fn poll(&mut self) -> Polled {
        let polled = self.ask().await;
        self.answered = matches!(polled, Polled::Batch(_));
        polled
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
                Exchange::Answer { status, body } => (status, body),
                Exchange::Dead(e) => return Polled::Dead(e),
                Exchange::Failed(e) => return Polled::Failed(format!("getUpdates: {e}")),
            };
        let v: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        if status == 200 && v["ok"] == json!(true) {
            return match v["result"].as_array() {
                Some(updates) => Polled::Batch(self.events(updates)),
                None => Polled::Failed("getUpdates answered ok without a result list".into()),
            };
        }
        let description = clip(v["description"].as_str().unwrap_or("no description"), 200);
        let said = format!("getUpdates: HTTP {status}: {description}");
        match status {
            409 if description.contains("webhook") => self.webhook_set(said).await,
            409 => Polled::Conflict(said),
            429 => {
                let after = v["parameters"]["retry_after"]
                    .as_f64()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs_f64)
                    .min(MAX_RETRY_AFTER);
                Polled::Wait(after, said)
            }
            401 | 404 => Polled::Fatal(format!(
                "{said}: Telegram does not know this bot token; check {} in the profile's .env \
                 (the token @BotFather gave, like 123456:ABC...)",
                self.token_env
            )),
            _ => Polled::Failed(said),
        }
    }

    /// Updates as spool events, each named by its `update_id` and typed by the field it
    /// carries (`message`, `callback_query`, ...). One without an `update_id` cannot be
    /// confirmed or deduplicated and is skipped, with a warning.
    fn events(&mut self, updates: &[Value]) -> Vec<Event> {
        let mut events = Vec::with_capacity(updates.len());
        for update in updates {
            let Some(id) = update["update_id"].as_i64() else {
                tracing::warn!(adapter = %self.adapter, "an update without update_id; skipped");
                continue;
            };
            let kind = update
                .as_object()
                .and_then(|o| o.keys().find(|k| *k != "update_id"))
                .map_or("update", String::as_str)
                .to_owned();
            self.pending = Some(self.pending.map_or(id, |p| p.max(id)));
            let seq = u64::try_from(id).ok();
            events.push(Event::new(
                id.to_string(),
                &self.adapter,
                kind,
                seq,
                update.clone(),
            ));
        }
        events
    }

    /// Every update of the last batch is stored: the next poll confirms them.
    pub(super) fn commit(&mut self) {
        if let Some(last) = self.pending.take() {
            self.offset = Some(self.offset.map_or(last + 1, |o| o.max(last + 1)));
        }
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

    /// Whether a webhook is set, for the error that ends a conflict.
    pub(super) async fn conflict_hint(&mut self) -> String {
        let info = exchange(
            self.request("getWebhookInfo", &json!({})),
            Duration::from_secs(15),
        )
        .await;
        let url = match info {
            Exchange::Answer { status: 200, body } => serde_json::from_slice::<Value>(&body)
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
