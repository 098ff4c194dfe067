//! The OpenAI-compatible bridge: each chat message becomes a `POST /v1/chat/completions` to
//! the agent (Hermes's API server, or any server that speaks the same), and the answer is
//! posted to the chat through the outbox.
//!
//! One turn runs per chat at a time, since two concurrent requests of one Hermes session both
//! run and merge their turns; later messages of that chat wait in order (`busy = "queue"`) or
//! only the latest of them gets a turn (`busy = "latest"`). Chats do not wait for each other.
//! A message is taken (the durable cursor moves past it, `feed.rs`) once its reply is queued
//! or its turn has failed; a reply's idempotency keys come from the message's event, and a turn
//! whose reply is already queued is not run again: a gateway killed mid-turn runs the turn
//! again when it comes back, and never posts two answers to one message.

mod call;
mod turn_body;

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::call::Answer;
use self::turn_body::TurnBody;
use super::chats::Chats;
use super::feed::Feed;
use super::link::Link;
use crate::config::{Busy, OpenAiSpec, Secret};
use crate::gateway::outbox::{Outbox, Policy, Request};
use crate::gateway::until_shutdown;
use crate::media::fetch::Inbound;
use crate::platform::{Message, Normaliser};

/// Messages held in memory, in their chats' turns or waiting for them (a chat holds a few,
/// `chats.rs`, and parks the rest of its backlog): so also the most turns at once.
const WINDOW: usize = 64;
/// The longest wait between tries while the agent cannot be reached.
const AWAY_BACKOFF_MAX: Duration = Duration::from_secs(30);

pub struct OpenAi {
    pub spec: OpenAiSpec,
    /// The longest one call may take.
    pub turn_timeout: Duration,
    pub key: Option<Secret>,
    /// The profile's name, in each session key.
    pub profile: String,
    pub normaliser: Normaliser,
    pub outbox: Option<Arc<Outbox>>,
    pub appended: watch::Receiver<u64>,
    pub feed: Feed,
    pub link: Link,
    /// The media store, for a message's files, or why there is none.
    pub media: Result<Arc<Inbound>, String>,
    /// Hermes's home under the agent unit: the one place a file its answer names is sent from.
    pub agent_home: std::path::PathBuf,
}

/// The session a chat's turns run in, as Hermes names its own:
/// `agent:<profile>:<platform>:<chat_type>:<adapter>:<chat_id>[:<thread>]`, with the adapter so
/// that two adapters' chats never share one. Hermes refuses a session id with `/`, `\`, `..`
/// or a control character, or longer than 256 characters: those are replaced, and a long one
/// is shortened with a hash that keeps it unique.
pub fn session_key(profile: &str, m: &Message) -> String {
    let mut key = format!(
        "agent:{profile}:{}:{}:{}:{}",
        m.platform,
        m.said.chat.chat_type.as_str(),
        m.adapter,
        m.said.chat.id
    );
    if let Some(thread) = &m.said.thread_id {
        key.push(':');
        key.push_str(thread);
    }
    let mut safe: String = key
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    while safe.contains("..") {
        safe = safe.replace("..", "._");
    }
    if safe.chars().count() > 200 {
        let hash = Sha256::digest(key.as_bytes());
        let short: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
        safe = format!("{}~{short}", safe.chars().take(180).collect::<String>());
    }
    safe
}

/// The idempotency key of piece `i` of the answer to `m`'s event, and the prefix every piece's
/// key shares.
fn reply_key_prefix(adapter: &str, event: &str) -> String {
    let hash = Sha256::digest(event.as_bytes());
    let short: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("agent-{adapter}-{short}-")
}

/// The `Idempotency-Key` of every call asking the agent about `event` in `session`: unique
/// across sessions, since Hermes keeps one cache of keys for all of them.
fn idempotency_key(session: &str, event: &str) -> String {
    let mut h = Sha256::new();
    h.update(session.as_bytes());
    h.update([0]);
    h.update(event.as_bytes());
    let hash: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("hermes-svc-{hash}")
}

/// A message read from the spool and waiting for its turn.
#[derive(Clone)]
struct Pending {
    buffer: String,
    event: String,
    message: Message,
}

