//! Matrix's `m.room.message` as a normalised message (spec, "m.room.message" and the rich
//! replies and threading modules). Only message events are chat; state, membership and
//! encrypted events are not. The bot's own messages come back through `/sync` too: the
//! adapter stores them marked [`OWN`], and they are said as a bot's, so an agent can leave
//! them be.
//!
//! A message addresses the bot ([`addressed`]) by the spec's "user and room mentions": its
//! `content["m.mentions"]["user_ids"]` holds the bot's user id. A rich reply is covered by the
//! same rule, since the spec has a reply mention "the `sender` of the replied to event" there
//! ("Mentioning the replied to user"). Only a client that predates `m.mentions` (an event
//! without it) is read the older way: a pill, an HTML link to the bot's `https://matrix.to/#/`
//! (or `matrix:u/`) URI in its `formatted_body`, which is also how such a client's reply
//! fallback (`<mx-reply>`) names the replied-to sender. `@room` (`"room": true`) names no
//! one in particular, and the bot's name or id in the plain `body` is never taken for a
//! mention (the spec keeps those push rules only for backward compatibility).

use serde_json::Value;

use super::target::Target;
use crate::platform::message::{text, Author, Chat, ChatType, Media, MessageType, Said};
use crate::platform::BotId;

/// Set on a stored event whose sender is the adapter's own user id (namespaced, as the spec
/// asks of keys it does not define).
pub(super) const OWN: &str = "hermes_svc.own";

pub(super) fn normalise(kind: &str, e: &Value) -> Option<Said> {
    if kind != "m.room.message" {
        return None;
    }
    let room = text(&e["room_id"])?;
    let event_id = text(&e["event_id"]);
    let content = &e["content"];
    let relates = &content["m.relates_to"];
    let thread = (relates["rel_type"] == "m.thread")
        .then(|| text(&relates["event_id"]))
        .flatten();
    let message_type = match content["msgtype"].as_str() {
        Some("m.image") => MessageType::Photo,
        Some("m.video") => MessageType::Video,
        Some("m.audio") => MessageType::Audio,
        Some("m.file") => MessageType::Document,
        Some("m.location") => MessageType::Location,
        _ => MessageType::Text,
    };
    let media = match (message_type, text(&content["url"])) {
        (MessageType::Text | MessageType::Location, _) | (_, None) => Vec::new(),
        (media_type, url) => vec![Media {
            media_type,
            id: None,
            url,
            name: text(&content["body"]),
            extra: None,
        }],
    };
    Some(Said {
        chat: Chat {
            id: room.clone(),
            chat_type: if thread.is_some() {
                ChatType::Thread
            } else {
                ChatType::Group
            },
            name: None,
        },
        sender: Author {
            id: text(&e["sender"])?,
            name: None,
            is_bot: e[OWN] == true,
            vouched: true,
        },
        thread_id: thread,
        message_id: event_id.clone(),
        reply_to_message_id: text(&relates["m.in_reply_to"]["event_id"]),
        message_type,
        text: without_fallback(content["body"].as_str().unwrap_or("")).to_owned(),
        media,
        // An answer is a rich reply to the message it answers.
        answer: Some((Target(room).to_string(), event_id)),
    })
}

