//! One WebSocket connection, from the upgrade to its end: the authentication challenge and a
//! `ping` action, the first frames up to its answer (a `hello`, or a resumed connection's
//! replay: `handshake.rs`), the catch-up, then `posted` events into the spool
//! (`events.rs`), WebSocket pings with a pong deadline, and every way it ends.
//!
//! Mattermost has no ack: a `posted` event is stored under its post id and the catch-up's
//! mark moves to its `create_at` only once it is stored. The liveness probe is our own
//! WebSocket ping, which the server (gorilla/websocket) answers at once: one pong missing
//! past its deadline, after draining whatever was readable, is a dead connection
//! (`frame_loop`, strict). The server's own pings (every 52 s) are answered by the library.

use std::time::Duration;

use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use super::catch_up;
use super::events::{Events, Seen};
use super::handshake;
use super::Mark;
use crate::config::Timing;
use crate::gateway::adapter::connect::{self, Socket};
use crate::gateway::adapter::frame_loop::{Ended, Frames, Step, Wire};
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::liveness::{self, Liveness, Zombie};
use crate::gateway::adapter::Deps;
use crate::gateway::health::State;
use crate::platform::mattermost::api::Api;
use crate::platform::BotId;

/// The most a `posted` event's `post` (a JSON string inside the frame) may be: the server
/// caps a message at 16,383 characters (`PostMessageMaxRunesV2`), props and metadata add some.
const MAX_POST_JSON: usize = 256 * 1024;

pub(super) struct Session<'a> {
    pub(super) adapter: &'a str,
    pub(super) api: &'a Api,
    pub(super) me: &'a BotId,
    pub(super) resume: Option<(String, u64)>,
    pub(super) ping_interval: Duration,
    pub(super) timing: &'a Timing,
    pub(super) deps: &'a Deps,
    pub(super) mark: &'a mut Mark,
}

#[derive(Debug, PartialEq)]
pub(super) enum End {
    Shutdown,
    Failed(String),
    Zombie(Zombie),
    Closed(Option<u16>),
    Spool(String),
    /// The event stream skipped (or restarted): reconnect and ask for what is missing.
    Gap(String),
}

impl From<Ended> for End {
    fn from(ended: Ended) -> End {
        match ended {
            Ended::Shutdown => End::Shutdown,
            Ended::Closed(code) => End::Closed(code),
            Ended::Zombie(z) => End::Zombie(z),
            Ended::Fenced => End::Failed("fenced: the cluster's lease may be gone".into()),
        }
    }
}

pub(super) struct Outcome {
    pub(super) end: End,
    pub(super) connected_for: Option<Duration>,
    pub(super) stored: u64,
    /// What the next connection asks the server to resume.
    pub(super) resume: Option<(String, u64)>,
}

/// The WebSocket URL of `server_url`, with what to resume when there is something.
pub(super) fn ws_url(server_url: &str, resume: Option<&(String, u64)>) -> String {
    let base = if let Some(rest) = server_url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else {
        format!("ws://{}", server_url.strip_prefix("http://").unwrap_or(server_url))
    };
    let mut url = format!("{base}/api/v4/websocket");
    if let Some((id, seq)) = resume.filter(|(id, _)| super::super::api::is_id(id)) {
        url.push_str(&format!("?connection_id={id}&sequence_number={seq}"));
    }
    url
}

impl Session<'_> {
    pub(super) async fn run(self, shutdown: &mut watch::Receiver<bool>) -> Outcome {
        let prior = self.resume.clone();
        let failed = |end| Outcome {
            end,
            connected_for: None,
            stored: 0,
            resume: prior.clone(),
        };
        let ack = self
            .timing
            .ack_timeout
            .unwrap_or_else(|| liveness::default_ack_timeout(self.ping_interval));
        let url = ws_url(&self.api.server_url, self.resume.as_ref());
        let auth = format!("Bearer {}", self.api.token.expose());
        let shared = &self.deps.shared;
        let connect = connect::connect(&url, Some(&auth), &shared.proxies, self.timing.connect_timeout, ack * 2);
        let mut ws = tokio::select! {
            r = connect => match r {
                Ok(ws) => ws,
                Err(e) => return failed(End::Failed(e.to_string())),
            },
            _ = crate::gateway::until_shutdown(shutdown) => return failed(End::Shutdown),
        };
        let challenge = json!({"seq": handshake::CHALLENGE_SEQ, "action": "authentication_challenge",
                               "data": {"token": self.api.token.expose()}});
        let ping = json!({"seq": handshake::PING_SEQ, "action": "ping"});
        for action in [challenge, ping] {
            if ws.send(Message::text(action.to_string())).await.is_err() {
                return failed(End::Closed(None));
            }
        }
        let (id, next_seq) = match &self.resume {
            Some((id, seq)) => (id.clone(), Some(*seq)),
            None => (String::new(), None),
        };
        let mut events = Events {
            adapter: self.adapter,
            me: self.me,
            deps: self.deps,
            inbox: Inbox::new(self.adapter, &self.deps.spool, None),
            mark: self.mark,
            connection_id: id,
            next_seq,
        };
        let asked = self.resume.is_some();
        let opened = timeout(self.timing.hello_timeout, handshake::run(&mut ws, &mut events, asked)).await;
        let opened = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(end)) => return ended(end, events, None),
            Err(_) => {
                let m = format!("no hello, nor the answer to ping, within {:?}", self.timing.hello_timeout);
                return ended(End::Failed(m), events, None);
            }
        };
        if asked {
            tracing::info!(adapter = %self.adapter, resumed = opened.resumed, replayed = opened.events,
                           "mattermost websocket reconnected");
        }
        live(self.api, events, ws, self.ping_interval, ack, shutdown).await
    }
}