/// What every turn needs.
struct Turns {
    http: reqwest::Client,
    url: String,
    key: Option<Secret>,
    model: String,
    failure_notice: Option<String>,
    outbox: Option<Arc<Outbox>>,
    link: Link,
    media: Result<Arc<Inbound>, String>,
    agent_home: std::path::PathBuf,
}

pub async fn serve(mut b: OpenAi, mut shutdown: watch::Receiver<bool>) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(b.turn_timeout)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("hermes-svc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the agent's HTTP client: {e}"))?;
    let turns = Arc::new(Turns {
        http,
        url: format!("{}/chat/completions", b.spec.url),
        key: b.key.clone(),
        model: b.spec.model.clone(),
        failure_notice: b.spec.failure_notice.clone(),
        outbox: b.outbox.clone(),
        link: b.link.clone(),
        media: b.media.clone(),
        agent_home: b.agent_home.clone(),
    });
    let mut chats: Chats<Pending> = Chats::default();
    let mut running: JoinSet<(String, String)> = JoinSet::new();
    let mut appended = b.appended.clone();
    let mut typing = super::typing_ticks();
    // When each running turn started, for its typing indicator.
    let mut started_at: std::collections::HashMap<String, tokio::time::Instant> =
        Default::default();
    loop {
        // Seen before reading, so that an append during the read wakes the wait.
        appended.borrow_and_update();
        let room = b.feed.room(WINDOW, chats.held());
        let normaliser = &b.normaliser;
        let read = b.feed.read(room, |e| {
            super::for_agent(normaliser, e).map(|m| (e.id.clone(), m))
        });
        // The spool could not be read (out of descriptors, say): not a reason to restart the
        // gateway, which would meet the same; the link says so, and the read is tried again.
        let batch = match read {
            Ok(batch) => batch,
            Err(e) => {
                let why = crate::error_chain::one_line(&e);
                tracing::error!(reason = %why, "cannot read the spool for the agent; trying again in a second");
                b.link.error(why);
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                    () = until_shutdown(&mut shutdown) => {
                        running.abort_all();
                        return Ok(());
                    }
                }
            }
        };
        for session in next_turns(&mut b, &mut chats, batch)? {
            if let Some(p) = chats.in_turn(&session) {
                started_at.insert(session.clone(), tokio::time::Instant::now());
                running.spawn(turn(turns.clone(), session.clone(), p.clone()));
            }
        }
        b.link.waiting(b.feed.oldest_waiting());
        tokio::select! {
            _ = typing.tick(), if !running.is_empty() => {
                for (session, p) in chats.turns() {
                    if let Some(at) = started_at.get(session) {
                        super::typing(turns.outbox.as_deref(), &p.message, *at);
                    }
                }
            }
            Some(done) = running.join_next() => {
                let (session, buffer) = done.map_err(|e| format!("an agent turn panicked: {e}"))?;
                chats.end(&session);
                started_at.remove(&session);
                take(&mut b.feed, &b.link, &buffer)?;
            }
            changed = appended.changed() => {
                if changed.is_err() {
                    return Err("the spool closed".into());
                }
            }
            () = until_shutdown(&mut shutdown) => {
                // A turn cut short runs again after the restart; its reply, if it was queued,
                // is not posted twice.
                running.abort_all();
                return Ok(());
            }
        }
    }
}

