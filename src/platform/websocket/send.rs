//! A plain WebSocket: the message becomes the adapter's `send-frame` and goes out over its
//! live connection (`adapter::outlet`), as one text frame.
//!
//! The only answer is the write itself: written counts as sent (the peer has no message id
//! to give back, and no way to say no); a write that failed may still have reached the peer;
//! with no live connection nothing went out and the message waits for one. Nothing drops a
//! repeat, so the outbox's at-most-once or at-least-once policy decides what an unknown
//! becomes.

use std::sync::Arc;
use std::time::Duration;

use super::{Fields, SendFrame, Target};
use crate::gateway::adapter::outlet::{Delivery, Outlet};
use crate::gateway::send::classify::local;
use crate::gateway::send::{Answer, Outgoing, Post};

/// 64 Ki characters: far more than a chat message needs, and a frame every WebSocket server
/// takes (even escaped, well under tungstenite's 16 MiB default).
const MAX_TEXT: usize = 64 * 1024;

pub struct Sender {
    pub(super) frame: SendFrame,
    pub(super) outlet: Arc<Outlet>,
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// Never: the peer has no way to drop a repeat.
    fn dedupes(&self, _msg: &Outgoing<Target>) -> bool {
        false
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        (self.write(msg).await, None)
    }
}

impl Sender {
    async fn write(&self, msg: &Outgoing<Target>) -> Answer {
        let frame = self.frame.render(&Fields {
            target: &msg.target.0,
            text: &msg.text,
            id: &msg.id,
            reply_to: msg.reply_to.as_deref().unwrap_or(""),
        });
        match self.outlet.deliver(frame).await {
            Delivery::Written => Answer::Sent { platform_id: None },
            Delivery::Maybe(why) => Answer::Unknown(why),
            Delivery::NotTaken(why) => Answer::Retry {
                after: None,
                reply: local(why),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    //! Against the outlet, with a stand-in for the live connection (the real one is in
    //! tests/it/adapter_send.rs).

    use super::*;
    use crate::gateway::adapter::outlet::{self, Outlets};
    use serde_json::{json, Value};

    const FRAME: &str =
        r#"{"op":"send","to":"{target}","text":"{text}","id":"{id}","re":"{reply_to}"}"#;

    fn sender(outlets: &Outlets) -> Sender {
        Sender {
            frame: SendFrame::parse(FRAME).unwrap(),
            outlet: outlets.get("a"),
        }
    }

    fn msg(target: Target, text: &str, reply_to: Option<&str>) -> Outgoing<Target> {
        Outgoing {
            id: "m7".into(),
            target,
            text: text.into(),
            reply_to: reply_to.map(Into::into),
            seq: None,
            files: vec![],
        }
    }

    /// A live connection that takes one frame and answers `write`.
    fn connection(outlets: &Outlets, write: Result<(), String>) -> tokio::task::JoinHandle<String> {
        let outlet = outlets.get("a");
        tokio::spawn(async move {
            let mut rx = outlet.receiver();
            let (text, taken) = outlet::next(&mut rx).await.take().unwrap();
            match write {
                Ok(()) => taken.written(),
                Err(e) => taken.failed(e),
            }
            text
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_written_frame_is_sent_and_holds_the_message_as_one_json_value() {
        let outlets = Outlets::default();
        let w = sender(&outlets);
        for text in [
            "say \"hi\"\n\tthere",
            "🦀 汉字 \u{202e}",
            "\",\"op\":\"admin",
            "{id}",
        ] {
            let conn = connection(&outlets, Ok(()));
            let a = w
                .write(&msg(Target("room 1".into()), text, Some("r9")))
                .await;
            assert_eq!(a, Answer::Sent { platform_id: None });
            let frame: Value = serde_json::from_str(&conn.await.unwrap()).unwrap();
            assert_eq!(
                frame,
                json!({"op":"send","to":"room 1","text":text,"id":"m7","re":"r9"})
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_is_unknown() {
        let outlets = Outlets::default();
        let conn = connection(&outlets, Err("broken pipe".into()));
        let a = sender(&outlets)
            .write(&msg(Target("r".into()), "hi", None))
            .await;
        assert_eq!(a, Answer::Unknown("broken pipe".into()));
        let frame: Value = serde_json::from_str(&conn.await.unwrap()).unwrap();
        assert_eq!(frame["re"], "", "no reply_to is an empty string");
    }

    #[tokio::test(start_paused = true)]
    async fn no_live_connection_is_a_retry() {
        let w = sender(&Outlets::default());
        let a = w.write(&msg(Target("r".into()), "hi", None)).await;
        assert!(
            matches!(&a, Answer::Retry { after: None, reply } if reply.message.contains("no live connection")),
            "{a:?}"
        );
    }
}
