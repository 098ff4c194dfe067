//! The server's event stream on one connection, as the adapter reads it: where it stands (the
//! `connection_id` and the `seq` the next event must carry, what a reconnection asks to
//! resume) and each `posted` event into the spool.
//!
//! The server numbers every event it writes on a connection, `hello` being 0, and a resumed
//! connection goes on numbering where the old one stopped (`web_conn.go`'s `writePump`). So
//! the `seq` asked for is the one after the last event *handled*: a `posted` event counts only
//! once it is in the spool, so a spool that refuses one asks for it again. An event past the
//! one expected is a gap: the events between were lost, and the web app's client
//! (`websocket.ts`) then reconnects to ask for them; so does this adapter (`End::Gap`).

use serde_json::Value;

use super::session::{posted, End};
use super::Mark;
use crate::gateway::adapter::inbox::Inbox;
use crate::gateway::adapter::Deps;
use crate::platform::BotId;

/// What one text frame was.
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
    /// A `hello`: the server's stream (re)starts, under this connection id.
    Hello(String),
    /// An event, handled (a `posted` one stored).
    Event,
    /// The answer to one of our actions: its `seq_reply` and the frame.
    Reply(i64, Value),
    /// Nothing this adapter reads.
    Other,
}

pub(super) struct Events<'a> {
    pub(super) adapter: &'a str,
    pub(super) me: &'a BotId,
    pub(super) deps: &'a Deps,
    pub(super) inbox: Inbox<'a>,
    pub(super) mark: &'a mut Mark,
    /// The connection this stream belongs to (empty until a `hello` names one).
    pub(super) connection_id: String,
    /// The `seq` the next event must carry; `None` until the stream has told us.
    pub(super) next_seq: Option<u64>,
}

impl Events<'_> {
    /// What a reconnection asks the server to resume.
    pub(super) fn resume(&self) -> Option<(String, u64)> {
        let next = self.next_seq?;
        (!self.connection_id.is_empty()).then(|| (self.connection_id.clone(), next))
    }

    /// Reads one text frame: a `hello` restarts the stream, an event is checked against the
    /// `seq` expected and handled, a reply is handed back.
    pub(super) async fn on_text(&mut self, text: &str) -> Result<Seen, End> {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        if let Some(reply) = v["seq_reply"].as_i64() {
            return Ok(Seen::Reply(reply, v));
        }
        let Some(kind) = v["event"].as_str() else {
            return Ok(Seen::Other);
        };
        let seq = v["seq"].as_u64();
        if kind == "hello" {
            let id = v["data"]["connection_id"].as_str().unwrap_or("");
            let id = if super::super::api::is_id(id) { id.to_owned() } else { String::new() };
            self.connection_id = id.clone();
            self.next_seq = seq.map(|s| s.saturating_add(1));
            return Ok(Seen::Hello(id));
        }
        if let (Some(seq), Some(want)) = (seq, self.next_seq) {
            if seq > want {
                return Err(End::Gap(format!("event {seq} came where {want} was due")));
            }
        }
        if kind == "posted" {
            self.store(&v["data"]).await?;
        }
        if let Some(seq) = seq {
            let next = seq.saturating_add(1);
            self.next_seq = Some(self.next_seq.map_or(next, |n| n.max(next)));
        }
        Ok(Seen::Event)
    }

    /// A `posted` event's post into the spool (by its id, so a repeat is stored once), then
    /// the catch-up's mark past it.
    async fn store(&mut self, data: &Value) -> Result<(), End> {
        let Some(data) = posted(data, self.me) else {
            tracing::debug!(adapter = %self.adapter, "a posted event without a readable post");
            return Ok(());
        };
        let id = data["post"]["id"].as_str().unwrap_or("").to_owned();
        let at = data["post"]["create_at"].as_i64().unwrap_or(0);
        let event = crate::gateway::spool::Event::new(id, self.adapter, "posted", None, data);
        self.inbox.append(&event).await.map_err(End::Spool)?;
        self.deps.heartbeat.beat();
        crate::test_hook::kill_at("mattermost-stored", &event.id);
        if let Err(e) = self.mark.advance(at) {
            tracing::warn!(adapter = %self.adapter, error = %e, "the catch-up mark was not kept");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, seq: u64) -> String {
        json!({"event": kind, "seq": seq, "data": {}}).to_string()
    }

    #[tokio::test]
    async fn the_stream_asks_for_the_event_after_the_last_handled_and_ends_at_a_gap() {
        use crate::gateway::health::{ComponentKind, Registry};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let (_tx, shutdown) = tokio::sync::watch::channel(false);
        let deps = Deps {
            spool: std::sync::Arc::new(crate::gateway::spool::Spool::open(&dir.path().join("inbox")).unwrap()),
            heartbeat: Registry::new().register("mm", ComponentKind::Adapter("mattermost"), std::time::Duration::from_secs(60)),
            shared: crate::gateway::adapter::Shared::new(Default::default()).unwrap(),
            shutdown,
        };
        let me = BotId::default();
        let mut mark = Mark::open("mm", dir.path().join("cursor"));
        let mut events = Events {
            adapter: "mm",
            me: &me,
            deps: &deps,
            inbox: Inbox::new("mm", &deps.spool, None),
            mark: &mut mark,
            connection_id: String::new(),
            next_seq: None,
        };
        assert_eq!(events.resume(), None);
        let hello = json!({"event": "hello", "seq": 0,
                           "data": {"connection_id": "cccccccccccccccccccccccccc"}});
        assert_eq!(events.on_text(&hello.to_string()).await, Ok(Seen::Hello("cccccccccccccccccccccccccc".into())));
        assert_eq!(events.on_text(&event("typing", 1)).await, Ok(Seen::Event));
        assert_eq!(events.resume(), Some(("cccccccccccccccccccccccccc".into(), 2)));
        assert_eq!(events.on_text(&event("typing", 1)).await, Ok(Seen::Event), "a repeat");
        assert_eq!(events.resume(), Some(("cccccccccccccccccccccccccc".into(), 2)));
        let reply = json!({"status": "OK", "seq_reply": 2});
        assert!(matches!(events.on_text(&reply.to_string()).await, Ok(Seen::Reply(2, _))));
        assert!(matches!(events.on_text(&event("typing", 4)).await, Err(End::Gap(_))));
        assert_eq!(events.resume(), Some(("cccccccccccccccccccccccccc".into(), 2)), "asks for 2 again");
    }
}