/// Put `batch` (just read) in its chats, and start the turn of every chat that has none: the
/// chats whose turn started. A message passed over is taken here.
fn next_turns(
    b: &mut OpenAi,
    chats: &mut Chats<Pending>,
    batch: Vec<(String, (String, Message))>,
) -> Result<Vec<String>, String> {
    for (buffer, (event, message)) in batch {
        let session = session_key(&b.profile, &message);
        let pending = Pending {
            buffer: buffer.clone(),
            event,
            message,
        };
        chats.push(session, buffer, pending);
    }
    let (feed, normaliser) = (&mut b.feed, &b.normaliser);
    let started = chats.start(
        b.spec.busy == Busy::Latest,
        |buffer| {
            Ok::<_, super::feed::FeedError>(feed.fetch(buffer)?.and_then(|e| {
                let message = super::for_agent(normaliser, &e)?;
                Some(Pending {
                    buffer: buffer.to_owned(),
                    event: e.id,
                    message,
                })
            }))
        },
        |p| &p.buffer,
    );
    for passed in started.passed {
        tracing::info!(buffer = %passed, "a message overtaken by a later one in its chat gets no turn (busy = \"latest\")");
        take(&mut b.feed, &b.link, &passed)?;
    }
    if let Some(e) = started.error {
        // Like a failed read: said; its chat is tried again at the next event or turn's end.
        let why = crate::error_chain::one_line(&e);
        tracing::error!(reason = %why, "cannot read a chat's next message from the spool");
        b.link.error(why);
    }
    Ok(started.chats)
}

fn take(feed: &mut Feed, link: &Link, buffer: &str) -> Result<(), String> {
    match feed.ack(buffer) {
        Ok(Some(event)) => {
            link.taken(&event);
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => Err(crate::error_chain::one_line(&e)),
    }
}

/// Run `p`'s turn to its end: its reply queued, or its failure said. Returns the session and
/// the message's buffer id, to be taken.
async fn turn(t: Arc<Turns>, session: String, p: Pending) -> (String, String) {
    let prefix = reply_key_prefix(&p.message.adapter, &p.event);
    let answered = t
        .outbox
        .as_ref()
        .and_then(|o| o.latest_with_key_prefix(&prefix))
        .is_some();
    if answered {
        tracing::info!(event = %p.event, "the reply to this message was queued before a restart; its turn is not run again");
        return (session, p.buffer);
    }
    // Its files first: each fetched into the store, or said missing in the text.
    let inbound = t.media.as_deref().map_err(String::as_str);
    let message = super::media::localise(inbound, p.message.clone()).await;
    let body = TurnBody::new(&t.model, &message);
    // The same key every time this message is asked, in this life of the gateway or the next:
    // Hermes answers a call whose key it has seen with that call's answer, waiting for it if it
    // is still running. A gateway killed mid-call asks again on restart; without the key
    // Hermes would run both calls in one session and merge them into one answer.
    let idempotency_key = idempotency_key(&session, &p.event);
    let mut away = Duration::from_secs(1);
    loop {
        let mut request = t
            .http
            .post(&t.url)
            .header("X-Hermes-Session-Id", &session)
            .header("Idempotency-Key", &idempotency_key)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::CONTENT_LENGTH, body.len())
            .body(reqwest::Body::wrap_stream(body.stream()));
        if let Some(key) = &t.key {
            request = request.bearer_auth(key.expose());
        }
        let answer = match request.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                let retry_after = r
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                match call::read_body(r).await {
                    Ok(bytes) => call::read(status, retry_after.as_deref(), &bytes),
                    Err(answer) => answer,
                }
            }
            Err(e) if e.is_timeout() => Answer::Failed("the turn timed out (turn-timeout)".into()),
            Err(e) => Answer::Away(format!(
                "cannot reach the agent: {}",
                crate::error_chain::one_line(&e)
            )),
        };
        match answer {
            Answer::Reply(text) => {
                t.link.connected(true);
                if !text.trim().is_empty() {
                    post(&t, &p, &prefix, &text).await;
                }
                return (session, p.buffer);
            }
            Answer::Busy(wait) => {
                t.link.connected(true);
                tracing::info!(wait = ?wait, "the agent is busy (429); asking again");
                tokio::time::sleep(wait).await;
            }
            Answer::Away(why) => {
                t.link.connected(false);
                t.link.error(why.clone());
                tracing::warn!(%why, retry_in = ?away, "the agent is not there; the message waits for it");
                tokio::time::sleep(away).await;
                away = (away * 2).min(AWAY_BACKOFF_MAX);
            }
            Answer::Failed(why) => {
                t.link.connected(true);
                t.link.error(why.clone());
                tracing::warn!(event = %p.event, %why, "the agent's turn failed; nothing is posted as its reply");
                if let Some(notice) = &t.failure_notice {
                    post(&t, &p, &prefix, notice).await;
                }
                return (session, p.buffer);
            }
        }
    }
}

