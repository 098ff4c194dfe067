//! Placeholder until the platform senders land (branch i12-send): replaced at merge.

use super::{Answer, Outgoing, Target, TargetError};

impl Target {
    pub fn parse(kind: &str, text: &str) -> Result<Target, TargetError> {
        let bad = || TargetError::Malformed {
            target: text.to_owned(),
            expected: "a target",
            example: "channel:123",
        };
        match (kind, text.split_once(':')) {
            ("discord", Some(("channel", id))) | ("discord", Some(("", id))) if !id.is_empty() => {
                Ok(Target::DiscordChannel(id.into()))
            }
            ("qqbot", Some(("group", id))) => Ok(Target::QqGroup(id.into())),
            ("qqbot", Some(("user", id))) => Ok(Target::QqUser(id.into())),
            ("qqbot", _) | ("discord", _) => Err(bad()),
            _ => Err(TargetError::CannotSend { kind: kind.into() }),
        }
    }
}

pub struct Sender;

impl Sender {
    pub fn new(
        spec: &crate::config::AdapterSpec,
        _secret: Option<crate::config::Secret>,
        _shared: crate::gateway::adapter::Shared,
    ) -> Option<Sender> {
        (spec.protocol.kind() != "websocket").then_some(Sender)
    }
    pub fn max_text(&self) -> usize {
        2000
    }
    pub async fn send(&self, _msg: &Outgoing) -> Answer {
        Answer::Unknown("not built".into())
    }
    pub fn dedupes(&self, _msg: &Outgoing) -> bool {
        false
    }
}
