//! What the rules ask to be said, said: a pairing code to an unknown sender's direct message,
//! and a notice to a sender over their budget. Each goes through the outbox like any reply, in
//! the chat the message came from, keyed by the message's event id so that it is sent once.
//!
//! Nothing in them names the owner, the profile or the agent: a stranger learns only that they
//! are not known yet, and how long their code lasts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::pairing::{self, Answer, Store, ANSWER_EVERY_SECS};
use crate::config::Budget;
use crate::gateway::outbox::{Outbox, Policy, Request};
use crate::gateway::until_shutdown;
use crate::platform::message::Reply;
use crate::platform::Message;

/// Something to say to a message's sender.
#[derive(Clone, Debug)]
pub struct Ask {
    sender: String,
    name: Option<String>,
    reply: Reply,
    /// The message's event id: the answer's idempotency key.
    event: String,
    what: What,
}

#[derive(Clone, Debug)]
enum What {
    Pairing,
    OverBudget(Budget),
}

impl Ask {
    /// An unknown sender's direct message, which may get a pairing code; `None` when nothing
    /// can be posted back into its chat.
    pub fn pairing(m: &Message, event: &str) -> Option<Ask> {
        Self::new(m, event, What::Pairing)
    }

    /// A sender's first message over `budget` in a window.
    pub fn over_budget(m: &Message, event: &str, budget: Budget) -> Option<Ask> {
        Self::new(m, event, What::OverBudget(budget))
    }

    fn new(m: &Message, event: &str, what: What) -> Option<Ask> {
        Some(Ask {
            sender: m.said.sender.id.clone(),
            name: m.said.sender.name.clone(),
            reply: m.reply.clone()?,
            event: event.to_owned(),
            what,
        })
    }
}

/// Say what is asked until shutdown, through `outbox` (none: nothing is said).
pub async fn serve(
    mut asks: mpsc::Receiver<Ask>,
    store: Store,
    outbox: Option<Arc<Outbox>>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Who was told that too many codes wait, and when: once per 10 minutes each, as a code.
    let mut told: HashMap<(String, String), Instant> = HashMap::new();
    loop {
        let ask = tokio::select! {
            ask = asks.recv() => match ask {
                Some(ask) => ask,
                None => return,
            },
            () = until_shutdown(&mut shutdown) => return,
        };
        let Some(outbox) = &outbox else { continue };
        let Some(text) = text_for(&ask, &store, &mut told).await else {
            continue;
        };
        let request = Request {
            files: vec![],
            adapter: ask.reply.adapter.clone(),
            target: ask.reply.target.clone(),
            text,
            reply_to: ask.reply.reply_to.clone(),
            idempotency_key: format!("access:{}", ask.event),
            policy: Policy::AtMostOnce,
        };
        if let Err(e) = outbox.submit(request).await {
            tracing::warn!(adapter = %ask.reply.adapter, error = %crate::error_chain::one_line(&e), "cannot queue an answer to an unknown sender");
        }
    }
}

/// What `ask` gets said, if anything.
async fn text_for(
    ask: &Ask,
    store: &Store,
    told: &mut HashMap<(String, String), Instant>,
) -> Option<String> {
    match ask.what {
        What::OverBudget(budget) => Some(over_budget(budget)),
        What::Pairing => {
            let (store, adapter, sender, name) = (
                store.clone(),
                ask.reply.adapter.clone(),
                ask.sender.clone(),
                ask.name.clone(),
            );
            let answer = tokio::task::spawn_blocking(move || {
                store.change(|b| b.request(&adapter, &sender, name.as_deref(), pairing::now()))
            })
            .await;
            match answer {
                Ok(Ok(Answer::Code(code))) => {
                    tracing::info!(adapter = %ask.reply.adapter, sender = %ask.sender, "a pairing code was sent to an unknown sender; `hermes-svc pairing list` shows it");
                    Some(code_text(&code))
                }
                Ok(Ok(Answer::TooMany)) => {
                    let key = (ask.reply.adapter.clone(), ask.sender.clone());
                    let now = Instant::now();
                    let every = Duration::from_secs(ANSWER_EVERY_SECS);
                    if told
                        .get(&key)
                        .is_some_and(|at| now.duration_since(*at) < every)
                    {
                        return None;
                    }
                    told.retain(|_, at| now.duration_since(*at) < every);
                    told.insert(key, now);
                    Some(TOO_MANY.to_owned())
                }
                Ok(Ok(Answer::Quiet)) => None,
                Ok(Err(e)) => {
                    tracing::warn!(error = %crate::error_chain::one_line(&e), "cannot issue a pairing code");
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot issue a pairing code");
                    None
                }
            }
        }
    }
}

/// The message that carries a code.
pub fn code_text(code: &str) -> String {
    format!(
        "Hi! I don't know you yet, so your messages are not passed on.\n\n\
         Your pairing code: {code}\n\n\
         It is valid for one hour. If you know this bot's owner, send them the code and ask \
         them to approve it."
    )
}

const TOO_MANY: &str =
    "Too many people are waiting to be let in right now. Please try again later.";

fn over_budget(budget: Budget) -> String {
    match budget {
        Budget::Limit { messages, per } => format!(
            "You are sending messages faster than they can be answered: only {messages} every \
             {} are passed on, and the rest were not. Please wait a little and try again.",
            humantime::format_duration(per)
        ),
        Budget::Off => String::new(),
    }
}
