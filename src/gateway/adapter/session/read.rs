//! What a frame means to a live connection: the liveness tracker and the inbox are told at
//! once, and the session's loop is handed the [`Effect`] to act on.

use serde_json::Value;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::super::dialect::{self, Dialect, GatewayFrame};
use super::super::outcome::SessionEnd;
use super::{Effect, Live};

impl Live<'_> {
    /// What a frame calls for, with the liveness tracker and the inbox told at once.
    pub(super) fn read(&mut self, msg: Message, now: Instant) -> Effect {
        match msg {
            Message::Pong(_) => {
                self.live.on_pong(now);
                Effect::Continue
            }
            Message::Ping(_) | Message::Binary(_) | Message::Frame(_) => {
                self.live.on_inbound(now);
                Effect::Continue
            }
            Message::Close(frame) => {
                Effect::End(SessionEnd::Closed(frame.map(|f| u16::from(f.code))))
            }
            Message::Text(text) => match self.s.dialect {
                Dialect::Gateway(_) => match dialect::read_gateway(&text) {
                    Some(frame) => self.read_gateway(frame, now),
                    None => self.not_json(now),
                },
                Dialect::Plain { .. } => match serde_json::from_str::<Value>(&text) {
                    Ok(value) => {
                        // Any frame answers the app-level ping.
                        self.live.on_ack(now);
                        let id = dialect::plain_event_id(&value);
                        Effect::Store(self.inbox.event(id, "message".into(), None, value))
                    }
                    Err(_) => self.not_json(now),
                },
            },
        }
    }

    fn not_json(&mut self, now: Instant) -> Effect {
        self.live.on_inbound(now);
        tracing::debug!(adapter = %self.s.adapter, "ignoring a non-JSON frame");
        Effect::Continue
    }

    fn read_gateway(&mut self, frame: GatewayFrame, now: Instant) -> Effect {
        if frame == GatewayFrame::Ack {
            self.live.on_ack(now);
        } else if !matches!(
            frame,
            GatewayFrame::Reconnect | GatewayFrame::InvalidSession { .. }
        ) {
            self.live.on_inbound(now);
        }
        match frame {
            GatewayFrame::Ack | GatewayFrame::Other => Effect::Continue,
            GatewayFrame::HeartbeatRequest => Effect::Heartbeat,
            GatewayFrame::Reconnect => Effect::End(SessionEnd::Reconnect),
            GatewayFrame::InvalidSession { resumable } => {
                Effect::End(SessionEnd::InvalidSession { resumable })
            }
            GatewayFrame::Ready { resume, bot } => {
                if let Some(bot) = bot {
                    self.s.whoami.set(self.s.adapter, bot);
                }
                self.inbox.begin(resume);
                Effect::Connected
            }
            GatewayFrame::Resumed { seq } => {
                self.inbox.advance(seq);
                Effect::Connected
            }
            GatewayFrame::Dispatch {
                id,
                kind,
                seq,
                data,
            } => Effect::Store(self.inbox.event(id, kind, seq, data)),
        }
    }
}
