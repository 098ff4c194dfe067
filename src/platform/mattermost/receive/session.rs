//! One WebSocket connection, from the upgrade to its end: the authentication challenge,
//! `hello`, the catch-up, then `posted` events into the spool, WebSocket pings with a pong
//! deadline, and every way it ends.
//!
//! Mattermost has no ack: a `posted` event is stored under its post id and the catch-up's
//! mark moves to its `create_at` only once it is stored. The liveness probe is our own
//! WebSocket ping, which the server (gorilla/websocket) answers at once: one pong missing
//! past its deadline, after draining whatever was readable, is a dead connection
//! (`frame_loop`, strict). The server's own pings (every 52 s) are answered by the library.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use super::catch_up;
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
        let challenge = json!({"seq": 1, "action": "authentication_challenge",
                               "data": {"token": self.api.token.expose()}});
        if ws.send(Message::text(challenge.to_string())).await.is_err() {
            return failed(End::Closed(None));
        }
        let connection_id = match timeout(self.timing.hello_timeout, hello(&mut ws)).await {
            Ok(Ok(id)) => id,
            Ok(Err(end)) => return failed(end),
            Err(_) => {
                let m = format!("no hello within {:?}", self.timing.hello_timeout);
                return failed(End::Failed(m));
            }
        };
        self.live(ws, connection_id, ack, shutdown).await
    }

    /// Up: catch up by REST, then read the socket until it ends.
    async fn live(
        self,
        ws: Socket,
        connection_id: String,
        ack: Duration,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Outcome {
        let deps = self.deps;
        let since = Instant::now();
        let mut inbox = Inbox::new(self.adapter, &deps.spool, None);
        let caught = catch_up::run(self.adapter, self.api, &deps.shared, self.me, self.mark, &mut inbox).await;
        if let Err(end) = caught {
            let (_, stored) = inbox.finish();
            return Outcome { end, connected_for: Some(since.elapsed()), stored, resume: None };
        }
        let live = Liveness::new(Instant::now(), self.ping_interval, ack, 0.0, false, true).strict();
        let mut wire = Wire::new(self.adapter, ws, live, &deps.shared.fence, &deps.shared.grid);
        deps.heartbeat.set_deadline(wire.live.liveness_deadline());
        deps.heartbeat.enter(State::Connected);
        tracing::info!(adapter = %self.adapter, "mattermost websocket up");
        let mut conn = Live {
            adapter: self.adapter,
            me: self.me,
            deps,
            inbox,
            mark: self.mark,
            next_seq: None,
        };
        let end = wire.drive(&mut conn, shutdown).await;
        let next_seq = conn.next_seq;
        let (_, stored) = conn.inbox.finish();
        Outcome {
            end,
            connected_for: Some(since.elapsed()),
            stored,
            resume: next_seq.map(|n| (connection_id, n)),
        }
    }
}

/// Reads up to `hello`, its `connection_id` (empty when the server sent none); a challenge
/// the server answered `FAIL` ends the connection.
async fn hello(ws: &mut Socket) -> Result<String, End> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => {
                let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if v["event"] == "hello" {
                    return Ok(v["data"]["connection_id"].as_str().unwrap_or("").to_owned());
                }
                if v["seq_reply"] == 1 && v["status"] == "FAIL" {
                    let said = v["error"]["id"].as_str().unwrap_or("no reason");
                    let said = crate::safe_text::clip(said, 120);
                    return Err(End::Failed(format!("the server refused the authentication challenge: {said}")));
                }
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(End::Closed(frame.map(|f| u16::from(f.code))))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(End::Failed(e.to_string())),
            None => return Err(End::Closed(None)),
        }
    }
}

struct Live<'a> {
    adapter: &'a str,
    me: &'a BotId,
    deps: &'a Deps,
    inbox: Inbox<'a>,
    mark: &'a mut Mark,
    /// The `seq` the server's next event on this connection would carry (the last one read,
    /// plus one), as the web app's client asks a resume for it.
    next_seq: Option<u64>,
}

impl Frames for Live<'_> {
    type End = End;

    fn probe(&self) -> Message {
        Message::Ping(Bytes::from_static(b"hermes-svc"))
    }

    async fn on_message(&mut self, wire: &mut Wire<'_>, msg: Message) -> Step<End> {
        let Some(text) = wire.text_of(msg, &self.deps.heartbeat) else {
            return Step::Continue;
        };
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(seq) = v["seq"].as_u64().filter(|_| v["event"].is_string()) {
            let next = seq.saturating_add(1);
            self.next_seq = Some(self.next_seq.map_or(next, |n| n.max(next)));
        }
        if v["event"] != "posted" {
            return Step::Continue;
        }
        let Some(data) = posted(&v["data"], self.me) else {
            tracing::debug!(adapter = %self.adapter, "a posted event without a readable post");
            return Step::Continue;
        };
        let id = data["post"]["id"].as_str().unwrap_or("").to_owned();
        let at = data["post"]["create_at"].as_i64().unwrap_or(0);
        let event = crate::gateway::spool::Event::new(id, self.adapter, "posted", None, data);
        if let Err(e) = self.inbox.append(&event).await {
            return Step::End(End::Spool(e));
        }
        self.deps.heartbeat.beat();
        crate::test_hook::kill_at("mattermost-stored", &event.id);
        if let Err(e) = self.mark.advance(at) {
            tracing::warn!(adapter = %self.adapter, error = %e, "the catch-up mark was not kept");
        }
        Step::Continue
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
