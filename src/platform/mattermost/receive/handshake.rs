//! A connection's first frames, up to the answer to the `ping` action sent right after the
//! upgrade: whether the server took it as a new connection or resumed the last one, and what
//! it replayed.
//!
//! The server (`server/channels/`, mattermost/mattermost) answers a resume without a word:
//! `api4/websocket.go` looks the `connection_id` up only when the upgrade carries the token,
//! `Hub.Start` (`app/platform/web_hub.go`) sends `hello` only to a connection used for the
//! first time, and `WebConn.writePump` (`web_conn.go`) either replays the dead queue from the
//! `sequence_number` asked (the events with their first `seq`s), then what was broadcast
//! while the client was away; or, when the gap is no longer held, sends a `hello` with a NEW
//! `connection_id` (`seq` 0); or, when nothing was missed, nothing at all. So waiting for a
//! `hello` would wait forever on a resumed connection. The answer to `ping` is the marker:
//! the router queues it (`wsapi/websocket_handler.go`, `hub.SendMessage`) behind all that,
//! so a `hello` before it means a new connection, none means the one asked for, resumed.
//! The authentication challenge also sent (as the official clients do) is ignored by the
//! server when the upgrade's token authenticated the connection (`websocket_router.go`).

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;

use super::events::{Events, Seen};
use super::session::End;
use crate::gateway::adapter::connect::Socket;

/// Our authentication challenge's `seq`, and our `ping` action's.
pub(super) const CHALLENGE_SEQ: i64 = 1;
pub(super) const PING_SEQ: i64 = 2;

/// How the server took the connection.
#[derive(Debug, PartialEq)]
pub(super) struct Opened {
    /// The connection asked for, carried on (no `hello`).
    pub(super) resumed: bool,
    /// Events read before the marker: on a resumed connection, what the server replayed.
    pub(super) events: u64,
}

/// Reads up to the answer to `ping`, handing each event to `events` (so what is replayed is
/// stored like any other); `asked` is whether the upgrade asked to resume.
pub(super) async fn run(ws: &mut Socket, events: &mut Events<'_>, asked: bool) -> Result<Opened, End> {
    let mut hello = false;
    let mut read = 0u64;
    loop {
        let text = match ws.next().await {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => return Err(End::Closed(frame.map(|f| u16::from(f.code)))),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(End::Failed(e.to_string())),
            None => return Err(End::Closed(None)),
        };
        match events.on_text(&text).await? {
            Seen::Hello(_) => hello = true,
            Seen::Event => read += 1,
            Seen::Reply(CHALLENGE_SEQ, v) if v["status"] == "FAIL" => {
                let said = v["error"]["id"].as_str().unwrap_or("no reason");
                let said = crate::safe_text::clip(said, 120);
                return Err(End::Failed(format!("the server refused the authentication challenge: {said}")));
            }
            Seen::Reply(PING_SEQ, _) if hello || asked => {
                return Ok(Opened { resumed: !hello, events: read });
            }
            Seen::Reply(PING_SEQ, _) => {
                return Err(End::Failed("the server answered ping before any hello".into()));
            }
            Seen::Reply(..) | Seen::Other => {}
        }
    }
}
