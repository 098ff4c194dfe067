//! What a chat is called on the Relay, both ways.
//!
//! Inbound, Hermes keys a chat's session by the `source` it is given:
//! `agent:main:<platform>:<chat_type>:<chat_id>[...]`. By default the gateway names every chat
//! `relay` and `ADAPTER/TARGET` (`tg/chat:123`), so two adapters' chats never share a session
//! and an answer says where it goes. With `[agent] platform-ids = true` it names a chat as
//! Hermes's own adapter for the platform did (each wing's [`HermesPlatform`]), so a chat that
//! Hermes's own gateway held goes on in the same session after the switch; the config allows
//! one adapter per kind then, so a platform's chat id is unique in the profile.
//!
//! Outbound, Hermes tags a reply with the platform of the chat it answers (its
//! `_platform_by_chat`, learned from the inbound `source.platform`) and names the chat as it was
//! given: a platform and its chat id, or an `ADAPTER/TARGET` (which its cron's
//! `deliver: relay:tg/chat:123` also gives, untagged). [`Routes`] turns either into the adapter
//! and the target to post at. What the agent sends is hostile input: a name it gives is only
//! ever compared with the names this gateway made, and a target is parsed by its platform.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::gateway::spool::Event;
use crate::platform::message::{HermesPlatform, HermesSource};
use crate::platform::{Message, Target};

/// Hermes's name for the chats of an adapter it has no platform for, or when the gateway does
/// not speak platform ids: its Relay adapter's own.
pub const RELAY: &str = "relay";

/// The most chats remembered for answers: past it the memory starts over (an answer then goes
/// by the platform's id alone, which every platform but QQ reads).
const MAX_CHATS: usize = 10_000;

/// A chat as Hermes is told it: the `source` of an `inbound` frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    pub platform: String,
    pub chat_id: String,
    pub chat_type: &'static str,
    pub thread_id: Option<String>,
    pub user_id: Option<String>,
    pub user_id_alt: Option<String>,
}

/// The chat id Hermes is given for `m` by default: the adapter and where a reply goes, so
/// that two adapters' chats never share a session and an answer says where it is posted.
pub fn adapter_target(m: &Message) -> String {
    match &m.reply {
        Some(r) => format!("{}/{}", m.adapter, r.target),
        None => format!(
            "{}/{}:{}",
            m.adapter,
            m.said.chat.chat_type.as_str(),
            m.said.chat.id
        ),
    }
}

/// How `m`, read from event `e`, is named to Hermes. `hello` is the platform Hermes said hello
/// for first (`relay` unless told); `platform_ids` is the `[agent]` setting.
pub fn wire(m: &Message, e: &Event, hello: &str, platform_ids: bool) -> Wire {
    let own = platform_ids
        .then(|| crate::platform::hermes(&m.platform))
        .flatten();
    match own {
        Some(HermesPlatform { name, source }) => {
            let ids: HermesSource = source(&m.said, &e.kind, &e.data);
            Wire {
                platform: name.to_owned(),
                chat_id: ids.chat_id,
                chat_type: ids.chat_type,
                thread_id: ids.thread_id,
                user_id: ids.user_id,
                user_id_alt: ids.user_id_alt,
            }
        }
        None => Wire {
            platform: if platform_ids { RELAY } else { hello }.to_owned(),
            chat_id: adapter_target(m),
            chat_type: m.said.chat.chat_type.as_str(),
            thread_id: m.said.thread_id.clone(),
            user_id: Some(m.said.sender.id.clone()),
            user_id_alt: None,
        },
    }
}

/// The Hermes platforms of a gateway's adapters, each once, in the order of `adapters` (`(name,
/// kind)`): what Hermes is told to say hello for (`GATEWAY_RELAY_PLATFORMS`).
pub fn platforms<'a>(kinds: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    let mut out = vec![];
    for kind in kinds {
        if let Some(h) = crate::platform::hermes(kind) {
            if !out.contains(&h.name) {
                out.push(h.name);
            }
        }
    }
    out
}

/// Where an answer goes: `(adapter, target)`.
pub type Destination = (String, String);

/// The chats given to Hermes by their platform ids, with the adapter and target each is
/// answered at; and the adapters that post, by kind.
#[derive(Default)]
pub struct Routes {
    /// `(platform, chat id)` to where it is answered.
    chats: Mutex<HashMap<(String, String), Destination>>,
}

impl Routes {
    /// Remember where chat `wire` is answered, when it was named by a platform id.
    pub fn learn(&self, wire: &Wire, m: &Message) {
        if wire.platform == RELAY {
            return;
        }
        let Some(reply) = &m.reply else { return };
        let mut chats = self
            .chats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if chats.len() >= MAX_CHATS {
            chats.clear();
        }
        chats.insert(
            (wire.platform.clone(), wire.chat_id.clone()),
            (reply.adapter.clone(), reply.target.clone()),
        );
    }