/// Whether event `e` of type `kind` mentions `bot` (its user id), by `m.mentions` or, from a
/// client without it, by a pill in `formatted_body`.
pub(super) fn addressed(kind: &str, e: &Value, bot: &BotId) -> bool {
    if kind != "m.room.message" {
        return false;
    }
    let Some(bot_id) = bot.id.as_deref().filter(|id| !id.is_empty()) else {
        return false;
    };
    let content = &e["content"];
    match content.get("m.mentions") {
        Some(mentions) => mentions["user_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|id| id.as_str() == Some(bot_id)),
        None => content["format"] == "org.matrix.custom.html"
            && links(content["formatted_body"].as_str().unwrap_or(""))
                .any(|href| pill_user(href).as_deref() == Some(bot_id)),
    }
}

/// The `href` values of the links in an HTML body, as written (quoted with `"` or `'`).
fn links(html: &str) -> impl Iterator<Item = &str> {
    html.split("href=").skip(1).filter_map(|rest| {
        let quote = rest.chars().next().filter(|q| *q == '"' || *q == '\'')?;
        let value = &rest[1..];
        value.find(quote).map(|end| &value[..end])
    })
}

/// The user a link is a pill for: `https://matrix.to/#/@user:server` (percent-encoded or
/// not, with or without a `?via=` query) or `matrix:u/user:server`.
fn pill_user(href: &str) -> Option<String> {
    let user = if let Some(rest) = href.strip_prefix("https://matrix.to/#/") {
        decode(rest.split('?').next()?)?
    } else {
        let rest = href.strip_prefix("matrix:u/")?;
        format!("@{}", decode(rest.split(['?', '/']).next()?)?)
    };
    (user.starts_with('@') && user.contains(':')).then_some(user)
}

/// `text` with its `%XX` escapes decoded; `None` when one is broken or not UTF-8.
fn decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// The body less a reply's quoted fallback (`> <@user> …` lines and the blank line after
/// them), which older clients still send and MSC2781 says to strip when reading.
fn without_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body;
    }
    let mut rest = body;
    while let Some(line_end) = rest.strip_prefix("> ").map(|r| r.find('\n')) {
        match line_end {
            Some(i) => rest = &rest[2 + i + 1..],
            None => return "",
        }
    }
    rest.strip_prefix('\n').unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_is_answered_as_a_reply_and_the_bots_own_is_marked() {
        let e = json!({"room_id": "!r:hs", "event_id": "$2", "sender": "@alice:hs",
            "type": "m.room.message", "content": {"msgtype": "m.text",
            "body": "> <@bob:hs> earlier\n> more\n\nhi",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$1"}}}});
        let said = normalise("m.room.message", &e).unwrap();
        assert_eq!(said.text, "hi");
        assert_eq!(said.answer, Some(("room:!r:hs".into(), Some("$2".into()))));
        assert_eq!(said.reply_to_message_id.as_deref(), Some("$1"));
        assert!(!said.sender.is_bot);
        let mut own = e.clone();
        own[OWN] = json!(true);
        assert!(normalise("m.room.message", &own).unwrap().sender.is_bot);
        let thread = json!({"room_id": "!r:hs", "event_id": "$3", "sender": "@a:hs",
            "content": {"msgtype": "m.text", "body": "in thread",
            "m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}}});
        let said = normalise("m.room.message", &thread).unwrap();
        assert_eq!(said.thread_id.as_deref(), Some("$root"));
        assert!(normalise("m.room.encrypted", &e).is_none());
        assert!(normalise("m.room.message", &json!({"content": {}})).is_none());
    }

    const BOT: &str = "@hermes:example.org";

    fn bot() -> BotId {
        BotId {
            id: Some(BOT.into()),
            handle: None,
        }
    }

    fn message(content: Value) -> Value {
        json!({"type": "m.room.message", "room_id": "!r:example.org", "event_id": "$e",
            "sender": "@alice:example.org", "content": content})
    }

    #[test]
    fn the_bot_in_m_mentions_addresses_it() {
        // The spec's example, addressed to the bot.
        let e = message(json!({"body": "Hello Hermes!", "msgtype": "m.text",
            "format": "org.matrix.custom.html",
            "formatted_body": "Hello <a href='https://matrix.to/#/@hermes:example.org'>Hermes</a>!",
            "m.mentions": {"user_ids": ["@hermes:example.org"]}}));
        assert!(addressed("m.room.message", &e, &bot()));
        // A rich reply to the bot's message mentions the replied-to sender the same way.
        let reply = message(json!({"body": "That sounds like a great idea!", "msgtype": "m.text",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$another_event"}},
            "m.mentions": {"user_ids": ["@hermes:example.org"]}}));
        assert!(addressed("m.room.message", &reply, &bot()));
        assert!(!addressed("m.room.encrypted", &reply, &bot()));
    }

    #[test]
    fn m_mentions_is_what_counts_when_it_is_there() {
        // Someone else, the room, or nobody: a pill or the bot's id in the text is not enough.
        for mentions in [json!({"user_ids": ["@alice:example.org"]}), json!({"room": true}), json!({})] {
            let e = message(json!({"msgtype": "m.text", "body": "@hermes:example.org hermes",
                "format": "org.matrix.custom.html",
                "formatted_body": "<a href=\"https://matrix.to/#/@hermes:example.org\">Hermes</a>",
                "m.mentions": mentions}));
            assert!(!addressed("m.room.message", &e, &bot()), "{e}");
        }
        let look_alike = message(json!({"msgtype": "m.text", "body": "hi",
            "m.mentions": {"user_ids": ["@hermes:example.org.evil", "@hermes2:example.org"]}}));
        assert!(!addressed("m.room.message", &look_alike, &bot()));
        assert!(!addressed("m.room.message", &message(json!({"body": "x",
            "m.mentions": {"user_ids": [BOT]}})), &BotId::default()));
    }

    #[test]
    fn without_m_mentions_a_pill_to_the_bot_addresses_it_and_plain_text_does_not() {
        let html = |formatted: &str| {
            message(json!({"msgtype": "m.text", "body": "Hermes: hi",
                "format": "org.matrix.custom.html", "formatted_body": formatted}))
        };
        for pill in [
            "<a href=\"https://matrix.to/#/@hermes:example.org\">Hermes</a>: hi",
            "<a href='https://matrix.to/#/%40hermes%3Aexample.org?via=example.org'>Hermes</a>",
            "<a href=\"matrix:u/hermes:example.org?action=chat\">Hermes</a>",
            // An older client's reply fallback names the replied-to sender with a pill.
            "<mx-reply><blockquote><a href=\"https://matrix.to/#/!r:example.org/$e\">In reply to</a> \
             <a href=\"https://matrix.to/#/@hermes:example.org\">@hermes:example.org</a><br />earlier\
             </blockquote></mx-reply>thanks",
        ] {
            assert!(addressed("m.room.message", &html(pill), &bot()), "{pill}");
        }
        for not_a_pill in [
            "Hermes: hi",
            "@hermes:example.org hi",
            "<a href=\"https://matrix.to/#/@alice:example.org\">Hermes</a>",
            "<a href=\"https://matrix.to/#/@hermes:example.org.evil\">Hermes</a>",
            "<a href=\"https://evil.example/#/@hermes:example.org\">Hermes</a>",
            "<a href=\"https://matrix.to/#/!room:example.org\">room</a>",
        ] {
            assert!(!addressed("m.room.message", &html(not_a_pill), &bot()), "{not_a_pill}");
        }
        let plain = message(json!({"msgtype": "m.text", "body": "@hermes:example.org hi"}));
        assert!(!addressed("m.room.message", &plain, &bot()));
        // A pill only counts in an HTML body.
        let untyped = message(json!({"msgtype": "m.text", "body": "x",
            "formatted_body": "<a href=\"https://matrix.to/#/@hermes:example.org\">H</a>"}));
        assert!(!addressed("m.room.message", &untyped, &bot()));
    }

    #[test]
    fn fallbacks_are_stripped_only_where_they_are() {
        assert_eq!(without_fallback("plain"), "plain");
        assert_eq!(without_fallback("> only quote"), "");
        assert_eq!(without_fallback("> q\n\nanswer"), "answer");
        assert_eq!(without_fallback("> q\nanswer"), "answer");
        assert_eq!(without_fallback(">not a quote"), ">not a quote");
    }
}