/// Queue `text` as the answer to `p`, in the platform's pieces (at most
/// [`super::reply::MAX_PIECES`]).
async fn post(t: &Turns, p: &Pending, prefix: &str, text: &str) {
    let Some(outbox) = &t.outbox else {
        tracing::warn!("the outbox is not open; the agent's reply is dropped");
        return;
    };
    let Some(reply) = &p.message.reply else {
        tracing::warn!(adapter = %p.message.adapter, "the adapter cannot post into this chat; the agent's reply is dropped");
        return;
    };
    let Some((max, unit)) = outbox.max_piece(&reply.adapter) else {
        tracing::warn!(adapter = %reply.adapter, "the adapter does not send; the agent's reply is dropped");
        return;
    };
    let split = super::answer_files::split(text);
    let store = t.media.as_deref().ok().map(Inbound::store);
    let (files, notes) = super::media::attachments(store, &t.agent_home, split.files).await;
    let mut text = split.text.trim().to_owned();
    for note in notes {
        text.push_str(&format!("\n[{note}]"));
    }
    let text = text.trim();
    let pieces = if text.is_empty() {
        vec![]
    } else {
        super::reply::messages(text, max, unit)
    };
    for (i, piece) in pieces.into_iter().enumerate() {
        let request = Request {
            files: vec![],
            adapter: reply.adapter.clone(),
            target: reply.target.clone(),
            text: piece,
            reply_to: reply.reply_to.clone(),
            idempotency_key: format!("{prefix}{i}"),
            policy: Policy::default(),
        };
        if let Err(e) = outbox.submit(request).await {
            tracing::warn!(error = %e, "the outbox refused the agent's reply");
            t.link.error(format!("the outbox refused a reply: {e}"));
            return;
        }
    }
    let like = Request {
        files: vec![],
        adapter: reply.adapter.clone(),
        target: reply.target.clone(),
        text: String::new(),
        reply_to: reply.reply_to.clone(),
        idempotency_key: prefix.to_owned(),
        policy: Policy::default(),
    };
    if let Err(e) = outbox
        .submit_files(&like, files, "a file from the agent")
        .await
    {
        t.link.error(format!("the outbox refused a reply: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::message::{Author, Chat, ChatType, MessageType, Said};

    #[test]
    fn session_keys_name_the_profile_platform_chat_and_thread() {
        let said = Said {
            chat: Chat {
                id: "-100".into(),
                chat_type: ChatType::Group,
                name: None,
            },
            sender: Author {
                id: "5".into(),
                name: None,
                is_bot: false,
                vouched: true,
            },
            thread_id: None,
            message_id: Some("9".into()),
            reply_to_message_id: None,
            message_type: MessageType::Text,
            text: "hi".into(),
            media: vec![],
            answer: None,
        };
        let mut m = said.into_message("chatapp", "tg");
        assert_eq!(
            session_key("coder", &m),
            "agent:coder:chatapp:group:tg:-100"
        );
        m.said.thread_id = Some("7".into());
        assert_eq!(
            session_key("coder", &m),
            "agent:coder:chatapp:group:tg:-100:7"
        );
        // What Hermes refuses in a session id is replaced; a long one is cut, still unique.
        m.said.chat.id = "a/b\\c..d\n".into();
        assert_eq!(
            session_key("coder", &m),
            "agent:coder:chatapp:group:tg:a_b_c._d_:7"
        );
        m.said.chat.id = "x".repeat(300);
        let long = session_key("coder", &m);
        m.said.chat.id = format!("{}y", "x".repeat(299));
        assert!(long.chars().count() <= 200 && long != session_key("coder", &m));
        assert_ne!(reply_key_prefix("tg", "1"), reply_key_prefix("tg", "2"));
        assert_ne!(idempotency_key("a", "1"), idempotency_key("b", "1"));
        assert_eq!(idempotency_key("a", "1"), idempotency_key("a", "1"));
        assert!(reply_key_prefix("tg", &"x".repeat(10_000)).len() < 40);
    }
}