    /// Where a `send` the agent tagged `platform` (or did not) for chat `chat` goes;
    /// `adapters` are the ones that post, `(name, kind)`. Why not, when it cannot be told.
    pub fn resolve(
        &self,
        platform: Option<&str>,
        chat: &str,
        adapters: &[(&str, &'static str)],
    ) -> Result<Destination, String> {
        let platform = platform.filter(|p| *p != RELAY);
        if let Some(p) = platform {
            if let Some(known) = self.known(p, chat) {
                return Ok(known);
            }
        }
        if let Some((adapter, target)) = chat.split_once('/') {
            if adapters.iter().any(|(name, _)| *name == adapter) {
                return Ok((adapter.to_owned(), target.to_owned()));
            }
        }
        let of_platform = |p: &str| {
            adapters
                .iter()
                .find(|(_, kind)| crate::platform::hermes(kind).is_some_and(|h| h.name == p))
        };
        let platform = match platform {
            Some(p) => p.to_owned(),
            None => match self.untagged(chat) {
                Some(found) => return Ok(found),
                None => {
                    let all = platforms(adapters.iter().map(|(_, kind)| *kind));
                    match all.as_slice() {
                        [one] => (*one).to_owned(),
                        _ => {
                            return Err(
                                "chat_id is neither ADAPTER/TARGET nor a chat this connector \
                                 gave, and no platform was named"
                                    .into(),
                            )
                        }
                    }
                }
            },
        };
        let Some((adapter, kind)) = of_platform(&platform) else {
            return Err(format!(
                "no adapter of platform {:?} posts in this gateway",
                platform.chars().take(40).collect::<String>()
            ));
        };
        match Target::parse(kind, chat) {
            Ok(target) => Ok(((*adapter).to_owned(), target.to_string())),
            Err(e) => Err(format!(
                "chat_id is not a chat this connector gave, nor a {kind} target: {e}"
            )),
        }
    }

    fn known(&self, platform: &str, chat: &str) -> Option<Destination> {
        let chats = self
            .chats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        chats.get(&(platform.to_owned(), chat.to_owned())).cloned()
    }

    /// The one chat of id `chat` on any platform, if just one.
    fn untagged(&self, chat: &str) -> Option<Destination> {
        let chats = self
            .chats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut found = chats.iter().filter(|((_, c), _)| c == chat).map(|(_, d)| d);
        match (found.next(), found.next()) {
            (Some(one), None) => Some(one.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::message::{Author, Chat, ChatType, MessageType, Said};

    fn message(adapter: &str, platform: &str, chat: &str, target: &str) -> Message {
        Said {
            chat: Chat {
                id: chat.into(),
                chat_type: ChatType::Group,
                name: None,
            },
            sender: Author {
                id: "u1".into(),
                name: None,
                is_bot: false,
                vouched: true,
            },
            thread_id: None,
            message_id: Some("m1".into()),
            reply_to_message_id: None,
            message_type: MessageType::Text,
            text: "hi".into(),
            media: vec![],
            answer: Some((target.into(), Some("m1".into()))),
        }
        .into_message(platform, adapter)
    }

    fn event(kind: &str, data: serde_json::Value) -> Event {
        serde_json::from_value(serde_json::json!({
            "id": "e1", "adapter": "qq", "kind": kind, "data": data,
            "received_at": "2026-01-01T00:00:00Z", "seq": 1,
        }))
        .unwrap()
    }

    const ADAPTERS: &[(&str, &str)] = &[("qq", "qqbot"), ("tg", "telegram"), ("ws", "websocket")];

    #[test]
    fn a_chat_is_named_by_its_platform_only_with_platform_ids() {
        let m = message("qq", "qqbot", "CH1", "channel:CH1");
        let e = event("AT_MESSAGE_CREATE", serde_json::json!({}));
        let mut m = m;
        m.said.chat.chat_type = ChatType::Channel;
        let relay = wire(&m, &e, "relay", false);
        assert_eq!(relay.platform, "relay");
        assert_eq!(relay.chat_id, "qq/channel:CH1");
        assert_eq!(relay.chat_type, "channel");
        let own = wire(&m, &e, "relay", true);
        assert_eq!(own.platform, "qqbot");
        assert_eq!(own.chat_id, "CH1");
        // Hermes's QQ adapter calls a guild channel a group.
        assert_eq!(own.chat_type, "group");
        // A kind Hermes has no adapter for stays `relay`, by adapter and target.
        let ws = message("ws", "websocket", "r", "r");
        let ws = wire(&ws, &e, "telegram", true);
        assert_eq!(
            (ws.platform.as_str(), ws.chat_id.as_str()),
            ("relay", "ws/r")
        );
    }

    #[test]
    fn an_answer_goes_where_its_chat_was_given_or_where_its_id_says() {
        let routes = Routes::default();
        let m = message("qq", "qqbot", "G1", "group:G1");
        let e = event("GROUP_AT_MESSAGE_CREATE", serde_json::json!({}));
        routes.learn(&wire(&m, &e, "relay", true), &m);
        let dest = |p: Option<&str>, chat: &str| routes.resolve(p, chat, ADAPTERS);
        // A QQ openid says nothing of group or user: only the chat given says.
        assert_eq!(
            dest(Some("qqbot"), "G1"),
            Ok(("qq".into(), "group:G1".into()))
        );
        assert_eq!(dest(None, "G1"), Ok(("qq".into(), "group:G1".into())));
        // ADAPTER/TARGET, as before (and as Hermes's cron `relay:tg/chat:1` gives it).
        assert_eq!(dest(None, "tg/chat:1"), Ok(("tg".into(), "chat:1".into())));
        assert_eq!(dest(Some("relay"), "ws/r"), Ok(("ws".into(), "r".into())));
        // A chat never given, by a platform id its platform reads.
        assert_eq!(
            dest(Some("telegram"), "-100"),
            Ok(("tg".into(), "chat:-100".into()))
        );
        // What the agent makes up goes nowhere.
        assert!(dest(Some("telegram"), "../x").is_err());
        assert!(dest(Some("discord"), "1")
            .unwrap_err()
            .contains("no adapter"));
        assert!(dest(None, "nope").is_err(), "two platforms: which?");
        assert!(dest(Some("x".repeat(1000).as_str()), "1").is_err());
    }

    #[test]
    fn hermes_is_told_each_platform_once() {
        assert_eq!(
            platforms(["telegram", "websocket", "qqbot", "telegram"]),
            ["telegram", "qqbot"]
        );
    }
}