/// The outcome of a connection that ended with `end`, what `events` read kept.
fn ended(end: End, events: Events<'_>, since: Option<Instant>) -> Outcome {
    let resume = events.resume();
    let (_, stored) = events.inbox.finish();
    Outcome {
        end,
        connected_for: since.map(|s| s.elapsed()),
        stored,
        resume,
    }
}

/// Up: catch up by REST, then read the socket until it ends.
///
/// The catch-up runs on a resumed connection too, though the server replayed what it held:
/// a resume is not proof that nothing was missed. The server takes the old connection out
/// of its hub (`checkConn`) before it registers the new one, and a broadcast in between
/// reaches neither, with no gap in `seq` to show for it. What both bring is stored once.
async fn live(
    api: &Api,
    mut events: Events<'_>,
    ws: Socket,
    ping_interval: Duration,
    ack: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> Outcome {
    let deps = events.deps;
    let since = Instant::now();
    let caught = catch_up::run(events.adapter, api, &deps.shared, events.me, events.mark, &mut events.inbox).await;
    if let Err(end) = caught {
        return ended(end, events, Some(since));
    }
    let live = Liveness::new(Instant::now(), ping_interval, ack, 0.0, false, true).strict();
    let mut wire = Wire::new(events.adapter, ws, live, &deps.shared.fence, &deps.shared.grid);
    deps.heartbeat.set_deadline(wire.live.liveness_deadline());
    deps.heartbeat.enter(State::Connected);
    tracing::info!(adapter = %events.adapter, "mattermost websocket up");
    let mut conn = Live { events };
    let end = wire.drive(&mut conn, shutdown).await;
    ended(end, conn.events, Some(since))
}

struct Live<'a> {
    events: Events<'a>,
}

impl Frames for Live<'_> {
    type End = End;

    fn probe(&self) -> Message {
        Message::Ping(Bytes::from_static(b"hermes-svc"))
    }

    async fn on_message(&mut self, wire: &mut Wire<'_>, msg: Message) -> Step<End> {
        let Some(text) = wire.text_of(msg, &self.events.deps.heartbeat) else {
            return Step::Continue;
        };
        match self.events.on_text(&text).await {
            // The server started its stream over: what it dropped is the catch-up's to find.
            Ok(Seen::Hello(_)) => Step::End(End::Gap("a hello in the middle of the stream".into())),
            Ok(_) => Step::Continue,
            Err(end) => Step::End(end),
        }
    }
}

/// A `posted` event's data as stored: its `post` and `mentions` (both JSON strings on the
/// wire) read, the channel's type and names, and whether the post is the bot's own. `None`
/// when the post is not one (no valid id).
pub(super) fn posted(data: &Value, me: &BotId) -> Option<Value> {
    let raw = data["post"].as_str().filter(|p| p.len() <= MAX_POST_JSON)?;
    let post: Value = serde_json::from_str(raw).ok()?;
    post["id"].as_str().filter(|id| super::super::api::is_id(id))?;
    let mentions: Value = data["mentions"]
        .as_str()
        .and_then(|m| serde_json::from_str(m).ok())
        .filter(Value::is_array)
        .unwrap_or_else(|| json!([]));
    Some(stored(post, &data["channel_type"], &data["channel_name"], &data["channel_display_name"], &data["team_id"], mentions, data["sender_name"].clone(), me))
}

/// The stored shape of a post, whether it came over the socket or from the catch-up.
#[allow(clippy::too_many_arguments)]
pub(super) fn stored(
    post: Value,
    channel_type: &Value,
    channel_name: &Value,
    display_name: &Value,
    team_id: &Value,
    mentions: Value,
    sender_name: Value,
    me: &BotId,
) -> Value {
    let own = me.id.is_some() && post["user_id"].as_str() == me.id.as_deref();
    json!({
        "post": post,
        "channel_type": channel_type,
        "channel_name": channel_name,
        "channel_display_name": display_name,
        "team_id": team_id,
        "sender_name": sender_name,
        "mentions": mentions,
        "own": own,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_is_the_servers_websocket_with_what_to_resume() {
        assert_eq!(ws_url("https://chat.example.com", None), "wss://chat.example.com/api/v4/websocket");
        let resume = ("cccccccccccccccccccccccccc".to_owned(), 7);
        assert_eq!(
            ws_url("http://127.0.0.1:8065", Some(&resume)),
            "ws://127.0.0.1:8065/api/v4/websocket?connection_id=cccccccccccccccccccccccccc&sequence_number=7"
        );
        let bad = ("x&y=z".to_owned(), 1);
        assert_eq!(ws_url("http://h", Some(&bad)), "ws://h/api/v4/websocket");
    }

    #[test]
    fn a_posted_event_is_read_with_its_post_and_mentions() {
        let me = BotId { id: Some("bbbbbbbbbbbbbbbbbbbbbbbbbb".into()), handle: Some("hermes".into()) };
        let post = json!({"id": "pppppppppppppppppppppppppp", "user_id": "uuuuuuuuuuuuuuuuuuuuuuuuuu",
                          "channel_id": "cccccccccccccccccccccccccc", "message": "hi", "create_at": 5});
        let data = json!({"post": post.to_string(), "channel_type": "O",
                          "mentions": "[\"bbbbbbbbbbbbbbbbbbbbbbbbbb\"]", "sender_name": "@alice"});
        let d = posted(&data, &me).unwrap();
        assert_eq!(d["post"]["message"], "hi");
        assert_eq!(d["mentions"][0], "bbbbbbbbbbbbbbbbbbbbbbbbbb");
        assert_eq!(d["own"], false);
        assert!(posted(&json!({"post": "{\"id\": \"../x\"}"}), &me).is_none());
        assert!(posted(&json!({"post": {"id": "not a string"}}), &me).is_none());
    }
}
