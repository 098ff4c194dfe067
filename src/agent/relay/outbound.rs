//! Hermes's `outbound` actions, done one at a time in the order they came, so that the replies
//! to a chat are queued in the order Hermes made them, while the connection goes on reading;
//! and the chats seen, which `get_chat_info` is answered from.
//!
//! A `send` becomes outbox messages, one per piece of the platform's limit (Hermes never
//! splits for the Relay) and no more than `reply::MAX_PIECES`, each with an idempotency key
//! from the request, and is answered as soon as they are durable: Hermes waits 30 s for a
//! result and then drops the reply without a word, so the result must not wait for the
//! platform. Delivering, retrying and reporting a failure is the outbox's job from there
//! (`GET /v1/messages/{id}`, `status`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::address::{Routes, Wire};
use super::frames;
use crate::gateway::outbox::{Outbox, Policy, Request};
use crate::platform::Message;

/// An action and the request id its result answers, and the platform Hermes tagged it with.
pub struct Action {
    pub request_id: String,
    pub platform: Option<String>,
    pub action: Value,
}

/// Do each action from `actions`, and put the `outbound_result` frame for it in `results`.
pub async fn run(
    outbox: Option<Arc<Outbox>>,
    (seen, routes): (Arc<ChatsSeen>, Arc<Routes>),
    mut actions: mpsc::Receiver<Action>,
    results: mpsc::Sender<String>,
) {
    while let Some(Action {
        request_id,
        platform,
        action,
    }) = actions.recv().await
    {
        let result = match action["op"].as_str() {
            Some("send") => match &outbox {
                Some(outbox) => {
                    let chat = action["chat_id"].as_str().unwrap_or("");
                    let routes_now: Vec<(String, &'static str)> =
                        outbox.routes().map(|(name, r)| (name, r.kind)).collect();
                    let adapters: Vec<(&str, &'static str)> =
                        routes_now.iter().map(|(n, k)| (n.as_str(), *k)).collect();
                    match routes.resolve(platform.as_deref(), chat, &adapters) {
                        Ok(to) => send(outbox, &request_id, &action, to).await,
                        Err(why) => failed(&why),
                    }
                }
                None => failed("the gateway's outbox is not open; see `hermes-svc status`"),
            },
            Some("get_chat_info") => {
                let chat = action["chat_id"].as_str().unwrap_or("");
                let (chat_type, name) = seen.info(chat);
                json!({"success": true, "chat_info": {"name": name, "type": chat_type}})
            }
            Some(op) => failed(&format!(
                "hermes-svc's connector does not do {:?}; it sends messages (op \"send\")",
                op.chars().take(40).collect::<String>()
            )),
            None => failed("an outbound action without an op"),
        };
        if results
            .send(frames::outbound_result(&request_id, &result))
            .await
            .is_err()
        {
            // The connection is gone; what was queued stays queued.
            tracing::debug!(%request_id, "an outbound result with no connection left to take it");
        }
    }
}

fn failed(why: &str) -> Value {
    json!({"success": false, "error": why})
}

/// `send {chat_id, content, reply_to}` into the outbox, to `adapter` and `target` (where the
/// chat id goes, [`Routes::resolve`]).
async fn send(
    outbox: &Outbox,
    request_id: &str,
    action: &Value,
    (adapter, target): (String, String),
) -> Value {
    let adapter = adapter.as_str();
    let content = action["content"].as_str().unwrap_or("");
    if content.trim().is_empty() {
        return failed("the message is empty");
    }
    let Some((max, unit)) = outbox.max_piece(adapter) else {
        return failed(&format!("no adapter {adapter:?} sends in this gateway"));
    };
    let reply_to = action["reply_to"].as_str().filter(|r| !r.is_empty());
    if reply_to.is_none() && is_file_fallback(content) {
        tracing::warn!(%request_id, notice = %content.trim(), "the agent's answer named a file, which the Relay cannot carry in Hermes 0.19.0; its notice is not posted as an answer (files from the agent need the openai bridge or the local API: docs/media.md)");
        return failed("hermes-svc does not post this notice: the Relay carries no files; use the openai bridge or the local API for files (docs/media.md)");
    }
    let mut first = None;
    for (i, text) in crate::agent::reply::messages(content, max, unit)
        .into_iter()
        .enumerate()
    {
        let request = Request {
            files: vec![],
            adapter: adapter.to_owned(),
            target: target.clone(),
            text,
            reply_to: reply_to.map(str::to_owned),
            idempotency_key: format!("relay-{request_id}-{i}"),
            policy: Policy::default(),
        };
        match outbox.submit(request).await {
            Ok(submitted) => {
                first.get_or_insert(submitted.message.id);
            }
            Err(e) => {
                tracing::warn!(%request_id, piece = i, error = %e, "a reply from the agent was refused by the outbox");
                return failed(&e.to_string());
            }
        }
    }
    json!({"success": true, "message_id": first})
}

/// Whether `content` is the notice Hermes 0.19.0 sends by itself, after the answer and
/// replying to nothing, for a file its answer named: its Relay adapter has no file operation,
/// so the base adapter's fallback says `⚠️ Couldn't deliver the image attachment.` (or file,
/// audio, video). Posted, it would read as a second answer, and a wrong one: the gateway
/// could post files, through the other bridge.
fn is_file_fallback(content: &str) -> bool {
    let text = content.trim();
    text.len() < 80
        && text
            .strip_prefix("⚠️ Couldn't deliver the ")
            .is_some_and(|rest| rest.ends_with(" attachment."))
}

/// The chats seen, for `get_chat_info`: a chat id as sent to Hermes, its type and name.
#[derive(Default)]
pub struct ChatsSeen(Mutex<HashMap<String, (String, String)>>);

impl ChatsSeen {
    pub(super) fn saw(&self, wire: &Wire, m: &Message) {
        let chat_id = wire.chat_id.as_str();
        let mut chats = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if chats.len() > 10_000 {
            chats.clear();
        }
        let name = m
            .said
            .chat
            .name
            .clone()
            .unwrap_or_else(|| chat_id.to_owned());
        chats.insert(chat_id.to_owned(), (wire.chat_type.to_owned(), name));
    }

    fn info(&self, chat_id: &str) -> (String, String) {
        let chats = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        chats
            .get(chat_id)
            .cloned()
            .unwrap_or_else(|| ("dm".into(), chat_id.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::is_file_fallback;

    #[test]
    fn hermess_own_notice_for_a_file_is_told_from_an_answer() {
        for kind in ["image", "file", "audio", "video"] {
            assert!(is_file_fallback(&format!(
                "⚠️ Couldn't deliver the {kind} attachment."
            )));
        }
        assert!(!is_file_fallback(
            "I couldn't deliver the image attachment, sorry."
        ));
        assert!(!is_file_fallback(
            "⚠️ Couldn't deliver the image attachment. Here is what it showed: a long answer ..."
        ));
    }
}
