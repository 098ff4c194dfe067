//! Sending over the long connection: a reply to a callback is `aibot_respond_msg` under the
//! callback's `req_id` (the message's `reply_to`), as one finished stream message; a message
//! the bot starts is `aibot_send_msg` to a chat. The frame goes through the adapter's outlet
//! into its live connection, which matches the server's answer to it by `req_id`.
//!
//! A reply's stream id is made from the outbox's message id, the same on every attempt, and a
//! second reply with the same stream id refreshes the message it names rather than posting
//! another (the docs' stream reply mechanism): a reply whose answer was lost is repeated
//! safely ([`Post::dedupes`]). A message the bot starts has no such key, so the outbox's
//! policy decides what an unanswered one becomes.

use std::sync::Arc;
use std::time::Duration;

use super::frame;
use super::receive::ERRCODE;
use super::Target;
use crate::gateway::adapter::outlet::{Delivery, Outlet};
use crate::gateway::send::classify::local;
use crate::gateway::send::{Answer, Outgoing, PlatformReply, Post};

/// Hermes's own limit for the platform (`MAX_MESSAGE_LENGTH`, 4000), inside the docs' 20480
/// bytes of a stream's content and 4096 of a markdown message's for Chinese text (three
/// bytes a character leave 6826 and 1365: the sender splits by characters, so the markdown
/// limit is the one a long Chinese text can reach; WeCom answers an error, not a cut).
const MAX_TEXT: usize = 4000;

/// `errcode`s that say "later", not "never": -1 (system busy) and 45009 (the API's frequency
/// limit), WeCom's general codes.
const BUSY: &[i64] = &[-1, 45009];

pub struct Sender {
    pub(super) outlet: Arc<Outlet>,
}

impl Post for Sender {
    type Target = Target;

    fn max_text(&self) -> usize {
        MAX_TEXT
    }

    /// A reply repeats its stream id; a message the bot starts has nothing to repeat.
    fn dedupes(&self, msg: &Outgoing<Target>) -> bool {
        msg.reply_to.is_some()
    }

    async fn send(&self, msg: &Outgoing<Target>) -> (Answer, Option<Duration>) {
        let text = match &msg.reply_to {
            Some(req_id) => frame::respond(req_id, &stream_id(&msg.id), &msg.text),
            None => frame::send(&frame::req_id(frame::SEND), &msg.target.0, &msg.text),
        };
        (classify(self.outlet.deliver(text).await), None)
    }
}

/// The stream id of the outbox's message `id`: the same on every attempt.
fn stream_id(id: &str) -> String {
    format!("hsv-{id}")
}

fn classify(delivery: Delivery) -> Answer {
    match delivery {
        Delivery::Written => Answer::Sent { platform_id: None },
        Delivery::Maybe(why) => match why.strip_prefix(ERRCODE) {
            Some(said) => refused(said),
            None => Answer::Unknown(why),
        },
        Delivery::NotTaken(why) => Answer::Retry {
            after: None,
            reply: local(why),
        },
    }
}

/// The server's answer `N: errmsg` to a command.
fn refused(said: &str) -> Answer {
    let (code, message) = said.split_once(": ").unwrap_or((said, ""));
    let code = code.parse::<i64>().ok();
    let reply = PlatformReply {
        status: None,
        code,
        message: message.to_owned(),
    };
    if code.is_some_and(|c| BUSY.contains(&c)) {
        Answer::Retry { after: None, reply }
    } else {
        Answer::Failed(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_classify() {
        assert_eq!(
            classify(Delivery::Written),
            Answer::Sent { platform_id: None }
        );
        assert!(matches!(
            classify(Delivery::Maybe("no answer within 10s".into())),
            Answer::Unknown(_)
        ));
        assert!(matches!(
            classify(Delivery::Maybe(format!("{ERRCODE}45009: api freq out of limit"))),
            Answer::Retry { reply, .. } if reply.code == Some(45009)
        ));
        assert!(matches!(
            classify(Delivery::Maybe(format!("{ERRCODE}40008: invalid message type"))),
            Answer::Failed(r) if r.code == Some(40008) && r.message == "invalid message type"
        ));
        assert!(matches!(
            classify(Delivery::NotTaken("no live connection".into())),
            Answer::Retry { .. }
        ));
        assert_eq!(stream_id("m1"), stream_id("m1"));
    }
}
